// Structural primitives: pairs and lists, type tests, equality, vector/matrix construction and
// indexing. Mirrors src/ndvm/prims/structural.py (messages included). None adds a tape record
// of its own; vector construction and indexing tape their numeric side (STACK, GATHER).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "ndvm/interp.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {

namespace {

constexpr size_t kListLimit = 10000000;
constexpr double kSizeLimit = 10000000;

// Python's repr of a float (shortest round trip; exponent outside [-4, 16)).
std::string py_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string s(buf);
  const size_t epos = s.find('e');
  std::string mant = s.substr(0, epos);
  const int exp = std::atoi(s.c_str() + epos + 1);
  const bool neg = mant[0] == '-';
  if (neg) mant = mant.substr(1);
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp < -4 || exp >= 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  } else if (exp < 0) {
    out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else {
    const size_t point = static_cast<size_t>(exp) + 1;
    if (digits.size() <= point) {
      out = digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, point) + "." + digits.substr(point);
    }
  }
  return neg ? "-" + out : out;
}

// The a/d path of a c[ad]{1,3}r primitive, read from its name in the primitive table ("cadr":
// "ad", applied right to left), or "" for any other primitive.
std::string cxr_path(int code) {
  const char* name = prim_info(code).name;
  const size_t len = name ? std::strlen(name) : 0;
  if (len < 3 || len > 5 || name[0] != 'c' || name[len - 1] != 'r') return "";
  const std::string path(name + 1, len - 2);
  return path.find_first_not_of("ad") == std::string::npos ? path : "";
}

}  // namespace

Value Interp::list_from(const Value* items, size_t n, Value tail) {
  Value out = tail;
  for (size_t k = n; k-- > 0;) out = make_value(Tag::PAIR, heap_.pair(items[k], out));
  return out;
}

bool Interp::list_items(Value lst, std::vector<Value>& out, const char* who, bool raise) {
  out.clear();
  Value x = lst;
  while (x.tag == Tag::PAIR) {
    out.push_back(heap_.pairs[x.id].car);
    x = heap_.pairs[x.id].cdr;
    if (out.size() > kListLimit) {
      if (!raise) return false;
      throw error(std::string(who) + ": list too long");
    }
  }
  spend(out.size());  // each element traversed is a step (as prims/structural.py)
  if (x.tag != Tag::NIL) {
    if (!raise) return false;
    throw error(std::string(who) + ": expected a proper list, got " + type_name(lst));
  }
  return true;
}

double Interp::uniform(Value x, const char* what) {
  if (x.tag != Tag::NUM || x.rank != 0) {
    throw error(std::string(what) + ": expected a number, got " + type_name(x));
  }
  guard_read(x.id);
  const Payload& p = pay_[x.id];
  const Real* v = pay_.ptr(x.id);
  if (p.width == 1) return v[0];
  const uint8_t* act = masks_.bits(mask_);
  int64_t first = -1;
  bool same = true;
  for (uint32_t l = 0; l < W_; ++l) {
    if (!act[l]) continue;
    if (first < 0) {
      first = l;
      continue;
    }
    const double a = v[first];
    if (std::isnan(a) ? !std::isnan(v[l]) : !(v[l] == a)) {
      same = false;
      break;
    }
  }
  if (first < 0) return 0.0;
  if (same) return v[first];
  std::vector<double> keys;
  bool has_nan = false;
  for (uint32_t l = 0; l < W_; ++l) {
    if (!act[l]) continue;
    if (std::isnan(v[l])) {
      has_nan = true;
    } else {
      keys.push_back(v[l]);
    }
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end(),
                         [](double a, double b) { return a == b; }),
             keys.end());
  Diverge d;
  for (size_t k = 0; k <= keys.size(); ++k) {
    if (k == keys.size() && !has_nan) break;
    const uint32_t m = masks_.add();
    uint8_t* bits = masks_.mutable_bits(m);
    const uint8_t* a = masks_.bits(mask_);
    for (uint32_t l = 0; l < W_; ++l) {
      const bool hit = k < keys.size() ? v[l] == keys[k] : std::isnan(v[l]);
      bits[l] = static_cast<uint8_t>(a[l] && hit);
    }
    masks_.seal(m);
    d.groups.push_back(m);
  }
  throw d;
}

