// Internal to the fast forms (fast.cpp, fast_lanes.cpp): the element expressions of + - *
// (kernels.cpp's fwd_ADD/SUB/MUL and vjp_ rows), for one element of each operand.
#pragma once

#include "ndvm/fast.hpp"

namespace ndvm {
namespace fast_ew {

constexpr Real kZero = 0;
constexpr Real kOne = 1;

// Whether the payload's elements lie below 2^32 (FastRec's offsets and sizes are 32-bit).
inline bool fits32(const Payload& p) { return p.off + p.count() <= UINT32_MAX; }

// The output element from the operands' elements x(0), ..., x(n-1).
template <class X>
NDVM_INLINE Real ew_value(FastOp op, int n, X x) {
  if (op == FastOp::ADD) {  // ((0 + x0) + x1) + ...
    Real acc = kZero + x(0);
    for (int i = 1; i < n; ++i) acc = acc + x(i);
    return acc;
  }
  if (op == FastOp::SUB) {  // -x0, or (x0 - x1) - ...
    Real acc = n == 1 ? -x(0) : x(0);
    for (int i = 1; i < n; ++i) acc = acc - x(i);
    return acc;
  }
  Real acc = kOne * x(0);  // ((1 * x0) * x1) * ...
  for (int i = 1; i < n; ++i) acc = acc * x(i);
  return acc;
}

// Operand i's cotangent element from the output's g and the operands' elements x(j).
template <class X>
NDVM_INLINE Real ew_cotangent(FastOp op, int n, int i, Real g, X x) {
  if (op == FastOp::ADD || (op == FastOp::SUB && n > 1 && i == 0)) return g;
  if (op == FastOp::SUB) return -g;
  Real rest = kOne;  // the product of the other operands
  for (int j = 0; j < n; ++j) {
    if (j != i) rest = rest * x(j);
  }
  return g * rest;
}

}  // namespace fast_ew
}  // namespace ndvm
