// Numeric payloads: one structure-of-arrays arena, element-major with the lane stride, plus
// the lane masks. Arenas keep their capacity across evaluations (reset without free).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
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

// Payload rows start on 64-byte boundaries (a cache line; one AVX-512 vector): a lane loop over
// rows that straddle lines splits every vector load in two, which measured 1.3x slower for a
// 2x2 product over 32 lanes streamed from the L2 on an AVX-512 Xeon.
constexpr size_t kLineBytes = 64;
constexpr size_t kLineElems = kLineBytes / sizeof(Real);

// Allocator of 64-byte-aligned blocks (the adjoint arena, parallel to the payloads').
template <class T>
struct LineAllocator {
  using value_type = T;
  LineAllocator() = default;
  template <class U>
  LineAllocator(const LineAllocator<U>&) {}  // NOLINT: converting, as std::allocator
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kLineBytes}));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{kLineBytes}); }
  template <class U>
  bool operator==(const LineAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const LineAllocator<U>&) const { return false; }
};
using LineVec = std::vector<Real, LineAllocator<Real>>;

// Growable array of payload elements that never zero-fills, keeps its capacity on reset and
// grows without a copy (grow.hpp). Element 0 (data()) sits on a 64-byte boundary: the buffer
// starts `head_` elements before it, and when growing moves the buffer to an address of
// another residue (a move by realloc keeps the page offset, so only small buffers, whose copy
// is cheap, shift), the elements are moved to the new boundary.
class RealArena {
 public:
  size_t size() const { return buf_.size() - head_; }
  Real* data() { return buf_.data() + head_; }
  const Real* data() const { return buf_.data() + head_; }
  void reset() {
    buf_.clear();
    buf_.extend(head_);  // within the capacity: no move
  }
  // Appends n uninitialised elements at an offset that is a multiple of `align` elements (the
  // padding before them is never read); returns that offset.
  size_t grow(size_t n, size_t align = 1) {
    const size_t live = size();
    const size_t at = (live + align - 1) / align * align;
    if (at + n > kMaxPayloadElems) {
      throw LimitError(LimitKind::HEAP, "payload memory limit of " +
                                            std::to_string(kMaxPayloadElems * sizeof(Real) >> 20) +
                                            " MiB exceeded");
    }
    // room for the head to move forward by up to a line after a move
    const size_t need = head_ + at + n + kLineElems;
    if (need > buf_.capacity()) {
      buf_.reserve(need);
      const size_t head = head_for(buf_.data());
      if (head != head_) {
        std::memmove(static_cast<void*>(buf_.data() + head), buf_.data() + head_,
                     live * sizeof(Real));
        head_ = head;
      }
      buf_.clear();
      buf_.extend(head_ + live);
    }
    buf_.extend(at - live + n);
    return at;
  }

 private:
  // Elements from p to the next 64-byte boundary (p is aligned to its element size).
  static size_t head_for(const Real* p) {
    const size_t mis = reinterpret_cast<uintptr_t>(p) % kLineBytes;
    return mis == 0 ? 0 : (kLineBytes - mis) / sizeof(Real);
  }
  GrowVec<Real> buf_;
  size_t head_ = 0;
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
    // a row per element over W > 1 lanes starts on a line (every row, when W is a multiple
    // of kLineElems)
    p.off = data_.grow(p.count(), width > 1 ? kLineElems : 1);
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
