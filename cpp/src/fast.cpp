// One-lane fast forms (fast.hpp): which operations qualify, and their forward and VJP
// kernels. Each kernel restates, for one lane, the operations of the general kernel it
// replaces, in the same order: elementwise + - * as kernels.cpp's fwd_/vjp_ rows, dot /
// matvec / matmul as linalg_lanes.cpp's one-lane products, the 2 x 2 inverse and slogdet as
// lu_lanes.cpp's (the same inverse2 / slogdet2_parts / slogdet2_value of lanes.hpp). The
// lane forms (W > 1 lanes) are in fast_lanes.cpp: this file is compiled without vectorization
// (CMakeLists.txt), so every element is loaded and stored on its own and a kernel never reads
// a vector from elements that the previous record stored one at a time (a stall per load).
#include "ndvm/fast.hpp"

#include "ndvm/prims.hpp"

#include "fast_ew.hpp"
#include "lanes.hpp"

namespace ndvm {
namespace {

using fast_ew::ew_cotangent;
using fast_ew::ew_value;
using fast_ew::fits32;
using fast_ew::kZero;

// K elements read from p: copied into registers when K is a compile-time size (then the
// stores that follow need no aliasing checks against them), else read in place (K = 0).
template <uint32_t K>
struct View {
  Real x[K];
  explicit View(const Real* p) {
    for (uint32_t k = 0; k < K; ++k) x[k] = p[k];
  }
  Real operator[](uint32_t k) const { return x[k]; }
};

template <>
struct View<0> {
  const Real* p;
  explicit View(const Real* q) : p(q) {}
  Real operator[](uint32_t k) const { return p[k]; }
};

// N operands, S elements, none broadcast (N, S: compile-time sizes).
template <FastOp OP, int N, int S>
NDVM_SIMD void ew_forward_k(const FastRec& f, Real* v, LinalgScratch&) {
  Real x[N][S];
  for (int i = 0; i < N; ++i) {
    const Real* p = v + f.off[i];  // 64-bit addresses: no 32-bit index sum per element
    for (int e = 0; e < S; ++e) x[i][e] = p[e];
  }
  Real* o = v + f.out;
  for (int e = 0; e < S; ++e) o[e] = ew_value(OP, N, [&](int i) { return x[i][e]; });
}

template <FastOp OP, int N, int S>
NDVM_SIMD void ew_vjp_k(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  Real x[N][S];
  for (int i = 0; i < N; ++i) {
    const Real* p = v + f.off[i];  // 64-bit addresses: no 32-bit index sum per element
    for (int e = 0; e < S; ++e) x[i][e] = p[e];
  }
  const View<S> g(adj + f.aout);
  for (int i = 0; i < N; ++i) {
    if (!((f.taped >> i) & 1) || fast_aliased(f, i, touched)) continue;
    bool first = false;
    Real* a = fast_target(f, i, adj, touched, first);
    fast_put(a, S, first, [&](uint32_t e) {
      return ew_cotangent(OP, N, i, g[e], [&](int j) { return x[j][e]; });
    });
  }
}

// Any n, S and broadcasting: element e of operand i is p[i][e * st[i]].
struct EwArgs {
  const Real* p[kFastArgs];
  uint32_t st[kFastArgs];
  EwArgs(const FastRec& f, const Real* v) {
    for (int i = 0; i < f.n; ++i) {
      p[i] = v + f.off[i];
      st[i] = (f.scalar >> i) & 1 ? 0 : 1;
    }
  }
};

void ew_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const EwArgs a(f, v);
  Real* o = v + f.out;
  for (uint32_t e = 0; e < f.S; ++e) {
    o[e] = ew_value(f.op, f.n, [&](int i) { return a.p[i][e * a.st[i]]; });
  }
}

void ew_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  const EwArgs a(f, v);
  const Real* g = adj + f.aout;
  for (int i = 0; i < f.n; ++i) {
    if (!((f.taped >> i) & 1) || fast_aliased(f, i, touched)) continue;
    auto ct = [&](uint32_t e) {
      return ew_cotangent(f.op, f.n, i, g[e], [&](int j) { return a.p[j][e * a.st[j]]; });
    };
    bool first = false;
    Real* adj_i = fast_target(f, i, adj, touched, first);
    if (((f.scalar >> i) & 1) && f.S > 1) {  // the sum ct(0) + ct(1) + ... (unbroadcast)
      Real s = ct(0);
      for (uint32_t e = 1; e < f.S; ++e) s += ct(e);
      adj_i[0] = first ? s : adj_i[0] + s;
      continue;
    }
    fast_put(adj_i, f.S, first, ct);
  }
}

