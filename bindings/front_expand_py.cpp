// The expander's entry, for debugging: `_core.expand(source, dmci)` reads with the native
// reader, expands every form as one body (as the front end expands a program without its
// header) and returns the expanded datum as ndvm.lang.datum records.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>
#include <vector>

#include "front_py.hpp"

namespace nb = nanobind;
using ndvm::front::Arena;
using ndvm::front::DRef;

namespace {

nb::object expand_all(Arena& arena, const std::vector<DRef>& top, bool dmci) {
  DRef result = -1;
  try {
    const ndvm::front::Datum& first = arena[top.front()];
    const DRef at = arena.list(top, -1, first.line, first.column);
    ndvm::front::Expander expander(arena, dmci);
    result = expander.expand_body(top.data(), top.size(), at);
  } catch (const ndvm::front::FrontError& e) {
    ndvm::raise_front_error(e);
  }
  return ndvm::datum_to_python(arena, result);
}

}  // namespace

void ndvm::bind_front_expand(nb::module_& m) {
  m.def(
      "expand",
      [](nb::handle source, bool dmci, int64_t max_source_chars, int64_t max_forms) {
        Arena arena;
        const front::ReadOutput out =
            read_or_raise(arena, source, {max_source_chars, max_forms}, false);
        return expand_all(arena, out.top, dmci);
      },
      nb::arg("source"), nb::arg("dmci") = false, nb::arg("max_source_chars") = 5'000'000,
      nb::arg("max_forms") = 50'000,
      "Read `source` (str) and expand its forms as one body (the dmci dialect: let binds "
      "sequentially): the expanded datum; raises ReadError / CompileError / UnsupportedForm.");
}
