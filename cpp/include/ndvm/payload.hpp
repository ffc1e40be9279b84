// Numeric payloads: one structure-of-arrays arena, element-major with the lane stride, plus
// the lane masks. Arenas keep their capacity across evaluations (reset without free).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ndvm/grow.hpp"
#include "ndvm/kernels.hpp"

namespace ndvm {

enum class LimitKind : uint8_t { STEPS = 0, HEAP = 1, DEPTH = 2, DEADLINE = 3 };

// A runtime limit was hit: the whole evaluation stops (never a per-lane error).
struct LimitError : std::runtime_error {
  LimitKind kind;
  LimitError(LimitKind k, const std::string& msg) : std::runtime_error(msg), kind(k) {}
};

// Numeric payload memory of one evaluation is capped at 2^28 elements (2 GiB of float64, 1 GiB
// of float32); beyond it the evaluation stops with a heap LimitError instead of exhausting
// the host.
constexpr size_t kMaxPayloadElems = size_t{1} << 28;

// Growable array of payload elements that never zero-fills, keeps its capacity on reset and
// grows without a copy (grow.hpp).
class RealArena {
 public:
  size_t size() const { return buf_.size(); }
  Real* data() { return buf_.data(); }
  const Real* data() const { return buf_.data(); }
  void reset() { buf_.clear(); }
  // Appends n uninitialised elements; returns the offset of the first one.
  size_t grow(size_t n) {
    if (buf_.size() + n > kMaxPayloadElems) {
      throw LimitError(LimitKind::HEAP, "payload memory limit of " +
                                            std::to_string(kMaxPayloadElems * sizeof(Real) >> 20) +
                                            " MiB exceeded");
    }
    return buf_.extend(n);
  }

 private:
  GrowVec<Real> buf_;
};

struct Payload {
  uint64_t off = 0;
  uint32_t width = 1;  // 1 (lane-uniform) or W
  uint32_t rows = 1;
  uint32_t cols = 1;
  uint8_t rank = 0;
  bool taped = false;
  size_t size() const { return static_cast<size_t>(rows) * cols; }
  size_t count() const { return size() * width; }
};

class PayloadTable {
 public:
  void reset() {
    data_.reset();
    items_.clear();
  }
  uint32_t alloc(uint32_t width, uint8_t rank, uint32_t rows, uint32_t cols, bool taped) {
    Payload p;
    p.width = width;
    p.rank = rank;
    p.rows = rows;
    p.cols = cols;
    p.taped = taped;
    p.off = data_.grow(p.count());
    items_.push_back(p);
    return static_cast<uint32_t>(items_.size() - 1);
  }
  const Payload& operator[](uint32_t pid) const { return items_[pid]; }
  Real* base() { return data_.data(); }  // payload pid's elements start at base() + off
  Real* ptr(uint32_t pid) { return data_.data() + items_[pid].off; }
  const Real* ptr(uint32_t pid) const { return data_.data() + items_[pid].off; }
  Operand operand(uint32_t pid) const {
    const Payload& p = items_[pid];
    Operand o;
    o.p = data_.data() + p.off;
    o.width = p.width;
    o.rows = p.rows;
    o.cols = p.cols;
    o.rank = p.rank;
    return o;
  }
  size_t count() const { return items_.size(); }
  size_t elems() const { return data_.size(); }

 private:
  RealArena data_;
  GrowVec<Payload> items_;
};

// Lane masks over the W = B * Ng grid (lane = b * Ng + n). Mask 0 is every lane.
class MaskTable {
 public:
  void reset(uint32_t W) {
    W_ = W;
    bits_.clear();
    bits_.resize(W);
    if (W != 0) std::memset(bits_.data(), 1, W);
    counts_.clear();
    counts_.push_back(W);
  }
  uint32_t W() const { return W_; }
  const uint8_t* bits(uint32_t id) const { return bits_.data() + static_cast<size_t>(id) * W_; }
  uint32_t count(uint32_t id) const { return counts_[id]; }
  // Appends a new mask (all zero) and returns its id; fill through mutable_bits, then seal.
  uint32_t add() {
    bits_.resize(bits_.size() + W_);
    counts_.push_back(0);
    return static_cast<uint32_t>(counts_.size() - 1);
  }
  uint8_t* mutable_bits(uint32_t id) { return bits_.data() + static_cast<size_t>(id) * W_; }
  void seal(uint32_t id) {
    const uint8_t* b = bits(id);
    uint32_t n = 0;
    for (uint32_t l = 0; l < W_; ++l) n += b[l];
    counts_[id] = n;
  }
  // The count of a mask filled through mutable_bits whose lanes were counted while filling
  // (what seal would count).
  void set_count(uint32_t id, uint32_t n) { counts_[id] = n; }
  bool full(uint32_t id) const { return counts_[id] == W_; }

 private:
  uint32_t W_ = 1;
  GrowVec<uint8_t> bits_;
  GrowVec<uint32_t> counts_;
};

}  // namespace ndvm