int64_t Interp::index(Value x, const char* what) {
  const double v = uniform(x, what);
  if (!std::isfinite(v) || v != std::floor(v)) {
    throw error(std::string(what) + ": expected an integer, got " + py_repr(v));
  }
  if (v > 9.0e18) return INT64_MAX;
  if (v < -9.0e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

namespace {

std::string idx_str(int64_t v) { return std::to_string(v); }

}  // namespace

Value Interp::cxr(int code, const Value* args, uint32_t) {
  const std::string path = cxr_path(code);
  if (path.empty()) throw no_row(code);
  const std::string name = std::string("c") + path + "r";
  Value x = args[0];
  for (size_t k = path.size(); k-- > 0;) {
    if (x.tag != Tag::PAIR) throw error(name + ": expected a pair, got " + type_name(x));
    x = path[k] == 'a' ? heap_.pairs[x.id].car : heap_.pairs[x.id].cdr;
  }
  return x;
}

Value Interp::structural(int code, const Value* args, uint32_t n) {
  const Prim p = static_cast<Prim>(code);
  switch (p) {
    case Prim::CONS: alloc(); return make_value(Tag::PAIR, heap_.pair(args[0], args[1]));
    case Prim::LIST: alloc(n); return list_from(args, n, make_value(Tag::NIL));
    case Prim::LENGTH: {
      std::vector<Value> items;
      list_items(args[0], items, "length", true);
      return number(static_cast<double>(items.size()));
    }
    case Prim::APPEND: {
      if (n == 0) return make_value(Tag::NIL);
      Value out = args[n - 1];
      std::vector<Value> items;
      for (uint32_t k = n - 1; k-- > 0;) {
        list_items(args[k], items, "append", true);
        alloc(items.size());
        out = list_from(items.data(), items.size(), out);
      }
      return out;
    }
    case Prim::REVERSE: {
      std::vector<Value> items;
      list_items(args[0], items, "reverse", true);
      alloc(items.size());
      std::reverse(items.begin(), items.end());
      return list_from(items.data(), items.size(), make_value(Tag::NIL));
    }
    case Prim::LIST_TAIL:
    case Prim::LIST_REF: {
      const bool is_ref = p == Prim::LIST_REF;
      const int64_t k = index(args[1], is_ref ? "list-ref" : "list-tail");
      Value x = args[0];
      for (int64_t i = 0; i < k; ++i) {
        if (x.tag != Tag::PAIR) throw error("list-tail: index " + idx_str(k) + " out of range");
        x = heap_.pairs[x.id].cdr;
      }
      if (k < 0) throw error("list-tail: index " + idx_str(k) + " out of range");
      spend(static_cast<uint64_t>(k));  // each element traversed is a step
      if (!is_ref) return x;
      if (x.tag != Tag::PAIR) throw error("list-ref: index " + idx_str(k) + " out of range");
      return heap_.pairs[x.id].car;
    }
    case Prim::IOTA: return iota(args, n);
    case Prim::IS_NUMBER: return make_value(Tag::BOOL, args[0].tag == Tag::NUM && !args[0].rank);
    case Prim::IS_BOOLEAN:
      return make_value(Tag::BOOL, args[0].tag == Tag::BOOL || args[0].tag == Tag::BOOLS);
    case Prim::IS_SYMBOL: return make_value(Tag::BOOL, args[0].tag == Tag::SYMBOL);
    case Prim::IS_STRING: return make_value(Tag::BOOL, args[0].tag == Tag::STRING);
    case Prim::IS_PAIR: return make_value(Tag::BOOL, args[0].tag == Tag::PAIR);
    case Prim::IS_NULL: return make_value(Tag::BOOL, args[0].tag == Tag::NIL);
    case Prim::IS_VECTOR:
      return make_value(Tag::BOOL, args[0].tag == Tag::NUM && args[0].rank == 1);
    case Prim::IS_MATRIX:
      return make_value(Tag::BOOL, args[0].tag == Tag::NUM && args[0].rank == 2);
    case Prim::IS_LIST: {
      Value x = args[0];
      uint64_t n = 0;
      for (; x.tag == Tag::PAIR; ++n) x = heap_.pairs[x.id].cdr;
      spend(n);
      return make_value(Tag::BOOL, x.tag == Tag::NIL);
    }
    case Prim::IS_PROCEDURE:
      return make_value(Tag::BOOL,
                        args[0].tag == Tag::CLOSURE || args[0].tag == Tag::PRIMPROC);
    case Prim::NOT: return logical_not(args[0]);
    case Prim::IS_EQ:
    case Prim::IS_EQV: return eqv(args[0], args[1]);
    case Prim::IS_EQUAL: return equal(args[0], args[1]);
    case Prim::VOID: return make_value(Tag::VOID);
    default: throw no_row(code);
  }
}

Value Interp::iota(const Value* args, uint32_t n) {
  const int64_t count = index(args[0], "iota");
  if (count < 0) throw error("iota: count must be non-negative, got " + idx_str(count));
  alloc(static_cast<uint64_t>(count));
  const Value start = n > 1 ? args[1] : number(0.0);
  const Value step = n > 2 ? args[2] : number(1.0);
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    const Value mul_args[2] = {number(static_cast<double>(k)), step};
    const Value prod = numeric(static_cast<int>(Prim::MUL), mul_args, 2);
    const Value add_args[2] = {start, prod};
    items.push_back(numeric(static_cast<int>(Prim::ADD), add_args, 2));
  }
  return list_from(items.data(), items.size(), make_value(Tag::NIL));
}

Value Interp::logical_not(Value x) {
  if (x.tag != Tag::BOOLS) return make_value(Tag::BOOL, x.tag == Tag::BOOL && x.id == 0);
  const uint32_t pid = pay_.alloc(W_, 0, 1, 1, false);
  const Payload& src = pay_[x.id];
  const Real* in = pay_.ptr(x.id);
  Real* out = pay_.ptr(pid);
  for (uint32_t l = 0; l < W_; ++l) out[l] = in[src.width > 1 ? l : 0] != 0.0 ? 0.0 : 1.0;
  return make_value(Tag::BOOLS, pid);
}

double Interp::lane_bool(Value v, uint32_t l) const {
  if (v.tag == Tag::BOOL) return v.id ? 1.0 : 0.0;
  const Payload& p = pay_[v.id];
  return pay_.ptr(v.id)[p.width > 1 ? l : 0];
}

Value Interp::bools_from(Value a, Value b, bool conj) {
  const uint32_t pid = pay_.alloc(W_, 0, 1, 1, false);
  Real* out = pay_.ptr(pid);
  for (uint32_t l = 0; l < W_; ++l) {
    const bool x = lane_bool(a, l) != 0.0;
    const bool y = lane_bool(b, l) != 0.0;
    out[l] = (conj ? (x && y) : (x == y)) ? 1.0 : 0.0;
  }
  return make_value(Tag::BOOLS, pid);
}

Value Interp::eqv(Value a, Value b) {
  if (a.tag == Tag::NUM && b.tag == Tag::NUM) {
    if (a.rank || b.rank) return make_value(Tag::BOOL, same_value(a, b));
    const Value xs[2] = {a, b};
    return numeric(static_cast<int>(Prim::NUM_EQ), xs, 2);
  }
  const bool ab = a.tag == Tag::BOOL || a.tag == Tag::BOOLS;
  const bool bb = b.tag == Tag::BOOL || b.tag == Tag::BOOLS;
  if (ab && bb) {
    if (a.tag == Tag::BOOL && b.tag == Tag::BOOL) return make_value(Tag::BOOL, a.id == b.id);
    return bools_from(a, b, false);
  }
  return make_value(Tag::BOOL, same_value(a, b));
}

Value Interp::bool_and(Value a, Value b) {
  if ((a.tag == Tag::BOOL && !a.id) || (b.tag == Tag::BOOL && !b.id)) {
    return make_value(Tag::BOOL, 0);
  }
  if (a.tag == Tag::BOOL) return b;
  if (b.tag == Tag::BOOL) return a;
  return bools_from(a, b, true);
}

// Structural equality; a pair of pairs is compared once (shared structure stays linear) and
// every comparison is a step of the running lanes (as prims/structural.py _equal).
Value Interp::equal(Value a, Value b) {
  Value result = make_value(Tag::BOOL, 1);
  std::vector<std::pair<Value, Value>> stack{{a, b}};
  std::unordered_set<uint64_t> seen;
  while (!stack.empty()) {
    spend(1);
    const auto [x, y] = stack.back();
    stack.pop_back();
    Value r;
    if (x.tag == Tag::PAIR && y.tag == Tag::PAIR) {
      if (!seen.insert((static_cast<uint64_t>(x.id) << 32) | y.id).second) continue;
      stack.emplace_back(heap_.pairs[x.id].cdr, heap_.pairs[y.id].cdr);
      stack.emplace_back(heap_.pairs[x.id].car, heap_.pairs[y.id].car);
      continue;
    }
    if (x.tag == Tag::NUM && y.tag == Tag::NUM && x.rank && y.rank) {
      const Payload& px = pay_[x.id];
      const Payload& py = pay_[y.id];
      if (px.rank != py.rank || px.rows != py.rows || px.cols != py.cols) {
        return make_value(Tag::BOOL, 0);
      }
      r = array_equal(x, y);
    } else if (x.tag == Tag::STRING && y.tag == Tag::STRING) {
      r = make_value(Tag::BOOL, prog_->strings[x.id] == prog_->strings[y.id]);
    } else {
      r = eqv(x, y);
    }
    result = bool_and(result, r);
    if (result.tag == Tag::BOOL && !result.id) return result;
  }
  return result;
}

Value Interp::array_equal(Value x, Value y) {
  guard_read(x.id);
  guard_read(y.id);
  const Payload px = pay_[x.id];
  const Payload py = pay_[y.id];
  const Real* a = pay_.ptr(x.id);
  const Real* b = pay_.ptr(y.id);
  const uint32_t width = std::max(px.width, py.width);
  const uint32_t pid = pay_.alloc(W_, 0, 1, 1, false);
  a = pay_.ptr(x.id);
  b = pay_.ptr(y.id);
  Real* out = pay_.ptr(pid);
  for (uint32_t l = 0; l < W_; ++l) {
    bool eq = true;
    for (size_t e = 0; e < px.size() && eq; ++e) {
      const Real u = a[e * px.width + (px.width > 1 ? l : 0)];
      const Real v = b[e * py.width + (py.width > 1 ? l : 0)];
      eq = u == v;
    }
    out[l] = eq ? 1.0 : 0.0;
  }
  if (width == 1) return make_value(Tag::BOOL, out[0] != 0.0);
  return make_value(Tag::BOOLS, pid);
}

}  // namespace ndvm
