// Structural values: small PODs (tag, rank, id). Numbers point into the payload table.
#pragma once

#include <cstdint>

namespace ndvm {

enum class Tag : uint8_t {
  NUM,         // id: payload id; rank 0 number, 1 vector, 2 matrix
  BOOL,        // id: 0 or 1 (lane-uniform)
  BOOLS,       // id: payload id of 0.0/1.0 per lane (rank 0)
  NIL,
  VOID,
  PAIR,        // id: pair handle
  SYMBOL,      // id: string id of the name
  STRING,      // id: string id
  CLOSURE,     // id: closure handle
  PRIMPROC,    // id: opcode
  UNASSIGNED,  // id: string id of the variable name (letrec slot not yet initialised)
};

struct Value {
  Tag tag = Tag::VOID;
  uint8_t rank = 0;
  uint16_t pad = 0;
  uint32_t id = 0;
};

inline Value make_value(Tag tag, uint32_t id = 0, uint8_t rank = 0) {
  Value v;
  v.tag = tag;
  v.rank = rank;
  v.id = id;
  return v;
}

inline bool same_value(const Value& a, const Value& b) {
  return a.tag == b.tag && a.id == b.id && a.rank == b.rank;
}

}  // namespace ndvm
