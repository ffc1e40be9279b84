// Fused Gaussian updates over W > 1 lanes (the kernels: fast_updates.hpp; the one-lane forms:
// fast_updates_one.cpp).
#include "fast_updates.hpp"

namespace ndvm {

FastKernels update_member_kernels(int k, bool one_lane) {
  return one_lane ? update_one_lane_kernels(k) : member_kernels<false>(k);
}

}  // namespace ndvm
