// Opcodes and per-primitive facts, generated from the one primitive table (prims.inc).
#pragma once

#include <cstdint>

namespace ndvm {

enum class PrimKind : uint8_t { NUMERIC, STRUCTURAL, PREDICATE, PRELUDE, CONTROL };
enum class PrimShape : uint8_t { ELEMENTWISE, SCALAR, CUSTOM };
enum class PrimDomain : uint8_t { ALL, POSITIVE };

enum class Prim : uint16_t {
#define NDVM_PRIM(upper, code, name, lo, hi, kind, shape, domain) upper = code,
#include "ndvm/prims.inc"
#undef NDVM_PRIM
};

constexpr int kPrimCodeLimit = 512;  // every opcode is below this

struct PrimInfo {
  const char* name = nullptr;  // nullptr: no primitive has this code
  int min_args = 0;
  int max_args = 0;  // -1: variadic
  PrimKind kind = PrimKind::STRUCTURAL;
  PrimShape shape = PrimShape::ELEMENTWISE;
  PrimDomain domain = PrimDomain::ALL;
};

// The facts of every opcode, built at compile time from prims.inc.
struct PrimTable {
  PrimInfo info[kPrimCodeLimit + 1] = {};  // [kPrimCodeLimit]: codes out of range
  constexpr PrimTable() {
#define NDVM_PRIM(upper, code, name, lo, hi, kind, shape, domain)                            \
  info[code] = PrimInfo{name, lo, hi, PrimKind::kind, PrimShape::shape, PrimDomain::domain};
#include "ndvm/prims.inc"
#undef NDVM_PRIM
  }
};

inline constexpr PrimTable kPrimTable{};

// Facts of opcode `code`; `name` is nullptr for codes no primitive uses.
inline const PrimInfo& prim_info(int code) {
  const unsigned c = static_cast<unsigned>(code);
  return kPrimTable.info[c < static_cast<unsigned>(kPrimCodeLimit) ? c : kPrimCodeLimit];
}

// Whether opcode `code` is a NUMERIC primitive with both a forward and a VJP kernel.
bool has_numeric_kernels(int code);

}  // namespace ndvm
