// One-lane forms of the commonest tape records: a tape record whose output and operands all
// have one lane (width 1) and which ran on every lane is resolved once into a FastRec (its
// kernel, sizes and element offsets), and replay's forward pass and the reverse sweep then run
// it directly, without the per-record operand views, shape rules, table dispatch, scratch
// buffers and separate accumulation pass of the general path. Each fast kernel performs the
// same IEEE operations in the same order as the general kernel of its record (kernels.cpp,
// linalg_lanes.cpp, lu_lanes.cpp), and adds a cotangent into an operand's adjoint exactly as
// accumulate_lanes does (the first one stored, later ones added; a one-element operand of a
// broadcast gets the sum of the cotangent's elements, in index order): results are bitwise
// those of the general path.
#pragma once

#include <cstdint>
#include <vector>

#include "ndvm/kernels.hpp"
#include "ndvm/payload.hpp"
#include "ndvm/tape.hpp"

namespace ndvm {

enum class FastOp : uint8_t {
  NONE,    // the general path
  ADD,     // elementwise +, -, * (and scale) of n <= kFastArgs operands
  SUB,
  MUL,
  DOT,     // sums of products: dot, matvec, matmul (at most kFastWork products)
  MATVEC,
  MATMUL,
  INV2,    // 2 x 2 inverse, log|det|, det
  LOGDET2,
  DET2,
};

constexpr int kFastArgs = 4;
constexpr uint32_t kFastWork = 4096;

struct FastRec;
using FastForward = void (*)(const FastRec& f, Real* v, LinalgScratch& scratch);
using FastVjp = void (*)(const FastRec& f, const Real* v, Real* adj, uint8_t* touched);

struct FastRec {
  // The record's output from its operands (v: the payload arena), and its VJP: every taped
  // operand's adjoint gets its cotangent (stored when touched[pid] is 0, then marked, else
  // added; adj: the adjoints, at the payloads' offsets). nullptr: the general path.
  FastForward forward = nullptr;
  FastVjp vjp = nullptr;
  FastOp op = FastOp::NONE;
  uint8_t n = 0;       // operands
  uint8_t taped = 0;   // bit i: operand i needs a cotangent
  uint8_t scalar = 0;  // bit i: operand i is one element broadcast over the S outputs
  uint32_t S = 1;      // output elements
  uint32_t r = 1;      // sums of products: operand 0 is r x c, operand 1 is c x m
  uint32_t c = 1;
  uint32_t m = 1;
  uint32_t out = 0;              // element offset of the output (its value and its adjoint)
  uint32_t out_pid = 0;          // payload id of the output
  uint32_t off[kFastArgs] = {};  // element offsets of the operands
  uint32_t pid[kFastArgs] = {};  // payload ids of the operands (their touched flags)
};

// One FastRec per record of `tape` (op NONE where the general path runs it); `fast` is left
// empty when no record qualifies.
void plan_fast(const Tape& tape, const PayloadTable& pay, const MaskTable& masks,
               std::vector<FastRec>& fast);

}  // namespace ndvm
