// The bytecode client of the core: a stack machine over a Program compiled once to bytecode
// (VmCode), running on the Interp's payload arena, heap, tape, masks, joins and per-lane
// error machinery. Values live on the Interp's value stack; a non-tail call pushes a K_VM
// frame (return pc, env) on the Interp's control stack, where the walker's join frames sit
// beside it, so lane splits, merges, lane failures and reverse mode are the walker's own.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ndvm/interp.hpp"
#include "ndvm/program.hpp"

namespace ndvm {

enum class VmOp : uint8_t {
  CONST,     // a: constant index
  PARAM,     // a: parameter index
  INPUT,     // a: input index
  LOCAL,     // a: depth, b: slot (node: the variable, for an unassigned read)
  PRIMREF,   // prim: opcode
  LAMBDA,    // node: the lambda
  PRIM,      // prim: opcode, a: argument count (the top a values)
  PRIMK,     // a NUMERIC/PREDICATE primitive: a: offset in operands, b: count, c: how many of
             // them are on the stack (the operands of kind CALL, pushed in order)
  CALL,      // a: argument count (function below the arguments)
  TAILCALL,  // a: argument count; always followed by RET (a lane-divergence retry returns there)
  RET,
  JMP,       // a: target
  IF,        // pop the test; a: else pc, b: join pc (ARMEND) or -1 in tail position
  ARMEND,    // the end of a non-tail if/or: a lane group that split here delivers to its join
  ORT,       // or: top is true -> jump a (keep it), else pop; b: next kid, c: tail (0/1)
  ASSERT,    // pop the value; push void (node: the assertion)
  LET,       // a new environment frame of b slots, the first a of them the top a values
  LETX,      // the top a values into the current frame's slots from b on
  LETREC,    // node: the letrec; a: slot count
  SETREC,    // a: slot of the current frame <- pop
  POPENV,    // back to the parent environment
  POP,
};

constexpr uint32_t kPrimkMaxArgs = 8;  // a call with more arguments is PRIM

// One operand of PRIMK: a leaf read in place, or (kind CALL) the next pushed value.
struct VmOperand {
  NodeKind kind = NodeKind::CONST;
  int32_t a = 0;
  int32_t b = 0;
  uint32_t node = 0;
};

struct VmIns {
  VmOp op = VmOp::RET;
  uint8_t c = 0;
  uint16_t prim = 0;
  int32_t a = 0;
  int32_t b = 0;
  uint32_t node = 0;
};
static_assert(sizeof(VmIns) == 16, "one instruction is 16 bytes");

// The bytecode of one Program: immutable once built and shared by threads.
struct VmCode {
  std::vector<VmIns> code;
  std::vector<VmOperand> operands;
  std::vector<int32_t> entry;  // [nodes]: the pc where evaluating this node starts, or -1
  uint32_t root_pc = 0;
};

// The bytecode of `prog`, compiled on first use and cached on the Program.
const VmCode& vm_code(const Program& prog);
std::shared_ptr<const VmCode> compile_vm(const Program& prog);

// The opcode's name (the core's Program.vm_ops lists a program's bytecode by these).
const char* vm_op_name(VmOp op);

// The VM's part of an evaluation of req: Interp::run has reset, bound and pushed the root
// join, and assembles the result, for both clients.
void vm_run(Interp& interp, const RunRequest& req);

}  // namespace ndvm
