// Append-only arenas for pairs, closures and environment frames, addressed by uint32 handles.
// Handle 0 of envs is "no environment". Nothing is ever freed during an evaluation.
#pragma once

#include <cstdint>
#include "ndvm/grow.hpp"
#include "ndvm/value.hpp"

namespace ndvm {

struct PairCell {
  Value car;
  Value cdr;
};

struct ClosureCell {
  uint32_t lambda;  // node id of the Lambda
  uint32_t env;
};

struct EnvFrame {
  uint32_t parent;
  uint32_t off;  // into Heap::slots
  uint32_t size;
};

struct Heap {
  GrowVec<PairCell> pairs;  // (grow.hpp: no copy of the heap when it grows)
  GrowVec<ClosureCell> closures;
  GrowVec<EnvFrame> envs;
  GrowVec<Value> slots;

  void reset() {
    pairs.clear();
    closures.clear();
    envs.clear();
    slots.clear();
    envs.push_back(EnvFrame{0, 0, 0});
  }
  uint32_t pair(Value car, Value cdr) {
    pairs.push_back(PairCell{car, cdr});
    return static_cast<uint32_t>(pairs.size() - 1);
  }
  uint32_t env(uint32_t parent, const Value* vals, uint32_t n) {
    const uint32_t off = static_cast<uint32_t>(slots.size());
    for (uint32_t i = 0; i < n; ++i) slots.push_back(vals[i]);  // (inline, unlike insert)
    envs.push_back(EnvFrame{parent, off, n});
    return static_cast<uint32_t>(envs.size() - 1);
  }
};

}  // namespace ndvm
