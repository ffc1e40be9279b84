// Placeholder: the reader's bindings (owner: the reader's author).
#include "front_py.hpp"

void ndvm::bind_front_data(nanobind::module_&) {}
