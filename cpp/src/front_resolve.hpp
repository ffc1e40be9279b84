// The resolver (private to the front end): core forms (the expander's output) -> the node
// tables of program.hpp, with lexical addresses and opcodes. Used by the driver
// (front_compile.cpp), which binds the prelude procedures around the program.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ndvm/front.hpp"
#include "ndvm/program.hpp"

namespace ndvm::front::detail {

// The opcode of a primitive name or alias, or -1 (the map is built once).
int prim_code(std::string_view name);
// Every primitive name and alias, in table order (the "did you mean" candidates).
const std::vector<std::string>& prim_names();

inline constexpr int kMaxResolveDepth = 10000;  // nested forms; deeper: "nested too deeply"

// A node of the resolved tree; emitted in preorder by Resolver::emit.
struct INode {
  NodeKind kind = NodeKind::CONST;
  bool tail = false;   // CALL: in tail position
  uint16_t op = 0;     // PRIMREF / PRIMCALL: opcode
  int32_t a = 0, b = 0;  // LOCAL depth, index; PARAM/INPUT index; LAMBDA nreq, rest;
                         // LETREC: offset, count in names_; CONST: see ck
  int32_t kids = 0, nkids = 0;  // into kids_
  int32_t line = 0, column = 0;
  const std::string* name = nullptr;  // LOCAL / LAMBDA name; ASSERT text; CONST string
  // CONST: 0 number (num), 1 boolean (a), 2 void, 3 string (name), 4 quoted datum (qa, qd)
  uint8_t ck = 0;
  double num = 0.0;
  const Arena* qa = nullptr;
  DRef qd = -1;
};

// Resolved nodes another resolver's tree can take in (the prelude's, resolved once).
struct Fragment {
  std::vector<INode> nodes;
  std::vector<int32_t> kids;
  std::vector<const std::string*> names;
};

// The first index of a name among `names` (a vector that may grow at its end): a scan while
// there are few names, a map once there are more.
class NameIndex {
 public:
  explicit NameIndex(const std::vector<std::string>& names) : names_(names) {
    if (names_.size() > kScan) build();
  }
  int32_t find(const std::string& name) const {  // -1: absent
    if (!map_.empty()) {
      const auto it = map_.find(name);
      return it == map_.end() ? -1 : it->second;
    }
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == name) return static_cast<int32_t>(i);
    }
    return -1;
  }
  void appended() {  // names.back() was just added
    if (!map_.empty()) {
      map_.emplace(names_.back(), static_cast<int32_t>(names_.size() - 1));
    } else if (names_.size() > kScan) {
      build();
    }
  }

 private:
  static constexpr size_t kScan = 16;
  void build() {
    for (size_t i = 0; i < names_.size(); ++i) map_.emplace(names_[i], static_cast<int32_t>(i));
  }
  const std::vector<std::string>& names_;
  std::unordered_map<std::string, int32_t> map_;  // empty while scanning
};

class Resolver {
 public:
  Resolver(std::vector<std::string>& params, const std::vector<std::string>& inputs,
           bool infer);
  ~Resolver();  // hands its buffers back to this thread's pool (if it took them from it)
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  struct Info {  // what a free name is, computed once per name id
    bool computed = false;
    int16_t prim = -1;
    int32_t param = -1, input = -1;
  };

  // The arena the next datums come from; frames pushed afterwards hold its name ids.
  void use_arena(const Arena& arena, int which /* 0: the program, 1: the prelude */);
  void push_frame(const int32_t* ids, size_t n);
  void pop_frame();

  int32_t resolve(DRef d, bool tail);  // the node of `d` (throws FrontError)
  INode& node(int32_t i) { return nodes_[size_t(i)]; }
  // The nodes resolved so far (node i of this tree is node i of the fragment).
  Fragment fragment() const { return {nodes_, kids_, names_}; }
  // Adds the nodes of `f` to this tree; returns where its node 0 went.
  int32_t splice(const Fragment& f);
  // A Letrec (at 0, 0) binding `inits` to `names` around `body`.
  int32_t letrec(const std::vector<int32_t>& inits, const std::vector<const std::string*>& names,
                 int32_t body);

  // The tables of the tree at `root`, as bindings/lower_ir.cpp lowers the same Python IR.
  Tables emit(int32_t root) const;
  // (line, column) of the first use of input `i` ((0, 0): unused).
  std::pair<int32_t, int32_t> input_position(size_t i) const;

 private:
  Info& info(int32_t id);
  int32_t add(const INode& n);
  int32_t finish(INode n, size_t mark);  // n with kids scratch_[mark..], scratch_ popped
  bool local(int32_t id, int32_t* depth, int32_t* index) const;
  bool local_outside_first(int32_t id) const;
  int32_t lookup(DRef s, bool callee = false);
  int32_t call(DRef d, bool tail);
  int32_t prim_call(int code, DRef d);
  void check_operator(DRef head);
  std::vector<std::string> known(bool operator_position) const;
  int32_t form(int32_t head, DRef d, bool tail);
  int32_t f_lambda(DRef d);
  int32_t f_let(DRef d, bool tail, bool rec);
  [[noreturn]] void fail(const std::string& msg, DRef at) const;

  std::vector<std::string>& params_;
  const std::vector<std::string>& inputs_;
  bool infer_;
  NameIndex param_index_, input_index_;
  std::vector<std::pair<int32_t, int32_t>> input_pos_;  // per input name's first index

  const Arena* a_ = nullptr;
  int which_ = 0;
  std::vector<Info> info_[2];
  std::vector<int32_t> scope_;         // name ids of every frame, outermost first
  std::vector<uint32_t> frame_start_;  // where each frame starts in scope_
  int depth_ = 0;
  const char* stack_floor_ = stack_floor();  // resolve() stops above it (DepthGuard)

  std::vector<INode> nodes_;
  std::vector<int32_t> kids_, scratch_;
  std::vector<const std::string*> names_;  // LETREC names
  bool pooled_ = false;  // the vectors above are this thread's pool's (one compile after another
                         // reuses them; a resolver inside another gets its own)
};

}  // namespace ndvm::front::detail
