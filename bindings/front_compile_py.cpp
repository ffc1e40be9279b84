// A test entry of the resolver and driver: `_core.front_tables(source, inputs, dmci)` -> the
// tables of ndvm::front::compile (params None: declared by the header, or inferred) as
// Python lists, for tests/lang/test_native_compile.py to compare with `_core.lower` of the
// Python IR.
#include <nanobind/nanobind.h>

#include <string>
#include <vector>

#include "front_py.hpp"
#include "ndvm/program.hpp"

namespace nb = nanobind;

namespace {

template <class T>
nb::list list_of(const std::vector<T>& v) {
  nb::list out;
  for (const T& x : v) out.append(x);
  return out;
}

}  // namespace

void bind_front_compile_test(nb::module_& m) {
  m.def(
      "front_tables",
      [](nb::handle source, nb::handle inputs, bool dmci) {
        const std::string text = ndvm::utf8_of(source);
        std::vector<std::string> names;
        for (nb::handle x : inputs) names.push_back(ndvm::utf8_of(x));
        ndvm::front::CompileOptions options;
        options.limits = {5'000'000, 50'000};
        options.dmci = dmci;
        ndvm::front::Compiled c;
        try {
          c = ndvm::front::compile(text, {}, names, options);
        } catch (const ndvm::front::FrontError& e) {
          ndvm::raise_front_error(e);
        }
        const ndvm::front::Tables& t = c.tables;
        nb::list strings, tail, params, prelude, positions;
        for (const std::string& s : t.strings) strings.append(ndvm::str_of(s));
        for (uint8_t x : t.tail) tail.append(int(x));
        for (const auto& p : c.params) {
          params.append(nb::make_tuple(ndvm::str_of(p.name), p.init, ndvm::str_of(p.constraint),
                                       p.line, p.column));
        }
        for (const std::string& p : c.prelude) prelude.append(ndvm::str_of(p));
        for (const auto& [line, col] : c.input_positions) positions.append(nb::make_tuple(line, col));
        return nb::make_tuple(list_of(t.nodes), list_of(t.kids), list_of(t.aux),
                              list_of(t.consts), list_of(t.nums), strings, tail, params,
                              c.has_header, prelude, positions);
      },
      nb::arg("source"), nb::arg("inputs"), nb::arg("dmci"),
      "Test entry: (nodes, kids, aux, consts, nums, strings, tail, params, has_header, "
      "prelude, input_positions) of `source` compiled natively with params=None.");
  m.def(
      "program_tables",
      [](const ndvm::Program& p) {
        nb::list nodes, kids, aux, consts, nums, strings;
        for (const ndvm::Node& n : p.nodes) {
          for (int32_t x : {int32_t(n.kind), int32_t(n.op), n.a, n.b, n.c, int32_t(n.kids),
                            int32_t(n.nkids), n.line, n.column}) {
            nodes.append(x);
          }
        }
        for (uint32_t k : p.kids) kids.append(int32_t(k));
        for (int32_t x : p.aux) aux.append(x);
        for (const ndvm::Const& c : p.consts) {
          consts.append(int32_t(c.kind));
          consts.append(c.a);
          consts.append(c.b);
          nums.append(c.num);
        }
        for (const std::string& s : p.strings) strings.append(ndvm::str_of(s));
        return nb::make_tuple(nodes, kids, aux, consts, nums, strings);
      },
      nb::arg("program"),
      "Test entry: (nodes, kids, aux, consts, nums, strings) of a Program, as built.");
}
