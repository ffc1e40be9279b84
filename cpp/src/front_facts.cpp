// Facts of a program read, for the search funnel (ndvm.search.facts): its node count, its
// skeleton as a template and what decides whether it gives one number per point, from the
// reader's data in the arena (no Python data are built). The language's rules stay where they
// are: the tokens are the reader's, the printer is to_source's, and which primitives give a
// number or a truth value is decided by the caller (funnel.head_kind) for the heads named here.
#include <string>
#include <vector>

#include "ndvm/front.hpp"

namespace ndvm::front {
namespace {

struct Template {
  const std::vector<int32_t>& index;  // by name id: the symbol's index in ReadOutput::symbols
  bool described = true;  // false: a string, or a symbol not among ReadOutput::symbols
};

void template_atom(const Arena& a, const Datum& x, std::string& out, void* context) {
  auto* t = static_cast<Template*>(context);
  switch (x.kind) {
    case DKind::SYM: {
      const int32_t i = t->index[static_cast<size_t>(x.text)];
      t->described = t->described && i >= 0;
      out += '{';
      out += std::to_string(i);
      out += '}';
      break;
    }
    case DKind::NUM: out += 'C'; break;
    case DKind::BOOL: out += x.flag ? "#t" : "#f"; break;
    case DKind::STR: t->described = false; break;
    case DKind::LIST: break;
  }
}

int64_t count_nodes(const Arena& a, const std::vector<DRef>& top) {
  int64_t n = 0;
  std::vector<DRef> stack(top.rbegin(), top.rend());
  while (!stack.empty()) {
    const Datum& x = a[stack.back()];
    stack.pop_back();
    ++n;
    if (x.kind != DKind::LIST) continue;
    for (int32_t i = 0; i < x.count; ++i) stack.push_back(a.items[size_t(x.first + i)]);
    if (x.tail >= 0) stack.push_back(x.tail);
  }
  return n;
}

// funnel._kind's requirements of the form at `root`, each a fact about one symbol: a datum in
// a value position must give one number (a number, a name, a list whose head gives a number),
// the condition of an `if` a number or a truth value. False: no names make it one number.
bool scalar_requirements(const Arena& a, DRef root, const std::vector<int32_t>& index,
                         SourceFacts& f) {
  enum Place : uint8_t { VALUE, COND };
  struct Item {
    DRef d;
    Place place;
  };
  std::vector<Item> stack{{root, VALUE}};
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    const Datum& x = a[it.d];
    if (x.kind == DKind::NUM) continue;
    if (x.kind == DKind::SYM) {
      f.leaves.push_back(index[size_t(x.text)]);
      continue;
    }
    if (x.kind != DKind::LIST || x.tail >= 0 || x.count == 0) return false;
    const DRef* items = a.begin_items(it.d);
    const Datum& head = a[items[0]];
    if (head.kind != DKind::SYM) return false;
    const int32_t h = index[size_t(head.text)];
    f.heads.push_back(h);
    if (head.text == kw::IF) {
      if (x.count != 4) return false;
      stack.push_back({items[1], COND});
      stack.push_back({items[2], VALUE});
      stack.push_back({items[3], VALUE});
      continue;
    }
    (it.place == VALUE ? f.value_heads : f.cond_heads).push_back(h);
    for (int32_t i = 1; i < x.count; ++i) stack.push_back({items[i], VALUE});
  }
  return true;
}

}  // namespace

SourceFacts source_facts(const Arena& a, const ReadOutput& out) {
  SourceFacts f;
  // by name id (every id of the arena is below its size); a small program's reuses the buffer
  thread_local std::vector<int32_t> kept;
  std::vector<int32_t> large;
  std::vector<int32_t>& index = a.texts.size() <= 4096 ? kept : large;
  index.assign(a.texts.size(), -1);
  for (size_t i = 0; i < out.symbols.size(); ++i) {
    index[size_t(out.symbols[i])] = static_cast<int32_t>(i);
  }
  Template t{index};
  for (size_t i = 0; i < out.top.size(); ++i) {
    if (i > 0) f.skeleton += ' ';
    print_source(a, out.top[i], f.skeleton, template_atom, &t);
    if (i == 0) f.first_end = f.skeleton.size();
  }
  if (!t.described) return f;
  f.described = true;
  f.nodes = count_nodes(a, out.top);
  f.may_be_scalar = out.top.size() == 1 && scalar_requirements(a, out.top[0], index, f);
  return f;
}

}  // namespace ndvm::front
