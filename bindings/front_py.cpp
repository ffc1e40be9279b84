// The compile entry of the front end: `_core.front_compile(...)` -> FrontProgram, which lowers
// to the core's Program straight from the resolved tables, and builds the Python IR records
// (ndvm.lang.ir) on demand, for the evaluators that walk them. Also the message hooks, which
// format names, floats and "did you mean" exactly as Python does.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "front_py.hpp"
#include "ndvm/prims.hpp"
#include "ndvm/program.hpp"

namespace nb = nanobind;
using ndvm::ConstKind;
using ndvm::NodeKind;
using ndvm::front::Compiled;
using ndvm::front::FrontError;
using ndvm::front::ParamSpecOut;

// inside ndvm (ndvm32 in the float32 build): each core registers its own FrontProgram type
namespace ndvm {
namespace {

std::string repr_of(nb::handle obj) {
  PyObject* r = PyObject_Repr(obj.ptr());
  if (r == nullptr) throw nb::python_error();
  return ndvm::utf8_of(nb::steal(r));
}

void install_hooks() {
  ndvm::front::Hooks h;
  h.repr = [](std::string_view s) { return repr_of(ndvm::str_of(s)); };
  h.float_repr = [](double v) { return repr_of(nb::float_(v)); };
  h.did_you_mean = [](std::string_view name, const std::vector<std::string>& candidates) {
    // leaked on purpose: a static nb::object would be released after the interpreter ends
    static const nb::object& fn =
        *new nb::object(nb::module_::import_("ndvm.lang.suggest").attr("did_you_mean"));
    nb::list pool;
    for (const std::string& c : candidates) pool.append(ndvm::str_of(c));
    return ndvm::utf8_of(fn(ndvm::str_of(name), pool));
  };
  h.classify_unicode = [](std::string_view token, double* out) {
    static const nb::object& fn =
        *new nb::object(nb::module_::import_("ndvm.lang.reader").attr("classify_unicode"));
    nb::tuple got = nb::borrow<nb::tuple>(fn(ndvm::str_of(token)));
    *out = nb::cast<double>(got[1]);
    return nb::cast<int>(got[0]);
  };
  ndvm::front::set_hooks(std::move(h));
}

// The IR record classes and the runtime value classes, imported once (under the GIL).
struct IrTypes {
  nb::object kinds[static_cast<int>(NodeKind::ASSERT) + 1];
  nb::object pair, symbol, string, nil, void_;
};

const IrTypes& ir_types() {
  static const IrTypes* t = [] {
    nb::module_ ir = nb::module_::import_("ndvm.lang.ir");
    nb::module_ values = nb::module_::import_("ndvm.values");
    auto* out = new IrTypes;
    const char* names[] = {"Const", "Local", "Param", "Input",  "PrimRef", "If",       "Seq",
                           "Or",    "Lambda", "Let",  "Letrec", "Call",    "PrimCall", "Assert"};
    for (int k = 0; k <= static_cast<int>(NodeKind::ASSERT); ++k) out->kinds[k] = ir.attr(names[k]);
    out->pair = values.attr("Pair");
    out->symbol = values.attr("Symbol");
    out->string = values.attr("String");
    out->nil = values.attr("NIL");
    out->void_ = values.attr("VOID");
    return out;
  }();
  return *t;
}

nb::tuple new_tuple(size_t n) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(n));
  if (t == nullptr) throw nb::python_error();
  return nb::steal<nb::tuple>(t);
}

// Whether two parameter lists give the same params_key (the initial values bit for bit).
bool same_params(const std::vector<ParamSpecOut>& a, const std::vector<ParamSpecOut>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].constraint != b[i].constraint ||
        std::memcmp(&a[i].init, &b[i].init, sizeof a[i].init) != 0 || a[i].line != b[i].line ||
        a[i].column != b[i].column) {
      return false;
    }
  }
  return true;
}

class FrontProgram {
 public:
  explicit FrontProgram(Compiled c) : c_(std::move(c)) {}

  const Compiled& compiled() const { return c_; }

  nb::tuple params() const {
    nb::list out;
    for (const ParamSpecOut& p : c_.params) {
      out.append(nb::make_tuple(ndvm::str_of(p.name), p.init, ndvm::str_of(p.constraint), p.line,
                                p.column));
    }
    return nb::tuple(out);
  }

