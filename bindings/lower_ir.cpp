// The resolved IR (the Python records of ndvm.lang.ir) lowered to the core's Program in one
// preorder walk: `_core.lower(body, n_params, n_inputs, node_types, value_types)`. The walk
// writes the host tables build_program validates (program.hpp: node rows, child lists, the
// constant pool with quoted pairs children first, the string table) and returns
// (Program, strings), or a message (str) for what the core cannot run.
#include "lower_ir.hpp"

#include <nanobind/nanobind.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ndvm/program.hpp"

namespace nb = nanobind;

namespace {

using ndvm::ConstKind;
using ndvm::NodeKind;

constexpr int kKinds = static_cast<int>(NodeKind::ASSERT) + 1;

// Interned attribute names of the IR records (created once, under the GIL).
struct Names {
  PyObject *args, *body, *code, *column, *depth, *exprs, *expr, *fn, *index, *inits, *line,
      *name, *names, *nreq, *orelse, *rest, *test, *text, *then, *value, *car, *cdr;
};

const Names& names() {
  static const Names n = [] {
    auto s = [](const char* t) { return PyUnicode_InternFromString(t); };
    return Names{s("args"),  s("body"),  s("code"),   s("column"), s("depth"), s("exprs"),
                 s("expr"),  s("fn"),    s("index"),  s("inits"),  s("line"),  s("name"),
                 s("names"), s("nreq"),  s("orelse"), s("rest"),   s("test"),  s("text"),
                 s("then"),  s("value"), s("car"),    s("cdr")};
  }();
  return n;
}

struct Failed {
  std::string message;
};

// An attribute of a record the walk holds: a borrowed reference (the record keeps it alive).
PyObject* field(PyObject* obj, PyObject* name) {
  PyObject* v = PyObject_GetAttr(obj, name);
  if (v == nullptr) throw nb::python_error();
  Py_DECREF(v);
  return v;
}

int32_t int_field(PyObject* obj, PyObject* name) {
  const long long v = PyLong_AsLongLong(field(obj, name));
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  if (v < INT32_MIN || v > INT32_MAX) throw Failed{"native backend: an IR field out of range"};
  return static_cast<int32_t>(v);
}

class Lowerer {
 public:
  Lowerer(nb::tuple node_types, nb::tuple value_types) {
    if (node_types.size() != kKinds || value_types.size() != 5) {
      throw std::invalid_argument("lower: expected 14 node types and 5 value types");
    }
    for (int k = 0; k < kKinds; ++k) kinds_[k] = node_types[k].ptr();
    pair_ = value_types[0].ptr();
    symbol_ = value_types[1].ptr();
    string_ = value_types[2].ptr();
    nil_ = value_types[3].ptr();
    void_ = value_types[4].ptr();
  }

  void walk(PyObject* root);
  nb::object finish(uint32_t n_params, uint32_t n_inputs);

 private:
  int kind_of(PyObject* node) const {
    const PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(node));
    for (int k = 0; k < kKinds; ++k) {
      if (kinds_[k] == t) return k;
    }
    throw Failed{std::string("native backend: unsupported IR node ") + Py_TYPE(node)->tp_name};
  }
  int32_t intern(PyObject* text);
  int32_t fresh(PyObject* text);
  int32_t constant(PyObject* value);
  int32_t constant_one(PyObject* v, PyObject* car, PyObject* cdr);
  void children(PyObject* tuple, std::vector<PyObject*>& out);

  std::array<PyObject*, kKinds> kinds_{};
  PyObject *pair_, *symbol_, *string_, *nil_, *void_;
  std::vector<int32_t> nodes_, kids_, aux_, consts_;
  std::vector<double> nums_;
  std::vector<std::string> strings_;
  std::unordered_map<std::string, int32_t> interned_;
  std::unordered_map<PyObject*, int32_t> const_index_;
};

std::string utf8(PyObject* text) {
  Py_ssize_t n = 0;
  const char* s = PyUnicode_Check(text) ? PyUnicode_AsUTF8AndSize(text, &n) : nullptr;
  if (s == nullptr) {
    PyErr_Clear();
    throw Failed{"native backend: a name or string that is not valid Unicode text"};
  }
  return std::string(s, static_cast<size_t>(n));
}