// ---- sums of products from 0 (linalg_lanes.cpp's one-lane dot, matvec, matmul) -------------
// Operand 0 is R x C, operand 1 is C x M (dot: two vectors of R); a size 0 is read from the
// record.

template <FastOp OP, uint32_t R, uint32_t C, uint32_t M>
NDVM_SIMD void products_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const View<R * C> A(v + f.off[0]);
  const View<OP == FastOp::DOT ? R : C * M> B(v + f.off[1]);
  Real* o = v + f.out;
  const uint32_t r = R ? R : f.r, c = C ? C : f.c, m = M ? M : f.m;
  if (OP == FastOp::DOT) {
    Real acc = kZero;
    for (uint32_t i = 0; i < r; ++i) acc += A[i] * B[i];
    o[0] = acc;
    return;
  }
  for (uint32_t i = 0; i < r; ++i) {  // matvec: m = 1
    for (uint32_t j = 0; j < m; ++j) {
      Real acc = kZero;
      for (uint32_t k = 0; k < c; ++k) acc += A[i * c + k] * B[k * m + j];
      o[i * m + j] = acc;
    }
  }
}

// dot: g a_other; matvec: g_i v_j (matrix), sum_i a_ij g_i (vector); matmul: G B^T, A^T G.
template <FastOp OP, uint32_t R, uint32_t C, uint32_t M>
NDVM_SIMD void products_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  const View<R * C> A(v + f.off[0]);
  const View<OP == FastOp::DOT ? R : C * M> B(v + f.off[1]);
  const View<OP == FastOp::DOT ? 1 : R * M> g(adj + f.aout);
  const uint32_t r = R ? R : f.r, c = C ? C : f.c, m = M ? M : f.m;
  for (int which = 0; which < 2; ++which) {
    if (!((f.taped >> which) & 1)) continue;
    bool first = false;
    Real* a = fast_target(f, which, adj, touched, first);
    if (OP == FastOp::DOT) {
      fast_put(a, r, first, [&](uint32_t i) { return g[0] * (which == 0 ? B[i] : A[i]); });
    } else if (OP == FastOp::MATVEC && which == 0) {
      for (uint32_t i = 0; i < r; ++i) {
        fast_put(a + i * c, c, first, [&](uint32_t j) { return g[i] * B[j]; });
      }
    } else if (which == 0) {  // G B^T (r x c)
      for (uint32_t i = 0; i < r; ++i) {
        fast_put(a + i * c, c, first, [&](uint32_t k) {
          Real acc = kZero;
          for (uint32_t j = 0; j < m; ++j) acc += g[i * m + j] * B[k * m + j];
          return acc;
        });
      }
    } else {  // A^T G (c x m; matvec: m = 1)
      for (uint32_t k = 0; k < c; ++k) {
        fast_put(a + k * m, m, first, [&](uint32_t j) {
          Real acc = kZero;
          for (uint32_t i = 0; i < r; ++i) acc += A[i * c + k] * g[i * m + j];
          return acc;
        });
      }
    }
  }
}

// ---- 2 x 2 inv, logdet, det (lu_lanes.cpp's inverse2, soa_slogdet, vjp_inverse/slogdet) ----

NDVM_INLINE lanes::Inv2 inverse_of(const Real* p) {
  return lanes::inverse2(p[0], p[1], p[2], p[3]);
}

NDVM_SIMD void inv2_forward(const FastRec& f, Real* v, LinalgScratch&) {
  Real* o = v + f.out;
  const lanes::Inv2 b = inverse_of(v + f.off[0]);
  o[0] = b.b00;
  o[1] = b.b01;
  o[2] = b.b10;
  o[3] = b.b11;
}

