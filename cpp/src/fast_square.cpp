// Lane forms (fast.hpp) of the 2 x 2 inverse, log-determinant and determinant over W > 1 lanes
// (operand and output full-width): the forward runs lu_lanes.cpp's lane kernels; the VJPs run
// one lane loop per record with each lane's matrices in registers, where the general path
// (lu_lanes.cpp's vjp_inverse, vjp_slogdet) runs one lane loop per element and per stage.
// Every element is the same expression in the same order as there:
// * inv: t2(i, j) = 0.0 + (-ans(0, i)) g(0, j) + (-ans(1, i)) g(1, j), then
//   ct(i, j) = 0.0 + t2(i, 0) ans(j, 0) + t2(i, 1) ans(j, 1);
// * logdet / det: ct(i, j) = f inv(A)(j, i), f = g (logdet) or g ans (det), the inverse read
//   from the forward `inv` record of the same operand when the tape has one (off[1], set by
//   Interp::find_inverses; the same kernel wrote it) or recomputed by lanes::inverse2;
// stored into the operand's adjoint when it is the first cotangent, else added. Like the
// product forms, these run only when the run is fused (Interp::fused_form).
#include "ndvm/fast.hpp"
#include "ndvm/prims.hpp"

#include "fast_ew.hpp"
#include "lanes.hpp"

namespace ndvm {
namespace {

// The operand (full-width 2 x 2 at f.off[0], W = f.m lanes) as the lane kernels see it.
Operand square_operand(const FastRec& f, Real* v) {
  Operand o;
  o.p = v + f.off[0];
  o.width = f.m;
  o.rank = 2;
  o.rows = 2;
  o.cols = 2;
  return o;
}

NDVM_SIMD void inv2_lanes_forward(const FastRec& f, Real* v, LinalgScratch& s) {
  lanes::soa_inverse(square_operand(f, v), v + f.out, f.m, s, false);
}

template <bool kFirst>
NDVM_INLINE void inv2_lanes_ct(const Real* __restrict g, const Real* __restrict ans,
                               Real* __restrict ct, uint32_t W) {
  const size_t w = W;
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    Real a[4], gg[4], t2[4];
    for (int e = 0; e < 4; ++e) {
      a[e] = ans[e * w + l];
      gg[e] = g[e * w + l];
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        Real acc = 0.0;
        for (int k = 0; k < 2; ++k) acc += (-a[k * 2 + i]) * gg[k * 2 + j];
        t2[i * 2 + j] = acc;
      }
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        Real acc = 0.0;
        for (int k = 0; k < 2; ++k) acc += t2[i * 2 + k] * a[j * 2 + k];
        Real& o = ct[(i * 2 + j) * w + l];
        o = kFirst ? acc : o + acc;
      }
    }
  }
}

NDVM_SIMD void inv2_lanes_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  if (!(f.taped & 1)) return;
  bool first = false;
  Real* ct = fast_target(f, 0, adj, touched, first);
  if (first) {
    inv2_lanes_ct<true>(adj + f.aout, v + f.out, ct, f.m);
  } else {
    inv2_lanes_ct<false>(adj + f.aout, v + f.out, ct, f.m);
  }
}

template <bool kDet>
NDVM_SIMD void slogdet2_lanes_forward(const FastRec& f, Real* v, LinalgScratch& s) {
  lanes::soa_slogdet(square_operand(f, v), v + f.out, f.m, s, kDet);
}

// ct(i, j) = f inv(j, i); kReuse: the inverse at inv (element-major, W lanes), else
// recomputed from the operand a
template <bool kDet, bool kFirst, bool kReuse>
NDVM_INLINE void slogdet2_lanes_ct(const Real* __restrict g, const Real* __restrict ans,
                                   const Real* __restrict a, const Real* __restrict inv,
                                   Real* __restrict ct, uint32_t W) {
  const size_t w = W;
#pragma GCC ivdep
  for (uint32_t l = 0; l < W; ++l) {
    Real b[4];
    if (kReuse) {
      for (int e = 0; e < 4; ++e) b[e] = inv[e * w + l];
    } else {
      const lanes::Inv2 x = lanes::inverse2(a[l], a[w + l], a[2 * w + l], a[3 * w + l]);
      b[0] = x.b00;
      b[1] = x.b01;
      b[2] = x.b10;
      b[3] = x.b11;
    }
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        const Real c = (kDet ? g[l] * ans[l] : g[l]) * b[j * 2 + i];
        Real& o = ct[(i * 2 + j) * w + l];
        o = kFirst ? c : o + c;
      }
    }
  }
}

// f.c: 1 when off[1] holds the operand's inverse (find_inverses), else 0
template <bool kDet>
NDVM_SIMD void slogdet2_lanes_vjp(const FastRec& f, const Real* v, Real* adj, uint8_t* touched) {
  if (!(f.taped & 1)) return;
  bool first = false;
  Real* ct = fast_target(f, 0, adj, touched, first);
  const Real* g = adj + f.aout;
  const Real* ans = v + f.out;
  const Real* a = v + f.off[0];
  const Real* inv = v + f.off[1];
  const bool reuse = f.c == 1;
  if (reuse && first) return slogdet2_lanes_ct<kDet, true, true>(g, ans, a, inv, ct, f.m);
  if (reuse) return slogdet2_lanes_ct<kDet, false, true>(g, ans, a, inv, ct, f.m);
  if (first) return slogdet2_lanes_ct<kDet, true, false>(g, ans, a, inv, ct, f.m);
  slogdet2_lanes_ct<kDet, false, false>(g, ans, a, inv, ct, f.m);
}

}  // namespace

bool fast_resolve_lane_square(int code, const Payload& out, const Payload* const* in, int n,
                              FastRec& f) {
  const uint32_t W = out.width;
  const Payload& a = *in[0];
  if (n != 1 || W < 2 || a.width != W || a.rank != 2 || a.rows != 2 || a.cols != 2 ||
      !fast_ew::fits32(out) || !fast_ew::fits32(a)) {
    return false;
  }
  const Prim p = static_cast<Prim>(code);
  FastKernels k{nullptr, nullptr};
  if (p == Prim::INV) {
    k = {&inv2_lanes_forward, &inv2_lanes_vjp};
    f.op = FastOp::LANE_INV2;
  } else if (p == Prim::LOGDET || p == Prim::DET) {
    const bool det = p == Prim::DET;
    k = det ? FastKernels{&slogdet2_lanes_forward<true>, &slogdet2_lanes_vjp<true>}
            : FastKernels{&slogdet2_lanes_forward<false>, &slogdet2_lanes_vjp<false>};
    f.op = FastOp::LANE_SLOGDET2;
  } else {
    return false;
  }
  f.n = 1;
  f.r = 2;
  f.c = 0;  // no inverse to reuse (yet: find_inverses)
  f.m = W;
  f.S = static_cast<uint32_t>(out.count());
  f.out = static_cast<uint32_t>(out.off);
  f.off[0] = static_cast<uint32_t>(a.off);
  f.forward = k.forward;
  f.vjp = k.vjp;
  return true;
}

}  // namespace ndvm
