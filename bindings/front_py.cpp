// Placeholder: the compile entry (owner: the lead).
#include "front_py.hpp"

void ndvm::bind_front(nanobind::module_&) {}
