// Fused pairs (docs/native.md, "Fused pairs"): a lane-form product (dot of K-vectors, matvec
// of a K x K matrix, matmul of K x K matrices, K = 2, 3, 4; fast_products.cpp) whose output U
// is read only by the next record, a lane-form + or - of two full-width operands (X and U, in
// either order). The pair runs as one superinstruction at the consumer's place in the tape:
// its forward computes each lane's product in registers and writes only the sum or
// difference (U is never stored: nothing reads it), and its VJP gives X its cotangent, then
// the product's operands theirs from +g or -g (U's cotangent, which the unfused sweep stores
// and reads back), in one call. The producer's own record runs a kernel that does nothing;
// its VJP never runs (U is never marked touched: Interp::plan_pairs).
//
// Every element is the unfused kernels' expression, in the same order: the product's
// 0 + x_0 y_0 + x_1 y_1 + ..., then (0 + x0) + x1 or x0 - x1; the cotangents g or -g, then
// g b^T-style sums from 0 with the same factors in the same order, stored when the target's
// first, else added, X's before the product's operand 0's before operand 1's (the same
// touched-flag order as the unfused sweep). Values and gradients are therefore bitwise the
// unfused path's (tests/native/test_pairs.py).
//
// Adjoint storage: X's adjoint may be the consumer's output adjoint g itself (plan_adjoints'
// sharing along + and -), and X may be an operand of the product. Each lane's loop therefore
// reads every element it needs before it writes any: the product's two operands get their
// cotangents in one lane loop that reads g (and the operands' values) first; a pair whose X
// is both product operands is not formed.
#include "ndvm/fast.hpp"
#include "ndvm/prims.hpp"

#include "fast_ew.hpp"

namespace ndvm {
namespace {

using fast_ew::ew_value;
using fast_ew::kZero;

// The product's shape: E output elements of T terms each; term t of element e multiplies row
// xi(e, t) of operand 0 by row yi(e, t) of operand 1 (fast_products.cpp's factor order).
template <int K>
struct Dot {
  static constexpr int E = 1, T = K, NA = K, NB = K;
  static constexpr int xi(int, int t) { return t; }
  static constexpr int yi(int, int t) { return t; }
};

template <int K>
struct Matvec {
  static constexpr int E = K, T = K, NA = K * K, NB = K;
  static constexpr int xi(int e, int t) { return e * K + t; }
  static constexpr int yi(int, int t) { return t; }
};

template <int K>
struct Matmul {
  static constexpr int E = K * K, T = K, NA = K * K, NB = K * K;
  static constexpr int xi(int e, int t) { return e / K * K + t; }
  static constexpr int yi(int e, int t) { return t * K + e % K; }
};

// Row k of an element-major W-lane operand at p.
NDVM_INLINE Real at(const Real* p, int k, uint32_t W, uint32_t l) { return p[size_t(k) * W + l]; }

// A pair's operands: the product's (a, b: operands 0 and 1 of p, the record before the
// consumer f) and the consumer's other one (x, at operand slot xs), over W lanes.
struct PairArgs {
  const FastRec& p;
  uint32_t W;
  const Real* a;
  const Real* b;
  const Real* x;
  PairArgs(const FastRec& f, const Real* v, int xs)
      : p((&f)[-1]), W(p.m), a(v + p.off[0]), b(v + p.off[1]), x(v + f.off[xs]) {}
};

// The consumer (+ or -, U at operand slot U, X at the other) fused with product P before it.
template <class P, FastOp OP, int U>
NDVM_SIMD void pair_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const PairArgs q(f, v, 1 - U);
  const uint32_t W = q.W;
  const Real *a = q.a, *b = q.b, *x = q.x;
  Real* o = v + f.out;
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    for (int e = 0; e < P::E; ++e) {
      Real acc = kZero;
      for (int t = 0; t < P::T; ++t) acc += at(a, P::xi(e, t), W, l) * at(b, P::yi(e, t), W, l);
      const Real xe = at(x, e, W, l);
      o[size_t(e) * W + l] = ew_value(OP, 2, [&](int i) { return i == U ? acc : xe; });
    }
  }
}