  // The parameters as one bytes object (each field length-prefixed or fixed-size): equal
  // keys, equal parameters; the host keys its parameter specs by it. The last key built is
  // handed out again for the same parameters (a program's variants, compiled one after
  // another, share theirs): no new bytes, and its hash is kept with it. (Under the GIL.)
  nb::object params_key() const {
    static auto* last_params = new std::vector<ParamSpecOut>;  // leaked on purpose, as
    static PyObject* last_key = nullptr;                       // install_hooks' objects
    if (last_key != nullptr && same_params(*last_params, c_.params)) {
      return nb::borrow(last_key);
    }
    nb::object key = build_params_key();
    Py_XDECREF(last_key);
    last_key = key.inc_ref().ptr();
    *last_params = c_.params;
    return key;
  }

  nb::object build_params_key() const {
    size_t len = 0;
    for (const ParamSpecOut& p : c_.params) {
      len += 2 * sizeof(uint32_t) + p.name.size() + p.constraint.size() + sizeof p.init +
             sizeof p.line + sizeof p.column;
    }
    // written straight into the bytes object, no intermediate buffer
    PyObject* out = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(len));
    if (out == nullptr) throw nb::python_error();
    char* at = PyBytes_AS_STRING(out);
    auto put = [&at](const void* p, size_t n) {
      std::memcpy(at, p, n);
      at += n;
    };
    auto text = [&put](const std::string& s) {
      const auto n = static_cast<uint32_t>(s.size());
      put(&n, sizeof n);
      put(s.data(), s.size());
    };
    for (const ParamSpecOut& p : c_.params) {
      text(p.name);
      put(&p.init, sizeof p.init);
      text(p.constraint);
      put(&p.line, sizeof p.line);
      put(&p.column, sizeof p.column);
    }
    return nb::steal(out);
  }

  nb::tuple prelude() const {
    nb::tuple out = new_tuple(c_.prelude.size());
    for (size_t i = 0; i < c_.prelude.size(); ++i) {
      PyTuple_SET_ITEM(out.ptr(), Py_ssize_t(i), ndvm::str_of(c_.prelude[i]).release().ptr());
    }
    return out;
  }

  nb::tuple input_positions() const {
    const auto& pos = c_.input_positions;
    nb::tuple out = new_tuple(pos.size());
    for (size_t i = 0; i < pos.size(); ++i) {
      PyTuple_SET_ITEM(out.ptr(), Py_ssize_t(i),
                       nb::make_tuple(pos[i].first, pos[i].second).release().ptr());
    }
    return out;
  }

  // This core's Program, from the tables themselves. The front end's tables are valid by
  // construction, so they are not checked again (build_program_trusted) unless `checked` (the
  // tests check them all, as build_program does any other tables).
  nb::object program(bool checked) const {
    const ndvm::front::Tables& t = c_.tables;
    auto* build = checked ? &ndvm::build_program : &ndvm::build_program_trusted;
    ndvm::Program prog = build(
        t.nodes.data(), t.nodes.size() / 9, t.kids.data(), t.kids.size(), t.aux.data(),
        t.aux.size(), t.consts.data(), t.nums.data(), t.nums.size(), t.strings, 0,
        static_cast<uint32_t>(c_.params.size()), static_cast<uint32_t>(c_.inputs.size()));
    return nb::cast(std::move(prog));
  }

  // The Program's strings (names in error messages, symbols) as Python str
  nb::list strings() const {
    nb::list out;
    for (const std::string& s : c_.tables.strings) out.append(ndvm::str_of(s));
    return out;
  }

  nb::object body() const;

 private:
  nb::object constant(std::vector<nb::object>& built, int32_t index) const;
  Compiled c_;
};

nb::object FrontProgram::constant(std::vector<nb::object>& built, int32_t index) const {
  const ndvm::front::Tables& t = c_.tables;
  const IrTypes& ty = ir_types();
  // constants refer only to earlier ones: build up to `index` once
  for (size_t i = built.size(); i <= static_cast<size_t>(index); ++i) {
    const int32_t* row = &t.consts[3 * i];
    nb::object v;
    switch (static_cast<ConstKind>(row[0])) {
      case ConstKind::NUM: v = nb::float_(t.nums[i]); break;
      case ConstKind::BOOL: v = nb::bool_(row[1] != 0); break;
      case ConstKind::NIL: v = ty.nil; break;
      case ConstKind::VOID: v = ty.void_; break;
      case ConstKind::SYMBOL: v = ty.symbol(ndvm::str_of(t.strings[size_t(row[1])])); break;
      case ConstKind::STRING: v = ty.string(ndvm::str_of(t.strings[size_t(row[1])])); break;
      case ConstKind::PAIR: v = ty.pair(built[size_t(row[1])], built[size_t(row[2])]); break;
    }
    built.push_back(std::move(v));
  }
  return built[static_cast<size_t>(index)];
}

