// Fused Gaussian updates at one lane (the kernels: fast_updates.hpp). Compiled as fast.cpp
// is (CMakeLists.txt): each element is loaded and stored on its own, so the update never reads
// a vector from elements the record before it stored one at a time.
#include "fast_updates.hpp"

namespace ndvm {

FastKernels update_one_lane_kernels(int k) { return member_kernels<true>(k); }

}  // namespace ndvm
