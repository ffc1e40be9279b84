// The front end's data as Python data: the records of ndvm.lang.datum (Sym Num Str Bool
// SList), `_core.read`, and front errors raised as the ndvm.errors classes.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <memory>
#include <string>
#include <vector>

#include "front_py.hpp"

namespace nb = nanobind;
using ndvm::front::Arena;
using ndvm::front::Datum;
using ndvm::front::DKind;
using ndvm::front::DRef;

namespace {

// The datum classes, imported once (under the GIL).
struct DatumTypes {
  nb::object sym, num, str, boolean, slist;
};

const DatumTypes& datum_types() {
  static const DatumTypes* t = [] {
    nb::module_ m = nb::module_::import_("ndvm.lang.datum");
    return new DatumTypes{m.attr("Sym"), m.attr("Num"), m.attr("Str"), m.attr("Bool"),
                          m.attr("SList")};
  }();
  return *t;
}

nb::object atom_to_python(const Arena& a, const Datum& x) {
  const DatumTypes& t = datum_types();
  const auto& text = a.texts[static_cast<size_t>(x.text < 0 ? 0 : x.text)];
  switch (x.kind) {
    case DKind::SYM: return t.sym(ndvm::str_of(text), x.line, x.column);
    case DKind::NUM: return t.num(x.num, ndvm::str_of(text), x.line, x.column);
    case DKind::STR: return t.str(ndvm::str_of(text), x.line, x.column);
    case DKind::BOOL: return t.boolean(nb::bool_(x.flag), x.line, x.column);
    case DKind::LIST: break;
  }
  throw std::logic_error("atom_to_python: a list");
}

}  // namespace

std::string ndvm::utf8_of(nb::handle str) {
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(str.ptr(), &n);
  if (s != nullptr) return std::string(s, static_cast<size_t>(n));
  PyErr_Clear();  // lone surrogates: encoded as "surrogatepass" does
  PyObject* b = PyUnicode_AsEncodedString(str.ptr(), "utf-8", "surrogatepass");
  if (b == nullptr) throw nb::python_error();
  std::string out(PyBytes_AS_STRING(b), static_cast<size_t>(PyBytes_GET_SIZE(b)));
  Py_DECREF(b);
  return out;
}

nb::str ndvm::str_of(std::string_view utf8) {
  PyObject* s = PyUnicode_DecodeUTF8(utf8.data(), static_cast<Py_ssize_t>(utf8.size()),
                                     "surrogatepass");
  if (s == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(s);
}

nb::object ndvm::datum_to_python(const Arena& a, DRef root) {
  // children before parents, without recursion (data nest as deep as the reader allows)
  struct Item {
    DRef d;
    bool expanded;
  };
  std::vector<Item> stack{{root, false}};
  std::vector<nb::object> built;
  const DatumTypes& t = datum_types();
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    const Datum& x = a[it.d];
    if (x.kind != DKind::LIST) {
      built.push_back(atom_to_python(a, x));
      continue;
    }
    if (!it.expanded) {
      stack.push_back({it.d, true});
      if (x.tail >= 0) stack.push_back({x.tail, false});
      for (int32_t i = x.count; i-- > 0;) {
        stack.push_back({a.items[static_cast<size_t>(x.first + i)], false});
      }
      continue;
    }
    const size_t n = static_cast<size_t>(x.count) + (x.tail >= 0 ? 1 : 0);
    const size_t base = built.size() - n;
    nb::object tail = nb::none();
    if (x.tail >= 0) tail = built.back();
    PyObject* items = PyTuple_New(x.count);
    if (items == nullptr) throw nb::python_error();
    for (int32_t i = 0; i < x.count; ++i) {
      PyTuple_SET_ITEM(items, i, built[base + size_t(i)].release().ptr());
    }
    built.resize(base);
    built.push_back(t.slist(nb::steal<nb::tuple>(items), tail, x.line, x.column));
  }
  return built.back();
}

nb::tuple ndvm::data_to_python(const Arena& a, const DRef* refs, size_t n) {
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(n));
  if (out == nullptr) throw nb::python_error();
  nb::tuple result = nb::steal<nb::tuple>(out);
  for (size_t i = 0; i < n; ++i) {
    PyTuple_SET_ITEM(out, static_cast<Py_ssize_t>(i), datum_to_python(a, refs[i]).release().ptr());
  }
  return result;
}

void ndvm::raise_front_error(const front::FrontError& e) {
  static const char* const kClass[] = {"ReadError", "CompileError", "UnsupportedForm"};
  nb::module_ errors = nb::module_::import_("ndvm.errors");
  nb::object cls = errors.attr(kClass[static_cast<int>(e.kind)]);
  nb::object line = nb::none(), column = nb::none();
  if (e.line >= 0) {
    line = nb::int_(e.line);
    column = nb::int_(e.column);
  }
  nb::object exc = cls(str_of(e.message), line, column);
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw nb::python_error();
}