// Each lane's N cotangent elements ct(c, l) (all computed before any is written), stored into
// `o` (kFirst) or added.
template <int N, bool kFirst, class C>
NDVM_INLINE void put_lanes(Real* o, uint32_t W, C ct) {
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    Real c[N];
    for (int k = 0; k < N; ++k) c[k] = ct(k, l);
    for (int k = 0; k < N; ++k) {
      Real* ok = o + size_t(k) * W;
      ok[l] = kFirst ? c[k] : ok[l] + c[k];
    }
  }
}

template <int N, class C>
NDVM_INLINE void put(Real* o, uint32_t W, bool first, C ct) {
  if (first) {
    put_lanes<N, true>(o, W, ct);
  } else {
    put_lanes<N, false>(o, W, ct);
  }
}

// Element e of the cotangent of the product's operand `which`, from U's cotangent g(k) of
// this lane (fast_products' dot_vjp, matvec_vjp, matmul_vjp: the same factors in the same
// order).
template <class P, int kWhich, class G>
NDVM_INLINE Real product_ct(int e, G g, const Real* a, const Real* b, uint32_t W, uint32_t l) {
  constexpr int K = P::T;
  Real acc = kZero;
  if constexpr (P::E == 1) {  // dot: g other
    acc = g(0) * at(kWhich == 0 ? b : a, e, W, l);
  } else if constexpr (P::NB == K && kWhich == 0) {  // matvec, the matrix: g_i x_j
    acc = g(e / K) * at(b, e % K, W, l);
  } else if constexpr (P::NB == K) {  // matvec, the vector: sum_i a(i, j) g_i
    for (int i = 0; i < K; ++i) acc += at(a, i * K + e, W, l) * g(i);
  } else if constexpr (kWhich == 0) {  // matmul: sum_j g(i, j) b(k, j)
    for (int j = 0; j < K; ++j) acc += g(e / K * K + j) * at(b, e % K * K + j, W, l);
  } else {  // matmul: sum_i a(i, k) g(i, j)
    for (int i = 0; i < K; ++i) acc += at(a, i * K + e / K, W, l) * g(i * K + e % K);
  }
  return acc;
}

// Both product operands' cotangents (ta: operand 0's adjoint, tb: operand 1's), stored (kFA,
// kFB) or added, in one lane loop that reads U's cotangent gu(k, l) and the operands before it
// writes (either adjoint may be the storage gu reads, or both the same), operand 0's first.
template <class P, bool kFA, bool kFB, class G>
NDVM_INLINE void product_both(const PairArgs& q, Real* ta, Real* tb, G gu) {
  const uint32_t W = q.W;
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    Real g[P::E];
    for (int e = 0; e < P::E; ++e) g[e] = gu(e, l);
    auto gl = [&](int k) { return g[k]; };
    Real ca[P::NA], cb[P::NB];
    for (int e = 0; e < P::NA; ++e) ca[e] = product_ct<P, 0>(e, gl, q.a, q.b, W, l);
    for (int e = 0; e < P::NB; ++e) cb[e] = product_ct<P, 1>(e, gl, q.a, q.b, W, l);
    for (int e = 0; e < P::NA; ++e) {
      Real* o = ta + size_t(e) * W;
      o[l] = kFA ? ca[e] : o[l] + ca[e];
    }
    for (int e = 0; e < P::NB; ++e) {
      Real* o = tb + size_t(e) * W;
      o[l] = kFB ? cb[e] : o[l] + cb[e];
    }
  }
}

// The consumer's other operand X (at slot 1 - U) gets its cotangent g, or -g for x0 - X,
// elementwise over the consumer's S elements (lanes_vjp), unless its adjoint is g's storage.
template <FastOp OP, int U>
NDVM_INLINE void give_x(const FastRec& f, Real* adj, uint8_t* touched) {
  constexpr int X = 1 - U;
  if (!((f.taped >> X) & 1) || fast_aliased(f, X, touched)) return;
  bool first = false;
  Real* t = fast_target(f, X, adj, touched, first);
  const Real* g = adj + f.aout;
  put<1>(t, f.S, first, [&](int, uint32_t k) { return OP == FastOp::SUB && X == 1 ? -g[k] : g[k]; });
}