// -ans^T G ans^T, as t2 = (-ans^T) G, then t2 ans^T
NDVM_SIMD void inv2_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  if (!(f.taped & 1)) return;
  const View<4> ans(v + f.out);
  const View<4> g(adj + f.aout);
  Real t2[4];
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) {
      Real acc = kZero;
      for (int k = 0; k < 2; ++k) acc += (-ans[k * 2 + i]) * g[k * 2 + j];
      t2[i * 2 + j] = acc;
    }
  }
  bool first = false;
  Real* a = fast_target(f, 0, adj, touched, first);
  fast_put(a, 4, first, [&](uint32_t e) {
    const uint32_t i = e / 2, j = e % 2;
    Real acc = kZero;
    for (uint32_t k = 0; k < 2; ++k) acc += t2[i * 2 + k] * ans[j * 2 + k];
    return acc;
  });
}

template <bool kDet>
NDVM_SIMD void slogdet2_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const Real* p = v + f.off[0];
  v[f.out] = lanes::slogdet2_value(lanes::slogdet2_parts(p[0], p[1], p[2], p[3]), kDet);
}

// s inv(A)^T, with s = g ans (det) or g (logdet); kReuse: inv(A) read at f.off[1], the output
// of a taped `inv` record of the same operand (the same inverse_of on the same elements: the
// same bits), else computed here
template <bool kDet, bool kReuse = false>
NDVM_SIMD void slogdet2_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  if (!(f.taped & 1)) return;
  const Real* ans = v + f.out;
  const Real* g = adj + f.aout;
  const Real* q = v + f.off[1];
  const lanes::Inv2 b = kReuse ? lanes::Inv2{q[0], q[1], q[2], q[3]} : inverse_of(v + f.off[0]);
  const Real s = kDet ? g[0] * ans[0] : g[0];
  const Real inv_t[4] = {b.b00, b.b10, b.b01, b.b11};
  bool first = false;
  Real* a = fast_target(f, 0, adj, touched, first);
  fast_put(a, 4, first, [&](uint32_t e) { return s * inv_t[e]; });
}

// ---- the kernels of a record: compile-time sizes for the common small shapes ---------------

using Kernels = FastKernels;

template <FastOp OP, int N>
Kernels ew_sized(uint32_t S) {
  switch (S) {
    case 1: return {&ew_forward_k<OP, N, 1>, &ew_vjp_k<OP, N, 1>};
    case 2: return {&ew_forward_k<OP, N, 2>, &ew_vjp_k<OP, N, 2>};
    case 4: return {&ew_forward_k<OP, N, 4>, &ew_vjp_k<OP, N, 4>};
    default: return {&ew_forward, &ew_vjp};
  }
}

template <FastOp OP>
Kernels ew_kernels(const FastRec& f) {
  if (f.scalar != 0 && f.S > 1) return {&ew_forward, &ew_vjp};
  switch (f.n) {
    case 1: return ew_sized<OP, 1>(f.S);
    case 2: return ew_sized<OP, 2>(f.S);
    case 3: return ew_sized<OP, 3>(f.S);
    default: return {&ew_forward, &ew_vjp};
  }
}

template <FastOp OP, uint32_t K>
Kernels products_of() {  // dot of K; matvec K x K by K; matmul K x K by K x K
  constexpr uint32_t C = OP == FastOp::DOT ? 1 : K;
  constexpr uint32_t M = OP == FastOp::MATMUL ? K : 1;
  return {&products_forward<OP, K, C, M>, &products_vjp<OP, K, C, M>};
}

template <FastOp OP>
Kernels products_kernels(const FastRec& f) {
  const bool square = OP == FastOp::DOT || (f.c == f.r && (OP == FastOp::MATVEC || f.m == f.r));
  if (square && f.r == 2) return products_of<OP, 2>();
  if (square && f.r == 3) return products_of<OP, 3>();
  if (square && f.r == 4) return products_of<OP, 4>();
  return {&products_forward<OP, 0, 0, 0>, &products_vjp<OP, 0, 0, 0>};
}

