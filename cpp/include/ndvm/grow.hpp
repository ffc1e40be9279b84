// The growable arrays of an evaluation's tape, arena and heap (docs/language.md, "Limits").
//
// Their size follows the evaluation's steps: a loop that runs until its deadline records
// millions of tape records. std::vector grows by allocating twice the capacity, copying every
// element and freeing the old block, all between two looks at the clock: past 2^22 records that
// is hundreds of MB copied (and as many faulted in) at once, and the deadline is overshot by as
// long. GrowVec grows its block with realloc instead: for blocks of allocator-mapped memory
// (glibc: every block past its mmap threshold, at most 32 MiB) the kernel moves the pages
// (mremap) without copying them, so a growth costs about the same at 1 MB as at 1 GB, and the
// new pages are faulted in as the elements are written, spread over the steps that write
// them. The hot path (an append with spare capacity) is the same as std::vector's.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

namespace ndvm {

template <class T>
class GrowVec {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                "GrowVec moves its elements as bytes");

 public:
  GrowVec() = default;
  GrowVec(const GrowVec& o) { append(o.begin(), o.end()); }
  GrowVec(GrowVec&& o) noexcept : p_(o.p_), n_(o.n_), cap_(o.cap_) {
    o.p_ = nullptr;
    o.n_ = o.cap_ = 0;
  }
  GrowVec& operator=(const GrowVec& o) {
    if (this != &o) {
      n_ = 0;
      append(o.begin(), o.end());
    }
    return *this;
  }
  GrowVec& operator=(GrowVec&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(cap_, o.cap_);
    return *this;
  }
  ~GrowVec() { std::free(p_); }

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  size_t capacity() const { return cap_; }
  T* data() { return p_; }
  const T* data() const { return p_; }
  T* begin() { return p_; }
  T* end() { return p_ + n_; }
  const T* begin() const { return p_; }
  const T* end() const { return p_ + n_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }
  T& back() { return p_[n_ - 1]; }
  const T& back() const { return p_[n_ - 1]; }

  void clear() { n_ = 0; }  // keeps the capacity
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  void push_back(const T& x) {
    if (n_ == cap_) {
      const T copy = x;  // x may be one of the elements
      grow(n_ + 1);
      p_[n_++] = copy;
      return;
    }
    p_[n_++] = x;
  }
  // A new value-initialized element (T() for a class with member initializers).
  T& emplace_back() {
    if (n_ == cap_) grow(n_ + 1);
    T* q = ::new (static_cast<void*>(p_ + n_)) T();
    ++n_;
    return *q;
  }
  // Appends [first, last) (not a range of this array).
  void append(const T* first, const T* last) {
    const size_t k = static_cast<size_t>(last - first);
    if (k == 0) return;
    if (n_ + k > cap_) grow(n_ + k);
    std::memcpy(static_cast<void*>(p_ + n_), first, k * sizeof(T));
    n_ += k;
  }
  // Appends n uninitialised elements; returns the index of the first.
  size_t extend(size_t n) {
    if (n_ + n > cap_) grow(n_ + n);
    const size_t at = n_;
    n_ += n;
    return at;
  }
  // Grows (new elements are value-initialized) or shrinks to n elements.
  void resize(size_t n) {
    if (n > cap_) grow(n);
    for (size_t i = n_; i < n; ++i) ::new (static_cast<void*>(p_ + i)) T();
    n_ = n;
  }

 private:
  // Doubles the capacity until it holds `need` elements (at least 4 KiB of them at first).
  void grow(size_t need) {
    size_t cap = cap_ ? cap_ : (4096 + sizeof(T) - 1) / sizeof(T);
    while (cap < need) cap *= 2;
    void* q = std::realloc(static_cast<void*>(p_), cap * sizeof(T));
    if (q == nullptr) throw std::bad_alloc();
    p_ = static_cast<T*>(q);
    cap_ = cap;
  }

  T* p_ = nullptr;
  size_t n_ = 0;
  size_t cap_ = 0;
};

}  // namespace ndvm
