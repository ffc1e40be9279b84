// Placeholder: the expander's debugging entry (owner: the expander's author).
#include "front_py.hpp"

void ndvm::bind_front_expand(nanobind::module_&) {}
