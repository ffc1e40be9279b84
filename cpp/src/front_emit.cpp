// The resolver's emission: the resolved tree -> the node tables of program.hpp (preorder ids,
// child lists, the constant pool, the strings), as bindings/lower_ir.cpp lowers the same
// Python IR. The tables are valid by construction (build_program_trusted lowers them).
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "front_resolve.hpp"

namespace ndvm::front::detail {

// -- emission: the preorder walk of bindings/lower_ir.cpp ------------------------------------
namespace {

class Emitter {
 public:
  explicit Emitter(Tables& t) : t_(t) {}

  int32_t intern(const std::string& s) {  // s: an arena's text or a static string
    if (n_by_address_ < kByAddress) {  // the same names come back by the same address
      for (size_t i = 0; i < n_by_address_; ++i) {
        if (by_address_[i].at == &s) return by_address_[i].id;
      }
    }
    int32_t id = find(s);
    if (id < 0) {
      id = static_cast<int32_t>(t_.strings.size());
      t_.strings.push_back(s);
      if (!interned_.empty()) {
        interned_.emplace(std::string_view(s), id);  // `s` outlives the emission
      } else {
        seen_[n_seen_++] = {&s, id};  // (t_.strings may move: the map views `s` itself)
        if (n_seen_ > kScan) {
          for (size_t i = 0; i < n_seen_; ++i) interned_.emplace(*seen_[i].at, seen_[i].id);
        }
      }
    }
    if (n_by_address_ < kByAddress) by_address_[n_by_address_++] = {&s, id};
    return id;
  }
  int32_t fresh(const std::string& s) {
    t_.strings.push_back(s);
    return static_cast<int32_t>(t_.strings.size() - 1);
  }
  int32_t row(ConstKind k, int32_t a, int32_t b, double num) {
    t_.consts.push_back(static_cast<int32_t>(k));
    t_.consts.push_back(a);
    t_.consts.push_back(b);
    t_.nums.push_back(num);
    return static_cast<int32_t>(t_.nums.size() - 1);
  }
  int32_t constant(const INode& n);

 private:
  int32_t quoted(const Arena& a, DRef d);

  // the id of the interned string equal to `s`, or -1: a scan of seen_ while there are few
  int32_t find(const std::string& s) const {
    if (interned_.empty()) {
      for (size_t i = 0; i < n_seen_; ++i) {
        if (*seen_[i].at == s) return seen_[i].id;
      }
      return -1;
    }
    const auto it = interned_.find(s);
    return it == interned_.end() ? -1 : it->second;
  }