nb::object FrontProgram::body() const {
  const ndvm::front::Tables& t = c_.tables;
  const IrTypes& ty = ir_types();
  const size_t n = t.nodes.size() / 9;
  std::vector<nb::object> node(n), consts;
  std::vector<nb::object> names;  // strings as Python str, on demand
  names.resize(t.strings.size());
  auto text = [&](int32_t id) -> nb::object {
    nb::object& s = names[static_cast<size_t>(id)];
    if (!s.is_valid()) s = ndvm::str_of(t.strings[static_cast<size_t>(id)]);
    return s;
  };
  auto kids = [&](int32_t off, int32_t from, int32_t to) {
    PyObject* tup = PyTuple_New(to - from);
    if (tup == nullptr) throw nb::python_error();
    nb::tuple out = nb::steal<nb::tuple>(tup);
    for (int32_t i = from; i < to; ++i) {
      PyTuple_SET_ITEM(tup, i - from, node[size_t(t.kids[size_t(off + i)])].inc_ref().ptr());
    }
    return out;
  };
  // children have larger ids than their parent: build from the last node back
  for (size_t i = n; i-- > 0;) {
    const int32_t* r = &t.nodes[9 * i];
    const int32_t op = r[1], a = r[2], b = r[3], c = r[4], off = r[5], nk = r[6];
    const int32_t line = r[7], col = r[8];
    auto kid = [&](int32_t j) { return node[size_t(t.kids[size_t(off + j)])]; };
    const nb::object& cls = ty.kinds[r[0]];
    nb::object v;
    switch (static_cast<NodeKind>(r[0])) {
      case NodeKind::CONST: v = cls(constant(consts, a), line, col); break;
      case NodeKind::LOCAL: v = cls(a, b, text(c), line, col); break;
      case NodeKind::PARAM: v = cls(a, ndvm::str_of(c_.params[size_t(a)].name), line, col); break;
      case NodeKind::INPUT: v = cls(a, ndvm::str_of(c_.inputs[size_t(a)]), line, col); break;
      case NodeKind::PRIMREF: v = cls(op, ndvm::prim_info(op).name, line, col); break;
      case NodeKind::IF: v = cls(kid(0), kid(1), kid(2), line, col); break;
      case NodeKind::SEQ:
      case NodeKind::OR: v = cls(kids(off, 0, nk), line, col); break;
      case NodeKind::LAMBDA: v = cls(a, nb::bool_(b != 0), kid(0), text(c), line, col); break;
      case NodeKind::LET: v = cls(kids(off, 0, nk - 1), kid(nk - 1), line, col); break;
      case NodeKind::LETREC: {
        nb::list letrec_names;
        for (int32_t j = 0; j < nk - 1; ++j) letrec_names.append(text(t.aux[size_t(b + j)]));
        v = cls(kids(off, 0, nk - 1), kid(nk - 1), nb::tuple(letrec_names), line, col);
        break;
      }
      case NodeKind::CALL:
        v = cls(kid(0), kids(off, 1, nk), nb::bool_(t.tail[i] != 0), line, col);
        break;
      case NodeKind::PRIMCALL: v = cls(op, kids(off, 0, nk), ndvm::prim_info(op).name, line, col); break;
      case NodeKind::ASSERT: v = cls(kid(0), text(c), line, col); break;
    }
    node[i] = std::move(v);
  }
  return node[0];
}

ParamSpecOut spec_of_row(nb::handle row) {
  nb::tuple spec = nb::borrow<nb::tuple>(row);
  return {ndvm::utf8_of(spec[0]), nb::cast<double>(spec[1]), ndvm::utf8_of(spec[2]),
          nb::cast<int32_t>(spec[3]), nb::cast<int32_t>(spec[4])};
}

