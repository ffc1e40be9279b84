// The numeric tape: fixed-size records; operand payload ids live in a side array.
#pragma once

#include <cstdint>

#include "ndvm/grow.hpp"

namespace ndvm {

// Opcodes of generic numeric operations defined outside the primitive table.
enum class TapeOp : uint16_t {
  MERGE = 1000,      // per-lane select of the arms of a join; extra: offset of arm masks
  STACK = 1001,      // vec: numbers -> vector; mat: vectors -> matrix (rows)
  GATHER = 1002,     // ref: extra = first element, aux = element count
};

struct TapeRecord {
  uint16_t op = 0;
  uint16_t flags = 0;  // bit 0: dmci dialect
  uint32_t nargs = 0;
  uint32_t mask = 0;   // lanes active when recorded; cotangents elsewhere are zeroed
  uint32_t out = 0;    // payload id of the result
  uint32_t args = 0;   // offset into Tape::operands
  uint32_t extra = 0;
  uint32_t aux = 0;
};

struct Tape {
  GrowVec<TapeRecord> records;  // (grow.hpp: no copy of the tape when it grows)
  GrowVec<uint32_t> operands;
  GrowVec<uint32_t> extras;

  void reset() {
    records.clear();
    operands.clear();
    extras.clear();
  }
};

}  // namespace ndvm
