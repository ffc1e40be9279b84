// Joining the lane groups of a divergent branch (mirrors src/ndvm/eval/merge.py): values of
// one structure merge per lane (taped as MERGE); values that do not merge stay apart.
#include "ndvm/interp.hpp"

namespace ndvm {

namespace {

constexpr int kMaxMergeDepth = 200;

bool boolish(Value v) { return v.tag == Tag::BOOL || v.tag == Tag::BOOLS; }

}  // namespace

class Merger {
 public:
  explicit Merger(Interp& in) : in_(in) {}

  bool mergeable(Value a, Value b, int depth) {
    if (same_value(a, b)) return true;
    if (++work_ > 1000000) return false;
    if (depth > kMaxMergeDepth) return false;
    if (a.tag == Tag::NUM && b.tag == Tag::NUM) {
      const Payload& p = in_.pay_[a.id];
      const Payload& q = in_.pay_[b.id];
      return p.rank == q.rank && p.rows == q.rows && p.cols == q.cols;
    }
    if (boolish(a) && boolish(b)) return true;
    if (a.tag == Tag::PAIR && b.tag == Tag::PAIR) {
      const PairCell x = in_.heap_.pairs[a.id];
      const PairCell y = in_.heap_.pairs[b.id];
      return mergeable(x.car, y.car, depth + 1) && mergeable(x.cdr, y.cdr, depth + 1);
    }
    return false;
  }

  Value merge(const std::vector<std::pair<uint32_t, Value>>& items) {
    const Value first = items[0].second;
    bool same = true;
    for (const auto& it : items) same = same && same_value(it.second, first);
    if (same) return first;
    if (first.tag == Tag::NUM) return numbers(items);
    if (boolish(first)) return bools(items);
    std::vector<std::pair<uint32_t, Value>> cars;
    std::vector<std::pair<uint32_t, Value>> cdrs;
    for (const auto& it : items) {
      const PairCell c = in_.heap_.pairs[it.second.id];
      cars.emplace_back(it.first, c.car);
      cdrs.emplace_back(it.first, c.cdr);
    }
    const Value car = merge(cars);
    const Value cdr = merge(cdrs);
    in_.alloc();
    return make_value(Tag::PAIR, in_.heap_.pair(car, cdr));
  }

 private:
  // Item owning lane l: the first whose mask has it, else the last.
  size_t owner(const std::vector<std::pair<uint32_t, Value>>& items, uint32_t l) const {
    for (size_t k = 0; k + 1 < items.size(); ++k) {
      if (in_.masks_.bits(items[k].first)[l]) return k;
    }
    return items.size() - 1;
  }

  Value numbers(const std::vector<std::pair<uint32_t, Value>>& items) {
    bool all_const = true;
    const Real v0 = in_.pay_.ptr(items[0].second.id)[0];
    for (const auto& it : items) {
      const Payload& p = in_.pay_[it.second.id];
      all_const = all_const && p.width == 1 && !p.taped && p.rank == 0 &&
                  in_.pay_.ptr(it.second.id)[0] == v0;
    }
    if (all_const) return items[0].second;
    const Payload shape = in_.pay_[items[0].second.id];
    bool taped = false;
    for (const auto& it : items) taped = taped || in_.pay_[it.second.id].taped;
    const uint32_t out = in_.pay_.alloc(in_.W_, shape.rank, shape.rows, shape.cols, taped);
    const uint32_t n = static_cast<uint32_t>(items.size());
    // the payloads and masks of the items (on the stack for a few items, the common case)
    constexpr uint32_t kFew = 8;
    uint32_t few[2 * kFew];
    std::vector<uint32_t> many;
    uint32_t* ids = few;
    if (n > kFew) {
      many.resize(2 * size_t(n));
      ids = many.data();
    }
    uint32_t* masks = ids + n;
    for (uint32_t k = 0; k < n; ++k) {
      ids[k] = items[k].second.id;
      masks[k] = items[k].first;
    }
    in_.merge_into(out, ids, masks, n);
    if (taped) {
      const uint32_t extra = static_cast<uint32_t>(in_.tape_.extras.size());
      in_.tape_.extras.append(masks, masks + n);
      in_.tape_op(TapeOp::MERGE, ids, n, out, extra, 0);
    }
    return make_value(Tag::NUM, out, shape.rank);
  }

  Value bools(const std::vector<std::pair<uint32_t, Value>>& items) {
    const uint32_t W = in_.W_;
    const uint32_t out = in_.pay_.alloc(W, 0, 1, 1, false);
    Real* o = in_.pay_.ptr(out);
    for (uint32_t l = 0; l < W; ++l) o[l] = in_.lane_bool(items[owner(items, l)].second, l);
    return make_value(Tag::BOOLS, out);
  }

  Interp& in_;
  uint64_t work_ = 0;
};

// Lane l of `out` is lane l of the first item whose mask has it (else of the last item).
void Interp::merge_into(uint32_t out, const uint32_t* ids, const uint32_t* masks, uint32_t n) {
  const uint32_t W = W_;
  Real* o = pay_.ptr(out);
  const size_t S = pay_[out].size();
  for (uint32_t l = 0; l < W; ++l) {
    uint32_t k = 0;
    while (k + 1 < n && !masks_.bits(masks[k])[l]) ++k;
    const Payload& p = pay_[ids[k]];
    const Real* src = pay_.ptr(ids[k]);
    for (size_t e = 0; e < S; ++e) o[e * W + l] = src[e * p.width + (p.width > 1 ? l : 0)];
  }
}

std::vector<std::pair<uint32_t, Value>> Interp::merge_groups(
    const std::vector<std::pair<uint32_t, Value>>& results) {
  Merger m(*this);
  // each result's group: the first group whose first result it merges with (groups in the
  // order of their first results, results in order within a group)
  const size_t R = results.size();
  std::vector<uint32_t>& first = merge_first_;  // per group: the index of its first result
  std::vector<uint32_t>& group = merge_group_;
  first.clear();
  group.resize(R);
  for (size_t r = 0; r < R; ++r) {
    size_t g = 0;
    while (g < first.size() && !m.mergeable(results[first[g]].second, results[r].second, 0)) ++g;
    if (g == first.size()) first.push_back(static_cast<uint32_t>(r));
    group[r] = static_cast<uint32_t>(g);
  }
  std::vector<std::pair<uint32_t, Value>> out;
  out.reserve(first.size());
  std::vector<std::pair<uint32_t, Value>>& items = merge_items_;
  for (size_t g = 0; g < first.size(); ++g) {
    items.clear();
    for (size_t r = first[g]; r < R; ++r) {
      if (group[r] == g) items.push_back(results[r]);
    }
    if (items.size() == 1) {
      out.push_back(items[0]);
      continue;
    }
    const uint32_t mask = masks_.add();
    const uint32_t W = W_;
    uint8_t* __restrict bits = masks_.mutable_bits(mask);
    for (const auto& it : items) {
      const uint8_t* __restrict b = masks_.bits(it.first);
      for (uint32_t l = 0; l < W; ++l) bits[l] = static_cast<uint8_t>(bits[l] | b[l]);
    }
    masks_.seal(mask);
    out.emplace_back(mask, m.merge(items));
  }
  return out;
}

}  // namespace ndvm