// The host's params argument: Python's normalizer called with the header's specs, or (a list)
// the specs the host normalized without the header: a str names a parameter (the header's
// spec of that name, else free at 0.0), a tuple is a row (name, init, constraint, line, column).
ndvm::front::ParamsFn params_fn(nb::handle fn) {
  if (fn.is_none()) return {};
  if (PyList_CheckExact(fn.ptr())) {
    nb::list items = nb::borrow<nb::list>(fn);
    std::vector<ParamSpecOut> rows;
    std::vector<char> named;  // per row: a name the header may declare
    rows.reserve(items.size());
    named.reserve(items.size());
    for (nb::handle item : items) {
      const bool name = PyUnicode_CheckExact(item.ptr());
      rows.push_back(name ? ParamSpecOut{ndvm::utf8_of(item), 0.0, "free", 0, 0}
                          : spec_of_row(item));
      named.push_back(name ? 1 : 0);
    }
    return [rows = std::move(rows), named = std::move(named)](
               const std::vector<ParamSpecOut>& header) {
      std::vector<ParamSpecOut> out = rows;
      for (size_t i = 0; i < out.size(); ++i) {
        if (!named[i]) continue;
        for (const ParamSpecOut& h : header) {
          if (h.name == out[i].name) {
            out[i] = h;
            break;
          }
        }
      }
      return out;
    };
  }
  nb::object f = nb::borrow(fn);
  return [f](const std::vector<ParamSpecOut>& header) {
    nb::list given;
    for (const ParamSpecOut& p : header) {
      given.append(nb::make_tuple(ndvm::str_of(p.name), p.init, ndvm::str_of(p.constraint),
                                  p.line, p.column));
    }
    std::vector<ParamSpecOut> out;
    for (nb::handle item : f(nb::tuple(given))) out.push_back(spec_of_row(item));
    return out;
  };
}

}  // namespace
}  // namespace ndvm

void ndvm::bind_front(nb::module_& m) {
  install_hooks();
  nb::class_<FrontProgram>(m, "FrontProgram")
      .def_prop_ro("params", &FrontProgram::params,
                   "The parameters: (name, init, constraint, line, column) each.")
      .def_prop_ro("params_key", &FrontProgram::params_key,
                   "The parameters as bytes (equal keys: equal parameters).")
      .def_prop_ro("has_header", [](const FrontProgram& p) { return p.compiled().has_header; })
      .def_prop_ro("prelude", &FrontProgram::prelude)
      .def_prop_ro("input_positions", &FrontProgram::input_positions)
      .def_prop_ro(
          "fields",
          [](const FrontProgram& p) {
            return nb::make_tuple(p.params_key(), p.compiled().has_header, p.prelude(),
                                  p.input_positions());
          },
          "(params_key, has_header, prelude, input_positions) in one call.")
      .def_prop_ro("n_nodes",
                   [](const FrontProgram& p) { return p.compiled().tables.nodes.size() / 9; })
      .def(
          "lower",
          [](const FrontProgram& p, bool checked) {
            return nb::make_tuple(p.program(checked), p.strings());
          },
          nb::arg("checked") = false, "(Program, strings) of this core (see program).")
      .def("program", &FrontProgram::program, nb::arg("checked") = false,
           "This core's Program; checked: validate the tables as build_program does any host "
           "tables (the front end's are valid by construction).")
      .def_prop_ro("strings", &FrontProgram::strings, "The Program's strings, as str.")
      .def("body", &FrontProgram::body, "The resolved IR as ndvm.lang.ir records.");
  m.def(
      "front_compile",
      [](nb::handle source, nb::handle params, std::vector<std::string> inputs,
         int64_t max_source_chars, int64_t max_forms, bool dmci) {
        // the str's own UTF-8 (CPython keeps it with the str: no copy); a str with lone
        // surrogates, or not a str, through utf8_of (which encodes or raises)
        Py_ssize_t size = 0;
        const char* utf8 = PyUnicode_CheckExact(source.ptr())
                               ? PyUnicode_AsUTF8AndSize(source.ptr(), &size)
                               : nullptr;
        std::string own;
        if (utf8 == nullptr) {
          PyErr_Clear();
          own = utf8_of(source);
        }
        const std::string_view text =
            utf8 != nullptr ? std::string_view(utf8, static_cast<size_t>(size)) : own;
        front::CompileOptions options;
        options.limits = {max_source_chars, max_forms};
        options.dmci = dmci;
        try {
          return FrontProgram(
              front::compile(text, params_fn(params), std::move(inputs), options));
        } catch (const FrontError& e) {
          raise_front_error(e);
        }
      },
      nb::arg("source"), nb::arg("params").none(), nb::arg("inputs"),
      nb::arg("max_source_chars"), nb::arg("max_forms"), nb::arg("dmci"),
      "Read, expand and resolve `source`. params: None, a function from the header's specs "
      "to the program's, or a list of the program's (a str: the header's spec of that name, "
      "else free at 0.0; a tuple: (name, init, constraint, line, column)); raises "
      "ReadError / CompileError / UnsupportedForm.");
  m.def(
      "prelude_closure",
      [](std::vector<std::string> names) { return front::prelude_closure(names); },
      nb::arg("names"), "The prelude procedures `names` mention, with those they use, sorted.");
}