  struct Ref {  // a string the emission interned (an arena's text or a static one) and its id
    const std::string* at;
    int32_t id;
  };
  static constexpr size_t kByAddress = 48;  // then only interned_ (a scan no longer pays)
  static constexpr size_t kScan = 24;       // more interned strings: the map
  Tables& t_;
  Ref seen_[kScan + 1];  // the interned strings while interned_ is empty (fresh() ones are not)
  size_t n_seen_ = 0;
  std::unordered_map<std::string_view, int32_t> interned_;  // empty while seen_ is scanned
  Ref by_address_[kByAddress];
  size_t n_by_address_ = 0;
};

// A value of a quoted datum: the pair of items[i..] of a list, an atom, or the empty list.
struct QVal {
  DRef d = -1;     // the list (pair) or the atom; -1: NIL
  int32_t i = -1;  // pair: index of its car in the list; -1: an atom
};

QVal value_of(const Arena& a, DRef d) {
  while (a[d].kind == DKind::LIST) {
    if (a[d].count > 0) return {d, 0};
    if (a[d].tail < 0) return {-1, -1};
    d = a[d].tail;
  }
  return {d, -1};
}

bool special_number(const Arena& a, const Datum& x, int* key) {
  const std::string& t = a.texts[size_t(x.text)];
  if (t == "+inf.0") *key = 0;
  else if (t == "-inf.0") *key = 1;
  else if (t == "+nan.0" || t == "-nan.0") *key = 2;  // one shared NaN object in Python
  else return false;
  return true;
}

// A quoted datum, lowered as lower_ir does Python's Pair chain: children first (car, then
// cdr), each occurrence its own entry; a pair refers to the last entry made for an object
// Python shares (the empty list, #t, #f, a symbol, +inf.0 / -inf.0 / NaN).
int32_t Emitter::quoted(const Arena& a, DRef root) {
  struct Item {
    QVal v;
    int32_t car = -1, cdr = -1;  // order positions of the children (pairs)
  };
  std::vector<Item> order;
  struct Todo {
    QVal v;
    int32_t parent, slot;
  };
  std::vector<Todo> stack{{value_of(a, root), -1, 0}};
  while (!stack.empty()) {
    const Todo td = stack.back();
    stack.pop_back();
    const auto pos = static_cast<int32_t>(order.size());
    if (td.parent >= 0) (td.slot == 0 ? order[size_t(td.parent)].car : order[size_t(td.parent)].cdr) = pos;
    order.push_back({td.v});
    if (td.v.d >= 0 && td.v.i >= 0) {
      const Datum& l = a[td.v.d];
      const QVal car = value_of(a, a.items[size_t(l.first + td.v.i)]);
      QVal cdr{-1, -1};
      if (td.v.i + 1 < l.count) cdr = {td.v.d, td.v.i + 1};
      else if (l.tail >= 0) cdr = value_of(a, l.tail);
      stack.push_back({car, pos, 0});
      stack.push_back({cdr, pos, 1});
    }
  }
  std::vector<int32_t> index(order.size(), -1);
  int32_t shared[6] = {-1, -1, -1, -1, -1, -1};  // nil #f #t +inf -inf nan: the last entry
  std::unordered_map<int32_t, int32_t> symbols;
  auto ref = [&](int32_t pos) {
    const QVal& v = order[size_t(pos)].v;
    if (v.d < 0) return shared[0];
    if (v.i >= 0) return index[size_t(pos)];
    const Datum& x = a[v.d];
    int key = 0;
    if (x.kind == DKind::BOOL) return shared[x.flag ? 2 : 1];
    if (x.kind == DKind::SYM) return symbols.at(x.text);
    if (x.kind == DKind::NUM && special_number(a, x, &key)) return shared[3 + key];
    return index[size_t(pos)];
  };
  for (size_t p = order.size(); p-- > 0;) {
    const Item& it = order[p];
    int32_t k = 0;
    if (it.v.d < 0) {
      k = shared[0] = row(ConstKind::NIL, 0, 0, 0.0);
    } else if (it.v.i >= 0) {
      k = row(ConstKind::PAIR, ref(it.car), ref(it.cdr), 0.0);
    } else {
      const Datum& x = a[it.v.d];
      int key = 0;
      switch (x.kind) {
        case DKind::NUM:
          k = row(ConstKind::NUM, 0, 0, x.num);
          if (special_number(a, x, &key)) shared[3 + key] = k;
          break;
        case DKind::BOOL: k = shared[x.flag ? 2 : 1] = row(ConstKind::BOOL, x.flag, 0, 0.0); break;
        case DKind::SYM:
          k = row(ConstKind::SYMBOL, intern(a.texts[size_t(x.text)]), 0, 0.0);
          symbols[x.text] = k;
          break;
        case DKind::STR: k = row(ConstKind::STRING, fresh(a.texts[size_t(x.text)]), 0, 0.0); break;
        case DKind::LIST: break;  // value_of never yields a list atom
      }
    }
    index[p] = k;
  }
  return index[0];
}

int32_t Emitter::constant(const INode& n) {
  switch (n.ck) {
    case 0: return row(ConstKind::NUM, 0, 0, n.num);
    case 1: return row(ConstKind::BOOL, n.a, 0, 0.0);
    case 2: return row(ConstKind::VOID, 0, 0, 0.0);
    case 3: return row(ConstKind::STRING, fresh(*n.name), 0, 0.0);
    default: break;
  }
  const Datum& x = (*n.qa)[n.qd];
  if (x.kind == DKind::NUM) return row(ConstKind::NUM, 0, 0, x.num);
  return quoted(*n.qa, n.qd);
}

}  // namespace

Tables Resolver::emit(int32_t root) const {
  Tables t;
  // sized for the tree's nodes and child slots (each emitted once), grown if a node were
  // reached twice, cut to length at the end
  t.nodes.resize(nodes_.size() * 9);
  t.tail.resize(nodes_.size());
  t.kids.resize(kids_.size());
  size_t n_out = 0, kids_out = 0;
  t.consts.reserve(3 * 16);
  t.nums.reserve(16);
  t.strings.reserve(16);
  Emitter em(t);
  std::vector<std::pair<int32_t, int64_t>> stack;
  stack.reserve(32);
  stack.emplace_back(root, -1);
  while (!stack.empty()) {
    const auto [i, slot] = stack.back();
    stack.pop_back();
    const auto id = static_cast<int32_t>(n_out);
    if (slot >= 0) t.kids[size_t(slot)] = id;
    if (n_out == t.tail.size()) [[unlikely]] {
      t.tail.resize(2 * n_out + 1);
      t.nodes.resize(9 * t.tail.size());
    }
    const INode& n = nodes_[size_t(i)];
    int32_t a = 0, b = 0, c = 0;
    switch (n.kind) {
      case NodeKind::CONST: a = em.constant(n); break;
      case NodeKind::LOCAL:
        a = n.a;
        b = n.b;
        c = em.intern(*n.name);
        break;
      case NodeKind::PARAM:
      case NodeKind::INPUT: a = n.a; break;
      case NodeKind::LAMBDA:
        a = n.a;
        b = n.b;
        c = em.intern(*n.name);
        break;
      case NodeKind::LETREC:
        b = static_cast<int32_t>(t.aux.size());
        for (int32_t k = 0; k < n.b; ++k) t.aux.push_back(em.intern(*names_[size_t(n.a + k)]));
        break;
      case NodeKind::ASSERT: c = em.intern(*n.name); break;
      default: break;
    }
    const auto off = static_cast<int32_t>(kids_out);
    kids_out += size_t(n.nkids);
    if (kids_out > t.kids.size()) [[unlikely]] t.kids.resize(2 * kids_out);
    int32_t* row = t.nodes.data() + 9 * n_out;
    row[0] = static_cast<int32_t>(n.kind);
    row[1] = int32_t(n.op);
    row[2] = a;
    row[3] = b;
    row[4] = c;
    row[5] = off;
    row[6] = n.nkids;
    row[7] = n.line;
    row[8] = n.column;
    t.tail[n_out++] = n.tail ? 1 : 0;
    for (int32_t k = n.nkids; k-- > 0;) stack.emplace_back(kids_[size_t(n.kids + k)], off + k);
  }
  t.nodes.resize(9 * n_out);
  t.tail.resize(n_out);
  t.kids.resize(kids_out);
  return t;
}

}  // namespace ndvm::front::detail