template <class P, FastOp OP, int U>
NDVM_SIMD void pair_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  constexpr int X = 1 - U;
  constexpr bool kNeg = OP == FastOp::SUB && U == 1;  // U's cotangent is -g
  const FastRec& p = (&f)[-1];
  const uint32_t W = p.m;
  const Real* g = adj + f.aout;
  give_x<OP, U>(f, adj, touched);
  auto gu = [&](int k, uint32_t l) {
    const Real gk = at(g, k, W, l);
    return kNeg ? -gk : gk;
  };
  bool fa = false, fb = false;
  Real* ta = fast_target(p, 0, adj, touched, fa);  // a pair's product has both operands taped
  Real* tb = fast_target(p, 1, adj, touched, fb);
  const PairArgs q(f, v, X);
  if (fa) {
    fb ? product_both<P, true, true>(q, ta, tb, gu) : product_both<P, true, false>(q, ta, tb, gu);
  } else {
    fb ? product_both<P, false, true>(q, ta, tb, gu) : product_both<P, false, false>(q, ta, tb, gu);
  }
}

// A matvec of a K x K matrix A by y (U = A y) into a dot of X and U (U at operand slot U):
// its forward keeps U in registers; its VJP recomputes U there for X's cotangent g U, then
// gives U's cotangent g X to A (g_U,i y_j) and y (0 + sum_i A(i, j) g_U,i), as dot_vjp and
// matvec_vjp do, X before A before y.
template <int K, int U>
NDVM_SIMD void matvec_dot_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const PairArgs q(f, v, 1 - U);
  const uint32_t W = q.W;
  const Real *a = q.a, *y = q.b, *x = q.x;
  Real* o = v + f.out;
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    Real acc = kZero;
    for (int t = 0; t < K; ++t) {
      Real ut = kZero;
      for (int j = 0; j < K; ++j) ut += at(a, t * K + j, W, l) * at(y, j, W, l);
      const Real xt = at(x, t, W, l);
      acc += U == 0 ? ut * xt : xt * ut;
    }
    o[l] = acc;
  }
}

// One lane loop of the matvec-into-dot VJP: each lane's U, X's cotangent g U (kFX: 1 stored,
// 0 added, 2 none: X untaped), U's cotangent g X, then A's and y's, all read before any is
// written (X may be y), written X, A, y.
template <int K, int kFX, bool kFA, bool kFY>
NDVM_INLINE void matvec_dot_lanes(const PairArgs& q, const Real* g, Real* tx, Real* ta,
                                  Real* ty) {
  const uint32_t W = q.W;
  const Real *a = q.a, *y = q.b, *x = q.x;
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    Real cx[K], gu[K], ca[K * K], cy[K];
    for (int i = 0; i < K; ++i) {
      Real ui = kZero;
      for (int j = 0; j < K; ++j) ui += at(a, i * K + j, W, l) * at(y, j, W, l);
      cx[i] = g[l] * ui;
      gu[i] = g[l] * at(x, i, W, l);
    }
    for (int e = 0; e < K * K; ++e) ca[e] = gu[e / K] * at(y, e % K, W, l);
    for (int j = 0; j < K; ++j) {
      Real acc = kZero;
      for (int i = 0; i < K; ++i) acc += at(a, i * K + j, W, l) * gu[i];
      cy[j] = acc;
    }
    auto write = [&](Real* t, int n, const Real* c, bool first) {
      for (int e = 0; e < n; ++e) {
        Real* o = t + size_t(e) * W;
        o[l] = first ? c[e] : o[l] + c[e];
      }
    };
    if (kFX != 2) write(tx, K, cx, kFX == 1);
    write(ta, K * K, ca, kFA);
    write(ty, K, cy, kFY);
  }
}

template <int K, int kFX>
NDVM_INLINE void matvec_dot_firsts(const PairArgs& q, const Real* g, Real* tx, Real* ta,
                                   Real* ty, bool fa, bool fy) {
  if (fa) {
    fy ? matvec_dot_lanes<K, kFX, true, true>(q, g, tx, ta, ty)
       : matvec_dot_lanes<K, kFX, true, false>(q, g, tx, ta, ty);
  } else {
    fy ? matvec_dot_lanes<K, kFX, false, true>(q, g, tx, ta, ty)
       : matvec_dot_lanes<K, kFX, false, false>(q, g, tx, ta, ty);
  }
}