ndvm::front::ReadOutput ndvm::read_or_raise(Arena& arena, nb::handle source,
                                            const front::ReadLimits& limits, bool allow_empty) {
  const std::string text = utf8_of(source);
  try {
    return front::read(arena, text, limits, allow_empty);
  } catch (const front::FrontError& e) {
    raise_front_error(e);
  }
}

namespace {

// A frozenset of the names at `indexes` among `names` (a tuple of str).
nb::object name_set(const nb::tuple& names, const std::vector<int32_t>& indexes) {
  PyObject* out = PyFrozenSet_New(nullptr);
  if (out == nullptr) throw nb::python_error();
  nb::object set = nb::steal(out);
  for (const int32_t i : indexes) {
    if (PySet_Add(out, PyTuple_GET_ITEM(names.ptr(), i)) != 0) throw nb::python_error();
  }
  return set;
}

// `_core.read_facts`: the facts of `source` as read (see front::SourceFacts), or None.
nb::object read_facts(nb::handle source, int64_t max_source_chars, int64_t max_forms) {
  thread_local Arena shared;  // its buffers reused from one read to the next
  thread_local bool busy = false;
  std::unique_ptr<Arena> own;  // a read inside a read (from a hook) gets its own arena
  if (busy) own = std::make_unique<Arena>();
  struct Lease {
    Arena* kept;  // the shared arena, reset and free again however the read ends
    ~Lease() {
      if (kept == nullptr) return;
      kept->reset();
      busy = false;
    }
  } lease{own ? nullptr : &shared};
  busy = true;
  Arena& arena = own ? *own : shared;
  const ndvm::front::ReadOutput out =
      ndvm::read_or_raise(arena, source, {max_source_chars, max_forms}, false);
  const ndvm::front::SourceFacts f = ndvm::front::source_facts(arena, out);
  if (!f.described) return nb::none();
  PyObject* tuple = PyTuple_New(Py_ssize_t(out.symbols.size()));
  if (tuple == nullptr) throw nb::python_error();
  nb::tuple names = nb::steal<nb::tuple>(tuple);
  for (size_t i = 0; i < out.symbols.size(); ++i) {
    PyTuple_SET_ITEM(tuple, Py_ssize_t(i),
                     ndvm::str_of(arena.texts[size_t(out.symbols[i])]).release().ptr());
  }
  PyObject* all = PyFrozenSet_New(tuple);
  if (all == nullptr) throw nb::python_error();
  nb::object symbols = nb::steal(all);
  nb::object scalar = nb::none();
  if (f.may_be_scalar) {
    scalar = nb::make_tuple(name_set(names, f.leaves), name_set(names, f.heads),
                            name_set(names, f.value_heads), name_set(names, f.cond_heads));
  }
  return nb::make_tuple(f.nodes, symbols, names, ndvm::str_of(f.skeleton), f.first_end, scalar);
}

}  // namespace

void ndvm::bind_front_data(nb::module_& m) {
  m.def(
      "read",
      [](nb::handle source, bool allow_empty, int64_t max_source_chars, int64_t max_forms) {
        Arena arena;
        const front::ReadOutput out =
            read_or_raise(arena, source, {max_source_chars, max_forms}, allow_empty);
        nb::tuple data = data_to_python(arena, out.top.data(), out.top.size());
        PyObject* names = PyFrozenSet_New(nullptr);
        if (names == nullptr) throw nb::python_error();
        nb::object symbols = nb::steal(names);
        for (const int32_t id : out.symbols) {
          nb::str name = str_of(arena.texts[static_cast<size_t>(id)]);
          if (PySet_Add(names, name.ptr()) != 0) throw nb::python_error();
        }
        return nb::make_tuple(data, symbols);
      },
      nb::arg("source"), nb::arg("allow_empty"), nb::arg("max_source_chars"),
      nb::arg("max_forms"),
      "Read `source` (str): (data, frozenset of symbol names), data as ndvm.lang.datum "
      "records; raises ReadError / CompileError with positions.");
  m.def("read_facts", &read_facts, nb::arg("source"), nb::arg("max_source_chars"),
        nb::arg("max_forms"),
        "Read `source` (str) as `read` does (its errors) and give what the search funnel needs "
        "of its data without building them: (node count, frozenset of symbol names, the names "
        "in that order, skeleton template, end of its first form, scalar requirements or "
        "None), or None for data holding a string (front::SourceFacts).");
}
