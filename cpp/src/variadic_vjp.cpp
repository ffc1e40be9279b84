// Linear-time VJPs of the variadic `*`, `min` and `max` (kernels.hpp, VariadicVjp): one pass
// over the operands per record instead of one per operand. Operands broadcast to (S, W) as
// the elementwise kernels read them (a size-1 operand on every element, a width-1 one on
// every lane).
#include <algorithm>

#include "ndvm/kernels.hpp"
#include "ndvm/prims.hpp"

namespace ndvm {
namespace {

// element e of lane l of an operand broadcast to (S, W)
struct At {
  const Real* p;
  size_t es;
  size_t ls;
  explicit At(const Operand& o)
      : p(o.p), es(o.size() > 1 ? o.width : 0), ls(o.width > 1 ? 1 : 0) {}
  Real operator()(size_t e, size_t l) const { return p[e * es + l * ls]; }
};

bool is_extremal(int code) {
  return code == static_cast<int>(Prim::MIN) || code == static_cast<int>(Prim::MAX);
}

// Operands per block of the suffix products: ceil(sqrt(n)).
size_t block_size(int n) {
  size_t K = 1;
  while (K * K < static_cast<size_t>(n)) ++K;
  return K;
}

// The block part of VariadicVjp::suffix gets Q_j for the j in (bK, end] of block b (end =
// min((b+1) K, n)), at j - bK - 1, from Q_end (marks[b]) down.
void fill_block(VariadicVjp& v, const Operand* args, size_t b, size_t K, size_t nb, size_t SW,
                uint32_t W, size_t S) {
  const size_t end = std::min((b + 1) * K, static_cast<size_t>(v.n));
  Real* blk = v.suffix.data() + nb * SW;
  std::copy_n(v.suffix.data() + b * SW, SW, blk + (end - b * K - 1) * SW);
  for (size_t j = end - 1; j > b * K; --j) {
    const At x(args[j]);
    Real* q = blk + (j - b * K - 1) * SW;
    const Real* q1 = q + SW;
    for (size_t e = 0; e < S; ++e) {
      for (uint32_t l = 0; l < W; ++l) q[e * W + l] = x(e, l) * q1[e * W + l];
    }
  }
}

}  // namespace

bool variadic_vjp_wanted(int code, int n) {
  return (code == static_cast<int>(Prim::MUL) && n >= 4) || (is_extremal(code) && n >= 3);
}

void variadic_vjp_prepare(int code, const Real* ans, const Operand* args, int n, uint32_t W,
                          size_t S, VariadicVjp& v, WorkClock& clock) {
  const size_t SW = S * W;
  v.n = n;
  v.next = 0;
  if (is_extremal(code)) {  // the last write is the smallest index equal to the result
    v.first.assign(SW, static_cast<uint32_t>(n));
    for (int j = n; j-- > 0;) {
      const At x(args[j]);
      for (size_t e = 0; e < S; ++e) {
        for (uint32_t l = 0; l < W; ++l) {
          if (x(e, l) == ans[e * W + l]) v.first[e * W + l] = static_cast<uint32_t>(j);
        }
      }
      clock.tick(SW);
    }
    return;
  }
  // VariadicVjp::suffix holds [marks | block | run]: marks[b] = Q at the end of block b
  // (blocks of K = ceil(sqrt(n)) operands), block = the Q_j of the block that holds operand
  // v.next, run a scratch row: about 2 sqrt(n) S W values, not n S W
  const size_t K = block_size(n);
  const size_t nb = (static_cast<size_t>(n) + K - 1) / K;
  v.suffix.resize((nb + K + 1) * SW);
  v.prefix.assign(SW, 1.0);
  Real* run = v.suffix.data() + (nb + K) * SW;
  std::fill_n(run, SW, Real(1.0));  // Q_n
  std::copy_n(run, SW, v.suffix.data() + (nb - 1) * SW);
  for (int j = n - 1; j >= 1; --j) {  // Q_j = x_j * Q_(j+1)
    const At x(args[j]);
    for (size_t e = 0; e < S; ++e) {
      for (uint32_t l = 0; l < W; ++l) run[e * W + l] = x(e, l) * run[e * W + l];
    }
    const size_t jj = static_cast<size_t>(j);
    if (jj % K == 0) std::copy_n(run, SW, v.suffix.data() + (jj / K - 1) * SW);  // block end
    clock.tick(SW);
  }
  fill_block(v, args, 0, K, nb, SW, W, S);
}

void variadic_vjp(int code, const Real* g, const Operand* args, int which, Real* ct,
                  uint32_t W, size_t S, VariadicVjp& v) {
  const size_t SW = S * W;
  if (is_extremal(code)) {
    for (size_t k = 0; k < SW; ++k) {
      ct[k] = g[k] * (v.first[k] == static_cast<uint32_t>(which) ? Real(1.0) : Real(0.0));
    }
    return;
  }
  const size_t K = block_size(v.n);
  const size_t nb = (static_cast<size_t>(v.n) + K - 1) / K;
  const size_t b = static_cast<size_t>(which) / K;
  if (b != static_cast<size_t>(v.next) / K) fill_block(v, args, b, K, nb, SW, W, S);
  for (; v.next < which; ++v.next) {  // P_which = P_(which-1) * x_(which-1) ...
    const At x(args[v.next]);
    for (size_t e = 0; e < S; ++e) {
      for (uint32_t l = 0; l < W; ++l) v.prefix[e * W + l] = v.prefix[e * W + l] * x(e, l);
    }
  }
  const Real* q = v.suffix.data() + (nb + static_cast<size_t>(which) - b * K) * SW;
  for (size_t k = 0; k < SW; ++k) ct[k] = g[k] * (v.prefix[k] * q[k]);  // Q_(which+1)
}

}  // namespace ndvm