template <int K, int U>
NDVM_SIMD void matvec_dot_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  constexpr int X = 1 - U;
  const PairArgs q(f, v, X);
  const Real* g = adj + f.aout;
  bool fx = false, fa = false, fy = false;
  Real* tx = (f.taped >> X) & 1 ? fast_target(f, X, adj, touched, fx) : nullptr;
  Real* ta = fast_target(q.p, 0, adj, touched, fa);
  Real* ty = fast_target(q.p, 1, adj, touched, fy);
  if (tx == nullptr) {
    matvec_dot_firsts<K, 2>(q, g, tx, ta, ty, fa, fy);
  } else if (fx) {
    matvec_dot_firsts<K, 1>(q, g, tx, ta, ty, fa, fy);
  } else {
    matvec_dot_firsts<K, 0>(q, g, tx, ta, ty, fa, fy);
  }
}

template <int K>
FastKernels matvec_dot(int u) {
  if (u == 0) return {&matvec_dot_forward<K, 0>, &matvec_dot_vjp<K, 0>};
  return {&matvec_dot_forward<K, 1>, &matvec_dot_vjp<K, 1>};
}

// A lane-form * of two operands (bit i of BC: operand i an untaped lane-uniform number, the
// other taped and of the output's shape) into a + or - (U at slot U), elementwise over the S
// elements: u = (1 x0) x1 in registers (lanes_forward's expression), then the sum or
// difference; the VJP gives X its cotangent, then each taped factor g_U (1 x_other) (lanes_vjp's
// ew_cotangent), both factors in one loop that reads before it writes.
template <unsigned BC>
struct Factors {
  const Real* m0;
  const Real* m1;
  Real s0, s1;
  Factors(const FastRec& p, const Real* v)
      : m0(v + p.off[0]), m1(v + p.off[1]), s0(m0[0]), s1(m1[0]) {}
  Real x0(uint32_t k) const { return BC & 1 ? s0 : m0[k]; }
  Real x1(uint32_t k) const { return BC & 2 ? s1 : m1[k]; }
};

template <unsigned BC, FastOp OP, int U>
NDVM_SIMD void scale_forward(const FastRec& f, Real* v, LinalgScratch&) {
  const Factors<BC> m((&f)[-1], v);
  const Real* x = v + f.off[1 - U];
  Real* o = v + f.out;
  const uint32_t n = f.S;
#pragma GCC ivdep
  for (uint32_t k = 0; k < n; ++k) {
    const Real u = (fast_ew::kOne * m.x0(k)) * m.x1(k);
    const Real xk = x[k];
    o[k] = ew_value(OP, 2, [&](int i) { return i == U ? u : xk; });
  }
}

template <unsigned BC, bool kNeg, bool kF0, bool kF1>
NDVM_INLINE void scale_both(const Factors<BC>& m, const Real* g, Real* t0, Real* t1, uint32_t n) {
#pragma GCC ivdep
  for (uint32_t k = 0; k < n; ++k) {
    const Real gu = kNeg ? -g[k] : g[k];
    const Real c0 = gu * (fast_ew::kOne * m.x1(k));
    const Real c1 = gu * (fast_ew::kOne * m.x0(k));
    if constexpr (!(BC & 1)) t0[k] = kF0 ? c0 : t0[k] + c0;
    if constexpr (!(BC & 2)) t1[k] = kF1 ? c1 : t1[k] + c1;
  }
}

template <unsigned BC, FastOp OP, int U>
NDVM_SIMD void scale_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  constexpr bool kNeg = OP == FastOp::SUB && U == 1;
  const FastRec& p = (&f)[-1];
  give_x<OP, U>(f, adj, touched);
  bool f0 = false, f1 = false;
  Real* t0 = BC & 1 ? nullptr : fast_target(p, 0, adj, touched, f0);
  Real* t1 = BC & 2 ? nullptr : fast_target(p, 1, adj, touched, f1);
  const Factors<BC> m(p, v);
  const Real* g = adj + f.aout;
  if (f0) {
    f1 ? scale_both<BC, kNeg, true, true>(m, g, t0, t1, f.S)
       : scale_both<BC, kNeg, true, false>(m, g, t0, t1, f.S);
  } else {
    f1 ? scale_both<BC, kNeg, false, true>(m, g, t0, t1, f.S)
       : scale_both<BC, kNeg, false, false>(m, g, t0, t1, f.S);
  }
}

