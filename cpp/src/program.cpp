// Building a Program from host tables, with every index checked once (the evaluator then
// trusts the tables).
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "ndvm/prims.hpp"
#include "ndvm/program.hpp"

namespace ndvm {

namespace {

[[noreturn, gnu::noinline, gnu::cold]] void malformed(const char* what) {
  throw std::invalid_argument(std::string("malformed program table: ") + what);
}

// inline: build_program checks every row (a call per check cost as much as the checks)
inline void require(bool ok, const char* what) {
  if (!ok) [[unlikely]] malformed(what);
}

uint32_t min_kids(NodeKind k) {
  switch (k) {
    case NodeKind::IF: return 3;
    case NodeKind::SEQ:
    case NodeKind::OR:
    case NodeKind::LAMBDA:
    case NodeKind::LET:
    case NodeKind::LETREC:
    case NodeKind::CALL:
    case NodeKind::ASSERT: return 1;
    default: return 0;
  }
}

void check_node(const Program& p, const Node& n, size_t id) {
  require(n.kids + static_cast<uint64_t>(n.nkids) <= p.kids.size(), "kids range");
  require(n.nkids >= min_kids(n.kind), "too few children");
  for (uint32_t i = 0; i < n.nkids; ++i) require(p.kids[n.kids + i] > id, "child order");
  const size_t ns = p.strings.size();
  switch (n.kind) {
    case NodeKind::CONST: require(n.a >= 0 && static_cast<size_t>(n.a) < p.consts.size(), "const"); break;
    case NodeKind::LOCAL:
      require(n.a >= 0 && n.b >= 0 && n.c >= 0 && static_cast<size_t>(n.c) < ns, "local");
      break;
    case NodeKind::PARAM: require(n.a >= 0 && static_cast<uint32_t>(n.a) < p.n_params, "param"); break;
    case NodeKind::INPUT: require(n.a >= 0 && static_cast<uint32_t>(n.a) < p.n_inputs, "input"); break;
    case NodeKind::PRIMREF:
    case NodeKind::PRIMCALL: require(prim_info(n.op).name != nullptr, "opcode"); break;
    case NodeKind::LAMBDA:
      require(n.nkids == 1 && n.a >= 0 && n.c >= 0 && static_cast<size_t>(n.c) < ns, "lambda");
      break;
    case NodeKind::LETREC:
      require(n.b >= 0 && static_cast<size_t>(n.b) + n.nkids - 1 <= p.aux.size(), "letrec");
      for (uint32_t i = 0; i + 1 < n.nkids; ++i) {
        const int32_t s = p.aux[static_cast<size_t>(n.b) + i];
        require(s >= 0 && static_cast<size_t>(s) < ns, "letrec name");
      }
      break;
    case NodeKind::ASSERT:
      require(n.nkids == 1 && n.c >= 0 && static_cast<size_t>(n.c) < ns, "assert");
      break;
    default: break;
  }
}

// Local (depth, index) must address an enclosing frame slot: checked by walking binders.
void check_scopes(const Program& p) {
  struct Scope {
    int64_t parent;
    uint32_t size;
  };
  struct Item {
    uint32_t node;
    int64_t scope;
  };
  std::vector<Scope> scopes;
  std::vector<Item> stack{{p.root, -1}};
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    const Node& n = p.nodes[it.node];
    if (n.kind == NodeKind::LOCAL) {
      int64_t s = it.scope;
      for (int32_t d = 0; d < n.a && s >= 0; ++d) s = scopes[static_cast<size_t>(s)].parent;
      require(s >= 0, "local depth");
      require(static_cast<uint32_t>(n.b) < scopes[static_cast<size_t>(s)].size, "local index");
      continue;
    }
    const uint32_t* kids = p.kids_of(n);
    auto with_frame = [&](uint32_t size) {
      scopes.push_back(Scope{it.scope, size});
      return static_cast<int64_t>(scopes.size() - 1);
    };
    if (n.kind == NodeKind::LAMBDA) {
      stack.push_back({kids[0], with_frame(static_cast<uint32_t>(n.a) + (n.b ? 1 : 0))});
    } else if (n.kind == NodeKind::LET) {
      for (uint32_t i = 0; i + 1 < n.nkids; ++i) stack.push_back({kids[i], it.scope});
      stack.push_back({kids[n.nkids - 1], with_frame(n.nkids - 1)});
    } else if (n.kind == NodeKind::LETREC) {
      const int64_t inner = with_frame(n.nkids - 1);
      for (uint32_t i = 0; i < n.nkids; ++i) stack.push_back({kids[i], inner});
    } else {
      for (uint32_t i = 0; i < n.nkids; ++i) stack.push_back({kids[i], it.scope});
    }
  }
}

// The tables as a Program; kChecked: every index checked (build_program), else trusted
// (build_program_trusted: the front end's own tables, valid by construction).
template <bool kChecked>
Program build(const int32_t* node_table, size_t n_nodes, const int32_t* kids, size_t n_kids,
              const int32_t* aux, size_t n_aux, const int32_t* const_table,
              const double* const_nums, size_t n_consts, std::vector<std::string> strings,
              uint32_t root, uint32_t n_params, uint32_t n_inputs) {
  auto check = [](bool ok, const char* what) {
    if constexpr (kChecked) require(ok, what);
    (void)ok;
    (void)what;
  };
  static std::atomic<uint64_t> next_serial{1};
  Program p;
  p.serial = next_serial.fetch_add(1);
  p.strings = std::move(strings);
  p.n_params = n_params;
  p.n_inputs = n_inputs;
  p.root = root;
  p.aux.assign(aux, aux + n_aux);
  p.kids.resize(n_kids);
  for (size_t i = 0; i < n_kids; ++i) {
    check(kids[i] >= 0 && static_cast<size_t>(kids[i]) < n_nodes, "child index");
    p.kids[i] = static_cast<uint32_t>(kids[i]);
  }
  p.consts.resize(n_consts);
  for (size_t i = 0; i < n_consts; ++i) {
    const int32_t* row = const_table + 3 * i;
    check(row[0] >= 0 && row[0] <= static_cast<int32_t>(ConstKind::PAIR), "const kind");
    Const& c = p.consts[i];
    c.kind = static_cast<ConstKind>(row[0]);
    c.num = const_nums[i];
    c.a = row[1];
    c.b = row[2];
    if (kChecked && c.kind == ConstKind::PAIR) {
      check(c.a >= 0 && static_cast<size_t>(c.a) < i && c.b >= 0 && static_cast<size_t>(c.b) < i,
            "const pair order");
    }
    if (kChecked && (c.kind == ConstKind::SYMBOL || c.kind == ConstKind::STRING)) {
      check(c.a >= 0 && static_cast<size_t>(c.a) < p.strings.size(), "const string");
    }
  }
  p.nodes.resize(n_nodes);
  for (size_t i = 0; i < n_nodes; ++i) {
    const int32_t* row = node_table + kNodeColumns * i;
    check(row[0] >= 0 && row[0] < kNodeKindCount, "node kind");
    check(row[1] >= 0 && row[1] < kPrimCodeLimit, "opcode range");
    check(row[5] >= 0 && row[6] >= 0, "kids");
    Node& n = p.nodes[i];
    n.kind = static_cast<NodeKind>(row[0]);
    n.op = static_cast<uint16_t>(row[1]);
    n.a = row[2];
    n.b = row[3];
    n.c = row[4];
    n.kids = static_cast<uint32_t>(row[5]);
    n.nkids = static_cast<uint32_t>(row[6]);
    n.line = row[7];
    n.column = row[8];
  }
  if constexpr (kChecked) {
    require(root < n_nodes, "root");
    std::vector<uint8_t> refs(n_nodes, 0);
    for (uint32_t k : p.kids) {
      require(refs[k] == 0 && k != root, "node shared");
      refs[k] = 1;
    }
    for (size_t i = 0; i < n_nodes; ++i) check_node(p, p.nodes[i], i);
    check_scopes(p);
  }
  return p;
}

}  // namespace

Program build_program(const int32_t* node_table, size_t n_nodes, const int32_t* kids,
                      size_t n_kids, const int32_t* aux, size_t n_aux, const int32_t* const_table,
                      const double* const_nums, size_t n_consts, std::vector<std::string> strings,
                      uint32_t root, uint32_t n_params, uint32_t n_inputs) {
  return build<true>(node_table, n_nodes, kids, n_kids, aux, n_aux, const_table, const_nums,
                     n_consts, std::move(strings), root, n_params, n_inputs);
}

Program build_program_trusted(const int32_t* node_table, size_t n_nodes, const int32_t* kids,
                              size_t n_kids, const int32_t* aux, size_t n_aux,
                              const int32_t* const_table, const double* const_nums,
                              size_t n_consts, std::vector<std::string> strings, uint32_t root,
                              uint32_t n_params, uint32_t n_inputs) {
  return build<false>(node_table, n_nodes, kids, n_kids, aux, n_aux, const_table, const_nums,
                      n_consts, std::move(strings), root, n_params, n_inputs);
}

}  // namespace ndvm