int32_t Lowerer::intern(PyObject* text) {
  std::string s = utf8(text);
  auto it = interned_.find(s);
  if (it != interned_.end()) return it->second;
  const auto id = static_cast<int32_t>(strings_.size());
  interned_.emplace(s, id);
  strings_.push_back(std::move(s));
  return id;
}

int32_t Lowerer::fresh(PyObject* text) {
  strings_.push_back(utf8(text));
  return static_cast<int32_t>(strings_.size() - 1);
}

int32_t Lowerer::constant_one(PyObject* v, PyObject* car, PyObject* cdr) {
  const Names& n = names();
  int32_t row[3] = {0, 0, 0};
  double num = 0.0;
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(v));
  if (t == pair_) {
    row[0] = static_cast<int32_t>(ConstKind::PAIR);
    row[1] = const_index_.at(car);
    row[2] = const_index_.at(cdr);
  } else if (PyBool_Check(v)) {
    row[0] = static_cast<int32_t>(ConstKind::BOOL);
    row[1] = v == Py_True ? 1 : 0;
  } else if (PyFloat_CheckExact(v) || PyLong_CheckExact(v)) {
    row[0] = static_cast<int32_t>(ConstKind::NUM);
    num = PyFloat_AsDouble(v);
    if (num == -1.0 && PyErr_Occurred()) throw nb::python_error();
  } else if (t == symbol_) {
    row[0] = static_cast<int32_t>(ConstKind::SYMBOL);
    row[1] = intern(field(v, n.name));
  } else if (t == string_) {
    row[0] = static_cast<int32_t>(ConstKind::STRING);
    row[1] = fresh(field(v, n.text));
  } else if (v == nil_) {
    row[0] = static_cast<int32_t>(ConstKind::NIL);
  } else if (v == void_) {
    row[0] = static_cast<int32_t>(ConstKind::VOID);
  } else {
    nb::str r = nb::repr(nb::handle(v));
    throw Failed{std::string("native backend: unsupported constant ") + r.c_str()};
  }
  consts_.insert(consts_.end(), row, row + 3);
  nums_.push_back(num);
  return static_cast<int32_t>(nums_.size() - 1);
}

// The constant-pool index of `value`: a quoted pair chain is lowered children first (a shared
// sub-chain gets one entry per occurrence, the last one indexed).
int32_t Lowerer::constant(PyObject* value) {
  if (PyFloat_CheckExact(value)) {
    consts_.insert(consts_.end(), {static_cast<int32_t>(ConstKind::NUM), 0, 0});
    nums_.push_back(PyFloat_AS_DOUBLE(value));
    return static_cast<int32_t>(nums_.size() - 1);
  }
  const Names& n = names();
  struct Item {
    PyObject *v, *car, *cdr;
  };
  std::vector<Item> order;
  std::vector<PyObject*> stack{value};
  while (!stack.empty()) {
    PyObject* v = stack.back();
    stack.pop_back();
    Item item{v, nullptr, nullptr};
    if (reinterpret_cast<PyObject*>(Py_TYPE(v)) == pair_) {
      item.car = field(v, n.car);
      item.cdr = field(v, n.cdr);
      stack.push_back(item.car);
      stack.push_back(item.cdr);
    }
    order.push_back(item);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const_index_[it->v] = constant_one(it->v, it->car, it->cdr);
  }
  return const_index_.at(value);
}

void Lowerer::children(PyObject* tuple, std::vector<PyObject*>& out) {
  if (!PyTuple_Check(tuple)) throw Failed{"native backend: IR children must be a tuple"};
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) out.push_back(PyTuple_GET_ITEM(tuple, i));
}

