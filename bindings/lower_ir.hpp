// `_core.lower`: the resolved IR (Python records) to the core's Program (lower_ir.cpp).
#pragma once

#include <nanobind/nanobind.h>

namespace ndvm {  // ndvm32 in the float32 build

void bind_lower_ir(nanobind::module_& m);

}  // namespace ndvm
