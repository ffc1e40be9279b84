// Fused Gaussian updates (docs/native.md, "Fused updates"; fast.hpp; planned by updates.cpp):
// the 13 records of a Kalman-type measurement update over W > 1 lanes,
//   S = Pp + R; Si = inv S; K = Pp Si; Kv = K v; m2 = m + Kv; KP = K Pp; P2 = Pp - KP;
//   ld = logdet S; Siv = Si v; q = dot(v, Siv); s = ld + q + c; h = a s; nll2 = nll + h,
// run as one superinstruction at the last record's place. The forward computes S and
// log|det S| over all lanes (the latter by the logdet record's own lane kernel), then the rest
// of each lane's update in one lane loop, in registers; it stores m2, P2 and nll2, and Si, K
// and Si v, which the VJP reads rather than dividing again; Kv, KP, q, s and h are never
// stored. The VJP runs the members' VJPs in the unfused sweep's order in one lane loop,
// in registers, writing only the adjoints of Pp, R and v.
//
// Bits: every element is the member kernel's expression in the same order (ew_value's
// (0 + x0) + x1, x0 - x1, (1 a) s; the products' 0.0 + x_0 y_0 + x_1 y_1; lanes::inverse2;
// the inverse's and log-determinant's VJPs as fast_square.cpp writes them), and each
// cotangent is stored or added as the unfused sweep would (an inner payload's first one
// stored, later ones added, in the sweep's order). So values and gradients are bitwise the
// unfused path's (tests/native/test_updates.py).
//
// The one-loop VJP is written for the sweep's steady state: the three outputs have
// cotangents; plan_adjoints has given m, nll and Pp the storage of m2, nll2 and P2 (where
// their first cotangent already is) and S's operands no shared storage; v's adjoint is not
// yet touched and R's is. Any other state (the last update of a filter, whose m2 and P2
// nobody reads; a first sweep, which shares no storage) runs the fallback: the members' own
// forward kernels, then their own VJPs in reverse order, each when its output has a
// cotangent, which is the unfused path itself.
// Internal to fast_updates.cpp (the lane forms, vectorized) and fast_updates_one.cpp (the
// one-lane forms, compiled as fast.cpp is, without vectorization): the fused updates' kernels.
#pragma once

#include "ndvm/fast.hpp"

#include "fast_ew.hpp"
#include "lanes.hpp"