void Lowerer::walk(PyObject* root) {
  const Names& n = names();
  std::vector<std::pair<PyObject*, int64_t>> stack{{root, -1}};
  std::vector<PyObject*> kids;
  while (!stack.empty()) {
    auto [node, slot] = stack.back();
    stack.pop_back();
    if (slot >= 0) kids_[static_cast<size_t>(slot)] = static_cast<int32_t>(nodes_.size() / 9);
    const int kind = kind_of(node);
    int32_t op = 0, a = 0, b = 0, c = 0;
    kids.clear();
    switch (static_cast<NodeKind>(kind)) {
      case NodeKind::CONST: a = constant(field(node, n.value)); break;
      case NodeKind::LOCAL:
        a = int_field(node, n.depth);
        b = int_field(node, n.index);
        c = intern(field(node, n.name));
        break;
      case NodeKind::PARAM:
      case NodeKind::INPUT: a = int_field(node, n.index); break;
      case NodeKind::PRIMREF: op = int_field(node, n.code); break;
      case NodeKind::IF:
        kids = {field(node, n.test), field(node, n.then), field(node, n.orelse)};
        break;
      case NodeKind::SEQ:
      case NodeKind::OR: children(field(node, n.exprs), kids); break;
      case NodeKind::LAMBDA:
        a = int_field(node, n.nreq);
        b = PyObject_IsTrue(field(node, n.rest)) ? 1 : 0;
        c = intern(field(node, n.name));
        kids.push_back(field(node, n.body));
        break;
      case NodeKind::LET:
      case NodeKind::LETREC:
        children(field(node, n.inits), kids);
        if (kind == static_cast<int>(NodeKind::LETREC)) {
          b = static_cast<int32_t>(aux_.size());
          PyObject* given = field(node, n.names);
          if (!PyTuple_Check(given)) throw Failed{"native backend: Letrec names must be a tuple"};
          const Py_ssize_t k = PyTuple_GET_SIZE(given);
          if (k == 0) {  // unnamed: "?" per init
            nb::str unknown("?");
            for (size_t i = 0; i < kids.size(); ++i) aux_.push_back(intern(unknown.ptr()));
          }
          for (Py_ssize_t i = 0; i < k; ++i) aux_.push_back(intern(PyTuple_GET_ITEM(given, i)));
        }
        kids.push_back(field(node, n.body));
        break;
      case NodeKind::CALL:
        kids.push_back(field(node, n.fn));
        children(field(node, n.args), kids);
        break;
      case NodeKind::PRIMCALL:
        op = int_field(node, n.code);
        children(field(node, n.args), kids);
        break;
      case NodeKind::ASSERT:
        c = intern(field(node, n.text));
        kids.push_back(field(node, n.expr));
        break;
    }
    const auto off = static_cast<int32_t>(kids_.size());
    const auto count = static_cast<int32_t>(kids.size());
    kids_.resize(kids_.size() + kids.size(), 0);
    const int32_t row[9] = {kind, op, a, b, c, off, count, int_field(node, n.line),
                            int_field(node, n.column)};
    nodes_.insert(nodes_.end(), row, row + 9);
    for (size_t i = kids.size(); i-- > 0;) stack.emplace_back(kids[i], off + int64_t(i));
  }
}

nb::object Lowerer::finish(uint32_t n_params, uint32_t n_inputs) {
  nb::list strings;
  for (const std::string& s : strings_) strings.append(nb::str(s.data(), s.size()));
  const size_t n_consts = nums_.size();
  ndvm::Program prog = ndvm::build_program(
      nodes_.data(), nodes_.size() / 9, kids_.data(), kids_.size(), aux_.data(), aux_.size(),
      consts_.data(), nums_.data(), n_consts, std::move(strings_), 0, n_params, n_inputs);
  return nb::make_tuple(nb::cast(std::move(prog)), strings);
}

}  // namespace

void ndvm::bind_lower_ir(nb::module_& m) {
  m.def(
      "lower",
      [](nb::handle body, uint32_t n_params, uint32_t n_inputs, nb::tuple node_types,
         nb::tuple value_types) -> nb::object {
        Lowerer low(node_types, value_types);
        try {
          low.walk(body.ptr());
        } catch (const Failed& f) {
          return nb::str(f.message.data(), f.message.size());
        }
        return low.finish(n_params, n_inputs);
      },
      nb::arg("body"), nb::arg("n_params"), nb::arg("n_inputs"), nb::arg("node_types"),
      nb::arg("value_types"),
      "The resolved IR `body` as (Program, strings), or the message (str) of what the core "
      "cannot run. node_types: the 14 IR record classes in NodeKind order; value_types: Pair, "
      "Symbol, String, NIL, VOID.");
}