template <unsigned BC>
FastKernels scale_of(FastOp op, int u) {
  if (op == FastOp::ADD) {
    if (u == 0) return {&scale_forward<BC, FastOp::ADD, 0>, &scale_vjp<BC, FastOp::ADD, 0>};
    return {&scale_forward<BC, FastOp::ADD, 1>, &scale_vjp<BC, FastOp::ADD, 1>};
  }
  if (u == 0) return {&scale_forward<BC, FastOp::SUB, 0>, &scale_vjp<BC, FastOp::SUB, 0>};
  return {&scale_forward<BC, FastOp::SUB, 1>, &scale_vjp<BC, FastOp::SUB, 1>};
}

template <class P, FastOp OP>
FastKernels pair_of(int u) {
  if (u == 0) return {&pair_forward<P, OP, 0>, &pair_vjp<P, OP, 0>};
  return {&pair_forward<P, OP, 1>, &pair_vjp<P, OP, 1>};
}

template <class P>
FastKernels pair_op(FastOp op, int u) {
  return op == FastOp::ADD ? pair_of<P, FastOp::ADD>(u) : pair_of<P, FastOp::SUB>(u);
}

template <template <int> class P>
FastKernels pair_sized(uint32_t k, FastOp op, int u) {
  switch (k) {
    case 2: return pair_op<P<2>>(op, u);
    case 3: return pair_op<P<3>>(op, u);
    case 4: return pair_op<P<4>>(op, u);
    default: return {nullptr, nullptr};
  }
}

}  // namespace

void fast_skip_forward(const FastRec&, Real*, LinalgScratch&) {}

FastKernels pair_lane_kernels(int prod_code, int cons_code, const FastRec& prod,
                              const FastRec& cons, int u) {
  const bool sum = cons.op == FastOp::ADD || cons.op == FastOp::SUB;
  if (prod.op == FastOp::MUL) {  // a * (the caller checked its operands' shapes)
    if (!sum || cons.n != 2 || cons.scalar != 0 || prod.n != 2 || cons.S != prod.S ||
        (u != 0 && u != 1) || (prod.taped | prod.scalar) != 3 || (prod.taped & prod.scalar)) {
      return {nullptr, nullptr};
    }
    if (prod.scalar == 0) return scale_of<0>(cons.op, u);
    return prod.scalar == 1 ? scale_of<1>(cons.op, u) : scale_of<2>(cons.op, u);
  }
  const uint64_t W = prod.m;
  const uint32_t k = prod.r;
  const bool square = prod.c == k && k >= 2 && k <= 4;
  if (prod.op != FastOp::LANE_PRODUCTS || prod.taped != 3 || (u != 0 && u != 1) || W < 2 ||
      cons.n != 2) {
    return {nullptr, nullptr};
  }
  const Prim p = static_cast<Prim>(prod_code);
  const bool matvec = p == Prim::MATVEC && square && prod.S == k * W;
  if (cons.op == FastOp::LANE_PRODUCTS) {  // a dot of the matvec's K-vector and another
    if (!matvec || static_cast<Prim>(cons_code) != Prim::DOT || cons.m != W || cons.S != W) {
      return {nullptr, nullptr};
    }
    if (k == 2) return matvec_dot<2>(u);
    return k == 3 ? matvec_dot<3>(u) : matvec_dot<4>(u);
  }
  if (!sum || cons.scalar != 0 || cons.S != prod.S) {
    return {nullptr, nullptr};
  }
  const bool dot = p == Prim::DOT && prod.S == W;
  const bool matmul = p == Prim::MATMUL && square && prod.S == uint64_t{k} * k * W;
  if (dot) return pair_sized<Dot>(k, cons.op, u);
  if (matvec) return pair_sized<Matvec>(k, cons.op, u);
  if (matmul) return pair_sized<Matmul>(k, cons.op, u);
  return {nullptr, nullptr};
}

}  // namespace ndvm
