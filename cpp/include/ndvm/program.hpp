// A lowered program: the resolved IR as flat tables (the direct-threaded form). Built once per
// compiled program from arrays the host passes; immutable afterwards and shared by threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ndvm {

enum class NodeKind : uint8_t {
  CONST,     // a: constant index
  LOCAL,     // a: depth, b: index, c: name id
  PARAM,     // a: parameter index
  INPUT,     // a: input index
  PRIMREF,   // op: opcode
  IF,        // kids: test then orelse
  SEQ,       // kids: exprs
  OR,        // kids: exprs
  LAMBDA,    // a: nreq, b: rest (0/1), c: name id; kids: body
  LET,       // kids: inits..., body
  LETREC,    // b: offset in aux of the slot name ids; kids: inits..., body
  CALL,      // kids: fn, args...
  PRIMCALL,  // op: opcode; kids: args
  ASSERT,    // c: text id; kids: expr
};
constexpr int kNodeKindCount = 14;

struct Node {
  NodeKind kind = NodeKind::CONST;
  uint16_t op = 0;
  int32_t a = 0;
  int32_t b = 0;
  int32_t c = 0;
  uint32_t kids = 0;   // offset into Program::kids
  uint32_t nkids = 0;
  int32_t line = 0;
  int32_t column = 0;
};

enum class ConstKind : uint8_t { NUM, BOOL, NIL, VOID, SYMBOL, STRING, PAIR };

struct Const {
  ConstKind kind = ConstKind::VOID;
  double num = 0.0;
  int32_t a = 0;  // BOOL: 0/1; SYMBOL/STRING: string id; PAIR: car constant
  int32_t b = 0;  // PAIR: cdr constant (an earlier index)
};

// Columns of the host's int32 node table, in order.
constexpr int kNodeColumns = 9;  // kind op a b c kids nkids line column

struct VmCode;  // vm.hpp

struct Program {
  std::vector<Node> nodes;
  std::vector<uint32_t> kids;
  std::vector<int32_t> aux;
  std::vector<Const> consts;
  std::vector<std::string> strings;
  uint32_t root = 0;
  uint32_t n_params = 0;
  uint32_t n_inputs = 0;
  uint64_t serial = 0;  // distinct per built program (a trace's key: addresses are reused)
  // the VM client's bytecode, compiled on first use (vm_code in vm.hpp)
  mutable std::shared_ptr<const VmCode> vm_code;

  const uint32_t* kids_of(const Node& n) const { return kids.data() + n.kids; }
};

// Builds and validates a program from host tables; throws std::invalid_argument when an
// index is out of range (so a malformed table can never make the evaluator read out of bounds).
Program build_program(const int32_t* node_table, size_t n_nodes, const int32_t* kids,
                      size_t n_kids, const int32_t* aux, size_t n_aux, const int32_t* const_table,
                      const double* const_nums, size_t n_consts, std::vector<std::string> strings,
                      uint32_t root, uint32_t n_params, uint32_t n_inputs);

// The same Program without the checks, for tables valid by construction: the native front
// end's own (front_resolve.cpp emits them; docs/native.md lists why each check holds there).
// Tables from anywhere else go through build_program.
Program build_program_trusted(const int32_t* node_table, size_t n_nodes, const int32_t* kids,
                              size_t n_kids, const int32_t* aux, size_t n_aux,
                              const int32_t* const_table, const double* const_nums,
                              size_t n_consts, std::vector<std::string> strings, uint32_t root,
                              uint32_t n_params, uint32_t n_inputs);

}  // namespace ndvm
