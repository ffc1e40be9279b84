// The front end's bindings: data as Python data (front_data_py.cpp), the expander's
// debugging entry (front_expand_py.cpp) and the compile entry with the Python IR
// (front_py.cpp).
#pragma once

#include <nanobind/nanobind.h>

#include "ndvm/front.hpp"

namespace ndvm {  // ndvm32 in the float32 build

// `_core.read(source, allow_empty, max_source_chars, max_forms)` -> (data, symbol names)
void bind_front_data(nanobind::module_& m);
// `_core.expand(source, dmci)` -> the expanded body (one datum), for tests and debugging
void bind_front_expand(nanobind::module_& m);
// the hooks, `_core.front_compile(...)` and its result
void bind_front(nanobind::module_& m);

// A datum of `arena` as the Python records of ndvm.lang.datum (Sym Num Str Bool SList).
nanobind::object datum_to_python(const front::Arena& arena, front::DRef d);
// The tuple of `refs` as Python data.
nanobind::tuple data_to_python(const front::Arena& arena, const front::DRef* refs, size_t n);

// Raise `e` as the ndvm.errors class of its kind (ReadError, CompileError, UnsupportedForm).
[[noreturn]] void raise_front_error(const front::FrontError& e);

// front::read of the str `source` into `arena`; a FrontError is raised as its Python error.
front::ReadOutput read_or_raise(front::Arena& arena, nanobind::handle source,
                                const front::ReadLimits& limits, bool allow_empty);

// A Python str as UTF-8 (lone surrogates kept, as "surrogatepass" encodes them), and back.
std::string utf8_of(nanobind::handle str);
nanobind::str str_of(std::string_view utf8);

}  // namespace ndvm