namespace ndvm {
namespace {

using fast_ew::kOne;
using fast_ew::kZero;

// The members of the update whose record member k is (f: member k's FastRec).
template <int K>
NDVM_INLINE const FastRec* members(const FastRec& f) {
  return &f - K;
}

// The lanes: a lane-form product's f.m, or 1 (kSingle: the one-lane forms).
template <bool kSingle>
NDVM_INLINE size_t lanes_of(const FastRec* m) {
  return kSingle ? 1 : m[UPD_K].m;
}

template <int N>
NDVM_INLINE void load(Real (&o)[N], const Real* p, size_t w, size_t l) {
  for (int e = 0; e < N; ++e) o[e] = p[e * w + l];
}

template <int N>
NDVM_INLINE void store(const Real (&x)[N], Real* p, size_t w, size_t l) {
  for (int e = 0; e < N; ++e) p[e * w + l] = x[e];
}

// r x 2 times 2 x c, row-major: 0.0 + a(i, 0) b(0, j) + a(i, 1) b(1, j) (the products' order)
template <int R, int C>
NDVM_INLINE void product(const Real* a, const Real* b, Real* o) {
  for (int i = 0; i < R; ++i) {
    for (int j = 0; j < C; ++j) {
      Real acc = kZero;
      for (int k = 0; k < 2; ++k) acc += a[i * 2 + k] * b[k * C + j];
      o[i * C + j] = acc;
    }
  }
}

template <bool kSingle>
NDVM_SIMD void update_forward(const FastRec& f, Real* v, LinalgScratch& s) {
  const FastRec* m = members<UPD_NLL>(f);
  const size_t w = lanes_of<kSingle>(m);
  const Real* __restrict Pp = v + m[UPD_S].off[0];
  const Real* __restrict Rr = v + m[UPD_S].off[1];
  Real* __restrict Sv = v + m[UPD_S].out;
  for (size_t k = 0; k < 4 * w; ++k) Sv[k] = (kZero + Pp[k]) + Rr[k];
  m[UPD_NLL].update->fwd[UPD_LD](m[UPD_LD], v, s);  // the logdet record's own lane kernel
  const Real* __restrict ld = v + m[UPD_LD].out;
  const Real* __restrict xv = v + m[UPD_KV].off[1];
  const Real* __restrict mv = v + m[UPD_M2].off[0];
  const Real* __restrict nll = v + m[UPD_NLL].off[0];
  const Real c = v[m[UPD_SUM].off[2]];
  const Real a = v[m[UPD_H].off[0]];
  Real* __restrict oSi = v + m[UPD_SI].out;
  Real* __restrict oK = v + m[UPD_K].out;
  Real* __restrict oSiv = v + m[UPD_SIV].out;
  Real* __restrict om = v + m[UPD_M2].out;
  Real* __restrict oP = v + m[UPD_P2].out;
  Real* __restrict on = v + m[UPD_NLL].out;
#pragma GCC ivdep
  for (size_t l = 0; l < w; ++l) {
    Real P[4], S[4], x[2], mm[2];
    load(P, Pp, w, l);
    load(S, Sv, w, l);
    load(x, xv, w, l);
    load(mm, mv, w, l);
    const lanes::Inv2 b = lanes::inverse2(S[0], S[1], S[2], S[3]);
    const Real Si[4] = {b.b00, b.b01, b.b10, b.b11};
    Real K[4], Kv[2], KP[4], Siv[2], m2[2], P2[4];
    product<2, 2>(P, Si, K);
    product<2, 1>(K, x, Kv);
    product<2, 2>(K, P, KP);
    product<2, 1>(Si, x, Siv);
    for (int i = 0; i < 2; ++i) m2[i] = (kZero + mm[i]) + Kv[i];
    for (int e = 0; e < 4; ++e) P2[e] = P[e] - KP[e];
    Real q = kZero;
    for (int j = 0; j < 2; ++j) q += x[j] * Siv[j];
    const Real sum = ((kZero + ld[l]) + q) + c;
    const Real h = (kOne * a) * sum;
    store(Si, oSi, w, l);
    store(K, oK, w, l);
    store(Siv, oSiv, w, l);
    store(m2, om, w, l);
    store(P2, oP, w, l);
    on[l] = (kZero + nll[l]) + h;
  }
}

// One lane's values the VJP reads (Pp, v, and the stored Si, K, Si v) and the cotangents it
// builds: v's (cx), Si's, S's and Pp's (pa, from P2's cotangent in its storage).
struct VjpLane {
  Real P[4], x[2], Si[4], K[4], Siv[2];
};
struct VjpCts {
  Real cx[2], gSi[4], gS[4], pa[4];
};

// nll2 = nll + h (nll: its storage), h = a s, s = ld + q + c, then q = dot(v, Siv),
// Siv = Si v and ld = logdet S, from nll2's cotangent times a (gs).
NDVM_INLINE void likelihood_cts(const VjpLane& t, Real gs, VjpCts& c) {
  Real gSiv[2];
  for (int e = 0; e < 2; ++e) c.cx[e] = gs * t.Siv[e];
  for (int e = 0; e < 2; ++e) gSiv[e] = gs * t.x[e];
  for (int e = 0; e < 4; ++e) c.gSi[e] = gSiv[e / 2] * t.x[e % 2];
  for (int j = 0; j < 2; ++j) {
    Real acc = kZero;
    for (int i = 0; i < 2; ++i) acc += t.Si[i * 2 + j] * gSiv[i];
    c.cx[j] = c.cx[j] + acc;
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) c.gS[i * 2 + j] = gs * t.Si[j * 2 + i];
  }
}

// P2 = Pp - KP (Pp: its storage), KP = K Pp, m2 = m + Kv (m: its storage), Kv = K v,
// K = Pp Si, Si = inv S, from P2's and m2's cotangents.
NDVM_INLINE void gain_cts(const VjpLane& t, const Real (&gP)[4], const Real (&gM)[2],
                          VjpCts& c) {
  Real gKP[4], gK[4], t2[4];
  for (int e = 0; e < 4; ++e) {
    c.pa[e] = gP[e];
    gKP[e] = -gP[e];
  }
  for (int e = 0; e < 4; ++e) {
    Real acc = kZero;
    for (int j = 0; j < 2; ++j) acc += gKP[e / 2 * 2 + j] * t.P[e % 2 * 2 + j];
    gK[e] = acc;
  }
  for (int e = 0; e < 4; ++e) {
    Real acc = kZero;
    for (int i = 0; i < 2; ++i) acc += t.K[i * 2 + e / 2] * gKP[i * 2 + e % 2];
    c.pa[e] = c.pa[e] + acc;
  }
  for (int e = 0; e < 4; ++e) gK[e] = gK[e] + gM[e / 2] * t.x[e % 2];
  for (int j = 0; j < 2; ++j) {
    Real acc = kZero;
    for (int i = 0; i < 2; ++i) acc += t.K[i * 2 + j] * gM[i];
    c.cx[j] = c.cx[j] + acc;
  }
  for (int e = 0; e < 4; ++e) {
    Real acc = kZero;
    for (int j = 0; j < 2; ++j) acc += gK[e / 2 * 2 + j] * t.Si[e % 2 * 2 + j];
    c.pa[e] = c.pa[e] + acc;
  }
  for (int e = 0; e < 4; ++e) {
    Real acc = kZero;
    for (int i = 0; i < 2; ++i) acc += t.P[i * 2 + e / 2] * gK[i * 2 + e % 2];
    c.gSi[e] = c.gSi[e] + acc;
  }
  for (int e = 0; e < 4; ++e) {
    Real acc = kZero;
    for (int k = 0; k < 2; ++k) acc += (-t.Si[k * 2 + e / 2]) * c.gSi[k * 2 + e % 2];
    t2[e] = acc;
  }
  for (int e = 0; e < 4; ++e) {
    Real acc = kZero;
    for (int k = 0; k < 2; ++k) acc += t2[e / 2 * 2 + k] * t.Si[e % 2 * 2 + k];
    c.gS[e] = c.gS[e] + acc;
  }
}

// The one-loop VJP (the steady state the file's header names): the members' VJPs in the
// unfused sweep's order, then S = Pp + R's.
template <bool kSingle>
NDVM_SIMD void update_vjp_loop(const FastRec* m, const Real* v, Real* adj) {
  const size_t w = lanes_of<kSingle>(m);
  const Real* __restrict Pp = v + m[UPD_S].off[0];
  const Real* __restrict xv = v + m[UPD_KV].off[1];
  const Real* __restrict Siv = v + m[UPD_SIV].out;
  const Real* __restrict Si = v + m[UPD_SI].out;
  const Real* __restrict K = v + m[UPD_K].out;
  const Real a = v[m[UPD_H].off[0]];
  const Real* __restrict gm = adj + m[UPD_M2].aout;
  const Real* __restrict gn = adj + m[UPD_NLL].aout;
  Real* __restrict aP = adj + m[UPD_P2].aout;  // Pp's storage: P2's cotangent is there
  Real* __restrict aR = adj + m[UPD_S].aoff[1];
  Real* __restrict ax = adj + m[UPD_Q].aoff[0];
#pragma GCC ivdep
  for (size_t l = 0; l < w; ++l) {
    VjpLane t;
    Real gP[4], gM[2];
    load(t.P, Pp, w, l);
    load(t.x, xv, w, l);
    load(t.Si, Si, w, l);
    load(t.K, K, w, l);
    load(t.Siv, Siv, w, l);
    load(gP, aP, w, l);
    load(gM, gm, w, l);
    VjpCts c;
    likelihood_cts(t, gn[l] * (kOne * a), c);
    gain_cts(t, gP, gM, c);
    for (int e = 0; e < 4; ++e) {
      aP[e * w + l] = c.pa[e] + c.gS[e];
      aR[e * w + l] = aR[e * w + l] + c.gS[e];
    }
    for (int e = 0; e < 2; ++e) ax[e * w + l] = c.cx[e];
  }
}

// The unfused path: the members' own forward kernels (the inner values into the arena), then
// their own VJPs in reverse order, each when its output has a cotangent.
NDVM_INLINE void update_fallback(const FastRec* m, const Real* v, Real* adj, uint8_t* touched) {
  const UpdateGroup& g = *m[UPD_NLL].update;
  Real* values = const_cast<Real*>(v);  // the arena (the VJP's view of it is read-only)
  for (int k = 0; k < kUpdateRecords; ++k) g.fwd[k](m[k], values, g.scratch);
  for (int k = kUpdateRecords; k-- > 0;) {
    if (touched[m[k].out_pid]) g.vjp[k](m[k], v, adj, touched);
  }
}

// Whether the adjoint storages at these offsets are pairwise distinct (each is a payload's
// whole storage, so distinct ones do not overlap).
NDVM_INLINE bool distinct(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t e) {
  const uint32_t x[5] = {a, b, c, d, e};
  for (int i = 0; i < 5; ++i) {
    for (int j = i + 1; j < 5; ++j) {
      if (x[i] == x[j]) return false;
    }
  }
  return true;
}

// Whether the adjoint storage is as update_vjp_loop expects (plan_adjoints' sharing: m, nll
// and Pp in the storage of m2, nll2 and P2, S's operands in their own, the five distinct),
// kept in the group until plan_adjoints plans again.
NDVM_INLINE bool storage_ok(const FastRec* m) {
  const UpdateGroup& g = *m[UPD_NLL].update;
  if (g.storage < 0) {
    g.storage = m[UPD_NLL].alias == 1 && m[UPD_M2].alias == 1 && m[UPD_P2].alias == 1 &&
                m[UPD_S].alias == 0 && m[UPD_S].aoff[0] == m[UPD_P2].aout &&
                distinct(m[UPD_P2].aout, m[UPD_S].aoff[1], m[UPD_Q].aoff[0], m[UPD_M2].aout,
                         m[UPD_NLL].aout);
  }
  return g.storage == 1;
}

// Whether the sweep's state is the one update_vjp_loop is written for.
NDVM_INLINE bool steady(const FastRec* m, const uint8_t* touched) {
  return touched[m[UPD_M2].out_pid] && touched[m[UPD_P2].out_pid] &&
         touched[m[UPD_NLL].out_pid] && !touched[m[UPD_Q].pid[0]] && touched[m[UPD_S].pid[1]] &&
         storage_ok(m);
}

template <bool kSingle>
void update_vjp_all(const FastRec* m, const Real* v, Real* adj, uint8_t* touched) {
  if (!steady(m, touched)) return update_fallback(m, v, adj, touched);
  update_vjp_loop<kSingle>(m, v, adj);
  touched[m[UPD_Q].pid[0]] = 1;   // v
  touched[m[UPD_S].pid[0]] = 1;   // Pp
  touched[m[UPD_M2].pid[0]] = 1;  // m (its storage: m2's)
  touched[m[UPD_NLL].pid[0]] = 1;  // nll (its storage: nll2's)
}

inline void update_skip_vjp(const FastRec&, const Real*, Real*, uint8_t*) {}

// The VJP at the place of output member K (m2, P2 or nll2): the sweep calls it when that
// output has a cotangent; the update's VJP runs once, at the first of them the sweep reaches
// (nll2, then P2, then m2: an update at a later place already ran).
template <int K, bool kSingle>
void update_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  const FastRec* m = members<K>(f);
  if (K != UPD_NLL && touched[m[UPD_NLL].out_pid]) return;
  if (K == UPD_M2 && touched[m[UPD_P2].out_pid]) return;
  update_vjp_all<kSingle>(m, v, adj, touched);
}

template <bool kSingle>
FastKernels member_kernels(int k) {
  if (k == UPD_NLL) return {&update_forward<kSingle>, &update_vjp<UPD_NLL, kSingle>};
  if (k == UPD_P2) return {&fast_skip_forward, &update_vjp<UPD_P2, kSingle>};
  if (k == UPD_M2) return {&fast_skip_forward, &update_vjp<UPD_M2, kSingle>};
  return {&fast_skip_forward, &update_skip_vjp};
}

}  // namespace
}  // namespace ndvm