Kernels kernels_of(const FastRec& f) {
  switch (f.op) {
    case FastOp::ADD: return ew_kernels<FastOp::ADD>(f);
    case FastOp::SUB: return ew_kernels<FastOp::SUB>(f);
    case FastOp::MUL: return ew_kernels<FastOp::MUL>(f);
    case FastOp::DOT: return products_kernels<FastOp::DOT>(f);
    case FastOp::MATVEC: return products_kernels<FastOp::MATVEC>(f);
    case FastOp::MATMUL: return products_kernels<FastOp::MATMUL>(f);
    case FastOp::INV2: return {&inv2_forward, &inv2_vjp};
    case FastOp::LOGDET2: return {&slogdet2_forward<false>, &slogdet2_vjp<false>};
    case FastOp::DET2: return {&slogdet2_forward<true>, &slogdet2_vjp<true>};
    case FastOp::UNARY:
    case FastOp::ROWS:
    case FastOp::LANE_PRODUCTS:
    case FastOp::LANE_INV2:
    case FastOp::LANE_SLOGDET2:
    case FastOp::NONE: break;
  }
  return {nullptr, nullptr};
}

// The fast op of a record over one-lane payloads (its sizes set in f), or NONE.
FastOp classify(Prim p, const Payload& out, const Payload* const* in, int n, FastRec& f) {
  switch (p) {
    case Prim::ADD:
    case Prim::SUB:
    case Prim::MUL:
    case Prim::SCALE: {
      f.S = static_cast<uint32_t>(out.size());
      for (int i = 0; i < n; ++i) {
        if (in[i]->size() == 1) f.scalar |= static_cast<uint8_t>(1u << i);
        if (in[i]->size() != 1 && in[i]->size() != out.size()) return FastOp::NONE;
      }
      if (p == Prim::ADD) return FastOp::ADD;
      return p == Prim::SUB ? FastOp::SUB : FastOp::MUL;
    }
    case Prim::DOT:
    case Prim::MATVEC:
    case Prim::MATMUL: {
      if (n != 2) return FastOp::NONE;
      f.r = in[0]->rows;
      f.c = p == Prim::DOT ? 1 : in[0]->cols;
      f.m = p == Prim::MATMUL ? in[1]->cols : 1;
      const uint64_t work = uint64_t{f.r} * f.c * f.m;
      const bool fits = p == Prim::DOT ? in[1]->size() == f.r && out.size() == 1
                                       : in[1]->rows == f.c && out.size() == uint64_t{f.r} * f.m;
      if (!fits || work > kFastWork || in[0]->size() != uint64_t{f.r} * f.c) return FastOp::NONE;
      if (p == Prim::DOT) return FastOp::DOT;
      return p == Prim::MATVEC ? FastOp::MATVEC : FastOp::MATMUL;
    }
    case Prim::INV:
    case Prim::LOGDET:
    case Prim::DET: {
      const bool two = n == 1 && in[0]->rows == 2 && in[0]->cols == 2;
      if (!two || out.size() != (p == Prim::INV ? 4u : 1u)) return FastOp::NONE;
      if (p == Prim::INV) return FastOp::INV2;
      return p == Prim::LOGDET ? FastOp::LOGDET2 : FastOp::DET2;
    }
    default: return FastOp::NONE;
  }
}

// Fills f (op, sizes, offsets, kernels) for primitive `code` on one-lane payloads (in: the
// operands'); false: it has no fast form (f.forward and f.vjp stay null).
bool resolve(int code, const Payload& out, const Payload* const* in, int n, FastRec& f) {
  if (code < 0 || code >= kPrimCodeLimit || n == 0 || n > kFastArgs || out.width != 1 ||
      !fits32(out)) {
    return false;
  }
  for (int i = 0; i < n; ++i) {
    if (in[i]->width != 1 || !fits32(*in[i])) return false;
  }
  f.op = classify(static_cast<Prim>(code), out, in, n, f);
  if (f.op == FastOp::NONE) return false;
  f.n = static_cast<uint8_t>(n);
  f.out = static_cast<uint32_t>(out.off);
  for (int i = 0; i < n; ++i) f.off[i] = static_cast<uint32_t>(in[i]->off);
  const Kernels k = kernels_of(f);
  f.forward = k.forward;
  f.vjp = k.vjp;
  return true;
}

}  // namespace

FastVjp slogdet2_vjp_kernel(FastOp op, bool reuse) {
  if (op == FastOp::DET2) return reuse ? &slogdet2_vjp<true, true> : &slogdet2_vjp<true>;
  return reuse ? &slogdet2_vjp<false, true> : &slogdet2_vjp<false>;
}

bool fast_resolve(int code, const Payload& out, const Payload* const* in, int n, FastRec& f) {
  return resolve(code, out, in, n, f);
}

}  // namespace ndvm
