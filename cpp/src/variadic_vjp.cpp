// Linear-time VJPs of the variadic `*`, `min` and `max` (kernels.hpp, VariadicVjp): one pass
// over the operands per record instead of one per operand. Operands broadcast to (S, W) as
// the elementwise kernels read them (a size-1 operand on every element, a width-1 one on
// every lane).
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
  v.suffix.resize(static_cast<size_t>(n) * SW);
  v.prefix.assign(SW, 1.0);
  for (int j = n - 1; j >= 1; --j) {  // Q_j = x_j * Q_(j+1), Q_n = 1
    const At x(args[j]);
    Real* q = v.suffix.data() + static_cast<size_t>(j) * SW;
    const Real* q1 = q + SW;
    for (size_t e = 0; e < S; ++e) {
      for (uint32_t l = 0; l < W; ++l) {
        const size_t k = e * W + l;
        q[k] = x(e, l) * (j == n - 1 ? Real(1.0) : q1[k]);
      }
    }
    clock.tick(SW);
  }
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
  for (; v.next < which; ++v.next) {  // P_which = P_(which-1) * x_(which-1) ...
    const At x(args[v.next]);
    for (size_t e = 0; e < S; ++e) {
      for (uint32_t l = 0; l < W; ++l) v.prefix[e * W + l] = v.prefix[e * W + l] * x(e, l);
    }
  }
  const bool last = which == v.n - 1;
  const Real* q = v.suffix.data() + static_cast<size_t>(which + 1) * SW;
  for (size_t k = 0; k < SW; ++k) ct[k] = g[k] * (v.prefix[k] * (last ? Real(1.0) : q[k]));
}

}  // namespace ndvm
