// The resolver: core forms -> a tree of resolved nodes -> the node tables (preorder).
//
// Free names resolve, in order, to: a lexical variable, a primitive (opcode), `#void`, a
// declared parameter, a data input, a named constant (constants.inc: `pi`), or (when
// parameters are inferred) a new parameter; else an
// unbound-variable error with the closest known names. A name in operator position must be a
// lexical variable or a primitive. Calls to primitives are checked for arity here.
#include "front_resolve.hpp"

#include <string_view>

#include "ndvm/prims.hpp"

namespace ndvm::front::detail {

namespace {

struct PrimNames {
  std::unordered_map<std::string_view, int> code;
  std::vector<std::string> all;  // names, then aliases (the candidates of "did you mean")
};

const PrimNames& primitives() {
  static const PrimNames* p = [] {
    auto* t = new PrimNames;
#define NDVM_PRIM(upper, code_, name, lo, hi, kind, shape, domain) \
  t->code.emplace(name, code_);                                   \
  t->all.emplace_back(name);
#define NDVM_PRIM_ALIAS(upper, alias)                                \
  t->code.emplace(alias, static_cast<int>(::ndvm::Prim::upper)); \
  t->all.emplace_back(alias);
#include "ndvm/prims.inc"
#undef NDVM_PRIM
#undef NDVM_PRIM_ALIAS
    return t;
  }();
  return *p;
}

// The named constants of the language (ndvm.prims.constants), by name.
const std::unordered_map<std::string_view, double>& constants() {
  static const auto* t = [] {
    auto* m = new std::unordered_map<std::string_view, double>;
#define NDVM_CONST(name, value) m->emplace(name, value);
#include "ndvm/constants.inc"
#undef NDVM_CONST
    return m;
  }();
  return *t;
}

// The special forms (forms.SPECIAL_FORMS): candidates in operator position.
constexpr const char* kSpecialForms[] = {
    "quote", "if", "cond", "case", "and", "or", "when", "unless", "begin", "let", "let*",
    "letrec", "letrec*", "define", "lambda", "do", "loop", "recur", "assert", "params", "else",
    "=>", ".", "quasiquote", "unquote"};

// Primitives whose first argument is a procedure they call (_PROCEDURE_FIRST).
bool procedure_first(std::string_view n) {
  return n == "map" || n == "for-each" || n == "filter" || n == "reduce" || n == "fold-left" ||
         n == "fold-right" || n == "apply" || n == "vector-map";
}

std::string describe(const PrimInfo& p) {
  if (p.max_args == p.min_args) return "exactly " + std::to_string(p.min_args);
  if (p.max_args < 0) return "at least " + std::to_string(p.min_args);
  return std::to_string(p.min_args) + " to " + std::to_string(p.max_args);
}

[[noreturn, gnu::noinline, gnu::cold]] void bad_prim_call(const PrimInfo& p, int nargs,
                                                                const Datum& at) {
  std::string msg = std::string(p.name) + " expects " + describe(p) + " argument(s), got " +
                    std::to_string(nargs);
  const bool arity_ok = nargs >= p.min_args && (p.max_args < 0 || nargs <= p.max_args);
  if (arity_ok) msg = "internal: prelude procedure " + py_repr(p.name) + " not bound";
  throw FrontError{ErrKind::COMPILE, msg, at.line, at.column};
}

[[noreturn, gnu::noinline, gnu::cold]] void not_a_procedure(const Arena& a, DRef head,
                                                                  const Datum& at) {
  throw FrontError{ErrKind::COMPILE,
                   "cannot call a constant: " + to_source(a, head) + " is not a procedure",
                   at.line, at.column};
}

struct DepthGuard {
  int& d;
  // floor: stack_floor(), read once per resolver (the check is then one comparison)
  DepthGuard(int& depth, const char* floor) : d(depth) {
    if (++d > kMaxResolveDepth || static_cast<const char*>(__builtin_frame_address(0)) < floor) {
      --d;
      throw FrontError{ErrKind::COMPILE, "program nested too deeply to compile", -1, -1};
    }
  }
  ~DepthGuard() { --d; }
};

}  // namespace

int prim_code(std::string_view name) {
  // the names and aliases in an open-addressing table by FNV-1a, at most a quarter full (a
  // name's look-up costs about its hashing; std::hash and a bucket walk cost several times it)
  struct Table {
    std::vector<uint32_t> hash;  // 0: empty
    std::vector<std::pair<std::string_view, int>> entry;
  };
  static const Table* table = [] {
    auto* t = new Table;
    size_t size = 16;
    while (size < 4 * primitives().code.size()) size *= 2;
    t->hash.assign(size, 0);
    t->entry.resize(size);
    for (const auto& [n, code] : primitives().code) {
      const uint32_t h = name_hash(n);
      size_t i = h & (size - 1);
      while (t->hash[i] != 0) i = (i + 1) & (size - 1);
      t->hash[i] = h;
      t->entry[i] = {n, code};
    }
    return t;
  }();
  const uint32_t h = name_hash(name);
  const size_t mask = table->hash.size() - 1;
  for (size_t i = h & mask; table->hash[i] != 0; i = (i + 1) & mask) {
    if (table->hash[i] == h && table->entry[i].first == name) return table->entry[i].second;
  }
  return -1;
}

const std::vector<std::string>& prim_names() { return primitives().all; }

namespace {
// A resolver's vectors, kept empty between compiles on this thread (their capacity reused).
struct Buffers {
  std::vector<std::pair<int32_t, int32_t>> input_pos;
  std::vector<Resolver::Info> info[2];
  std::vector<int32_t> scope;
  std::vector<uint32_t> frame_start;
  std::vector<INode> nodes;
  std::vector<int32_t> kids, scratch;
  std::vector<const std::string*> names;
  bool busy = false;
};

Buffers& buffers() {
  thread_local Buffers b;
  return b;
}

template <typename V>
void give_back(V& from, V& to) {
  constexpr size_t kKeep = 4096;  // larger buffers are released, not kept
  if (from.capacity() > kKeep) return;
  from.clear();
  to.swap(from);
}
}  // namespace

Resolver::Resolver(std::vector<std::string>& params, const std::vector<std::string>& inputs,
                   bool infer)
    : params_(params), inputs_(inputs), infer_(infer), param_index_(params),
      input_index_(inputs) {
  Buffers& b = buffers();
  if (!b.busy) {
    b.busy = true;
    pooled_ = true;
    input_pos_.swap(b.input_pos);
    info_[0].swap(b.info[0]);
    info_[1].swap(b.info[1]);
    scope_.swap(b.scope);
    frame_start_.swap(b.frame_start);
    nodes_.swap(b.nodes);
    kids_.swap(b.kids);
    scratch_.swap(b.scratch);
    names_.swap(b.names);
  }
  input_pos_.assign(inputs_.size(), {0, 0});
  // a small program's tables without regrowing them
  nodes_.reserve(64);
  kids_.reserve(64);
  scratch_.reserve(32);
  scope_.reserve(16);
  frame_start_.reserve(8);
}

Resolver::~Resolver() {
  if (!pooled_) return;
  Buffers& b = buffers();
  give_back(input_pos_, b.input_pos);
  give_back(info_[0], b.info[0]);
  give_back(info_[1], b.info[1]);
  give_back(scope_, b.scope);
  give_back(frame_start_, b.frame_start);
  give_back(nodes_, b.nodes);
  give_back(kids_, b.kids);
  give_back(scratch_, b.scratch);
  give_back(names_, b.names);
  b.busy = false;
}

void Resolver::use_arena(const Arena& arena, int which) {
  a_ = &arena;
  which_ = which;
}

void Resolver::push_frame(const int32_t* ids, size_t n) {
  frame_start_.push_back(static_cast<uint32_t>(scope_.size()));
  scope_.insert(scope_.end(), ids, ids + n);
}

void Resolver::pop_frame() {
  scope_.resize(frame_start_.back());
  frame_start_.pop_back();
}

Resolver::Info& Resolver::info(int32_t id) {
  std::vector<Info>& cache = info_[which_];
  if (size_t(id) >= cache.size()) cache.resize(a_->texts.size() > size_t(id) ? a_->texts.size()
                                                                             : size_t(id) + 1);
  Info& in = cache[size_t(id)];
  if (!in.computed) {
    in.computed = true;
    const std::string& name = a_->texts[size_t(id)];
    in.prim = static_cast<int16_t>(prim_code(name));
    const int32_t p = param_index_.find(name);
    if (p >= 0) in.param = p;
    const int32_t q = input_index_.find(name);
    if (q >= 0) in.input = q;
  }
  return in;
}

bool Resolver::local(int32_t id, int32_t* depth, int32_t* index) const {
  size_t end = scope_.size();
  for (size_t f = frame_start_.size(); f-- > 0;) {
    const size_t start = frame_start_[f];
    for (size_t i = end; i-- > start;) {
      if (scope_[i] == id) {  // the last binding of a name in a frame wins
        *depth = static_cast<int32_t>(frame_start_.size() - 1 - f);
        *index = static_cast<int32_t>(i - start);
        return true;
      }
    }
    end = start;
  }
  return false;
}

bool Resolver::local_outside_first(int32_t id) const {
  const size_t from = frame_start_.size() > 1 ? frame_start_[1] : scope_.size();
  for (size_t i = from; i < scope_.size(); ++i) {
    if (scope_[i] == id) return true;
  }
  return false;
}

void Resolver::fail(const std::string& msg, DRef at) const {
  const Datum& x = (*a_)[at];
  throw FrontError{ErrKind::COMPILE, msg, x.line, x.column};
}

int32_t Resolver::add(const INode& n) {
  nodes_.push_back(n);
  return static_cast<int32_t>(nodes_.size() - 1);
}

int32_t Resolver::finish(INode n, size_t mark) {
  n.kids = static_cast<int32_t>(kids_.size());
  n.nkids = static_cast<int32_t>(scratch_.size() - mark);
  kids_.insert(kids_.end(), scratch_.begin() + std::ptrdiff_t(mark), scratch_.end());
  scratch_.resize(mark);
  return add(n);
}

int32_t Resolver::lookup(DRef s, bool callee) {
  const Datum& x = (*a_)[s];
  INode n;
  n.line = x.line;
  n.column = x.column;
  int32_t depth = 0, index = 0;
  if (local(x.text, &depth, &index)) {
    n.kind = NodeKind::LOCAL;
    n.a = depth;
    n.b = index;
    n.name = &a_->texts[size_t(x.text)];
    return add(n);
  }
  Info& in = info(x.text);
  // A declared parameter or input shadows a primitive of its name as a value; as the callee of
  // an application (callee = true) the name is the primitive: parameters and inputs are data.
  const bool declared = in.param >= 0 || in.input >= 0;
  if (in.prim >= 0 && (callee || !declared)) {
    n.kind = NodeKind::PRIMREF;
    n.op = static_cast<uint16_t>(in.prim);
    return add(n);
  }
  const std::string& name = a_->texts[size_t(x.text)];
  if (x.text == kw::VOID && !declared) {
    n.kind = NodeKind::CONST;
    n.ck = 2;
    return add(n);
  }
  if (in.param >= 0) {
    n.kind = NodeKind::PARAM;
    n.a = in.param;
    return add(n);
  }
  if (in.input >= 0) {
    auto& pos = input_pos_[size_t(in.input)];
    if (pos.first == 0 && pos.second == 0) pos = {x.line, x.column};
    n.kind = NodeKind::INPUT;
    n.a = in.input;
    return add(n);
  }
  for (const auto& [cname, value] : constants()) {  // a handful of names: a scan
    if (cname == name) {
      n.kind = NodeKind::CONST;
      n.num = value;
      return add(n);
    }
  }
  if (infer_ && (name.empty() || name[0] != '#')) {
    params_.push_back(name);
    param_index_.appended();
    in.param = static_cast<int32_t>(params_.size() - 1);
    n.kind = NodeKind::PARAM;
    n.a = in.param;
    return add(n);
  }
  const std::string hint = hooks().did_you_mean(name, known(false));
  fail("unbound variable " + py_repr(name) +
           " (not a parameter, input, primitive or local binding" +
           (hint.empty() ? "" : "; " + hint) + ")",
       s);
}

std::vector<std::string> Resolver::known(bool operator_position) const {
  std::vector<std::string> out = prim_names();
  for (int32_t id : scope_) out.push_back(a_->texts[size_t(id)]);
  if (operator_position) {
    for (const char* f : kSpecialForms) out.emplace_back(f);
  } else {
    for (const auto& c : constants()) out.emplace_back(c.first);
    out.insert(out.end(), params_.begin(), params_.end());
    out.insert(out.end(), inputs_.begin(), inputs_.end());
  }
  return out;
}

void Resolver::check_operator(DRef head) {
  const Datum& x = (*a_)[head];
  int32_t depth = 0, index = 0;
  const std::string& name = a_->texts[size_t(x.text)];
  if (local(x.text, &depth, &index) || info(x.text).prim >= 0 ||
      (!name.empty() && name[0] == '#')) {
    return;
  }
  std::string msg;
  if (param_index_.find(name) >= 0) {
    msg = "cannot call parameter " + py_repr(name) + ": parameters are numbers, not procedures";
  } else if (input_index_.find(name) >= 0) {
    msg = "cannot call input " + py_repr(name) + ": inputs are data, not procedures";
  } else {
    const std::string hint = hooks().did_you_mean(name, known(true));
    msg = "unknown procedure " + py_repr(name) + " (" +
          (hint.empty() ? std::string("not a primitive or a local binding") : hint) + ")";
  }
  fail(msg, head);
}

int32_t Resolver::resolve(DRef d, bool tail) {
  DepthGuard guard(depth_, stack_floor_);
  const Datum& x = (*a_)[d];
  INode n;
  n.line = x.line;
  n.column = x.column;
  switch (x.kind) {
    case DKind::SYM: return lookup(d);
    case DKind::NUM: n.num = x.num; return add(n);
    case DKind::BOOL:
      n.ck = 1;
      n.a = x.flag ? 1 : 0;
      return add(n);
    case DKind::STR:
      n.ck = 3;
      n.name = &a_->texts[size_t(x.text)];
      return add(n);
    case DKind::LIST: break;
  }
  const DRef head = a_->begin_items(d)[0];
  const Datum& h = (*a_)[head];
  int32_t depth = 0, index = 0;
  if (h.kind == DKind::SYM && !local(h.text, &depth, &index)) {
    const int32_t r = form(h.text, d, tail);
    if (r >= 0) return r;
    const int code = info(h.text).prim;
    if (code >= 0 && !procedure_first(a_->texts[size_t(h.text)])) return prim_call(code, d);
  }
  return call(d, tail);
}

int32_t Resolver::prim_call(int code, DRef d) {
  const Datum& x = (*a_)[d];
  const size_t mark = scratch_.size();
  const DRef* items = a_->begin_items(d);
  for (int32_t i = 1; i < x.count; ++i) scratch_.push_back(resolve(items[i], false));
  const PrimInfo& p = prim_info(code);
  const int nargs = x.count - 1;
  if (nargs < p.min_args || (p.max_args >= 0 && nargs > p.max_args) ||
      p.kind == PrimKind::PRELUDE) {
    bad_prim_call(p, nargs, x);  // (kept out of line: this frame is on the recursion path)
  }
  INode n;
  n.kind = NodeKind::PRIMCALL;
  n.op = static_cast<uint16_t>(code);
  n.line = x.line;
  n.column = x.column;
  return finish(n, mark);
}

int32_t Resolver::call(DRef d, bool tail) {
  const Datum& x = (*a_)[d];
  const DRef* items = a_->begin_items(d);
  const DRef head = items[0];
  const Datum& h = (*a_)[head];
  if (h.kind == DKind::SYM) {
    check_operator(head);
    if (x.count > 1 && (*a_)[items[1]].kind == DKind::SYM &&
        procedure_first(a_->texts[size_t(h.text)]) && !local_outside_first(h.text)) {
      check_operator(items[1]);
    }
  }
  const int32_t fn = h.kind == DKind::SYM ? lookup(head, true) : resolve(head, false);
  if (nodes_[size_t(fn)].kind == NodeKind::PRIMREF) {
    const int code = nodes_[size_t(fn)].op;
    nodes_.pop_back();  // the operator is not a node of the call
    return prim_call(code, d);
  }
  const size_t mark = scratch_.size();
  scratch_.push_back(fn);
  for (int32_t i = 1; i < x.count; ++i) scratch_.push_back(resolve(items[i], false));
  if (nodes_[size_t(fn)].kind == NodeKind::CONST) not_a_procedure(*a_, head, x);
  INode n;
  n.kind = NodeKind::CALL;
  n.tail = tail;
  n.line = x.line;
  n.column = x.column;
  return finish(n, mark);
}

// A core form headed by `head` (a name not bound locally), or -1 for an application.
int32_t Resolver::form(int32_t head, DRef d, bool tail) {
  switch (head) {
    case kw::QUOTE: case kw::IF: case kw::BEGIN: case kw::OR: case kw::LAMBDA: case kw::LET:
    case kw::LETREC: case kw::HASH_RECUR: case kw::HASH_ASSERT: break;
    default: return -1;
  }
  const Datum& x = (*a_)[d];
  const DRef* items = a_->begin_items(d);
  INode n;
  n.line = x.line;
  n.column = x.column;
  if (head == kw::QUOTE) {
    n.ck = 4;
    n.qa = a_;
    n.qd = items[1];
    return add(n);
  }
  const size_t mark = scratch_.size();
  if (head == kw::IF) {
    scratch_.push_back(resolve(items[1], false));
    scratch_.push_back(resolve(items[2], tail));
    scratch_.push_back(resolve(items[3], tail));
    n.kind = NodeKind::IF;
    return finish(n, mark);
  }
  if (head == kw::BEGIN || head == kw::OR) {
    for (int32_t i = 1; i < x.count; ++i) {
      scratch_.push_back(resolve(items[i], tail && i == x.count - 1));
    }
    n.kind = head == kw::OR ? NodeKind::OR : NodeKind::SEQ;
    return finish(n, mark);
  }
  if (head == kw::LAMBDA) return f_lambda(d);
  if (head == kw::LET) return f_let(d, tail, false);
  if (head == kw::LETREC) return f_let(d, tail, true);
  if (head == kw::HASH_RECUR) {
    if (!tail) fail("recur is not in tail position", d);
    scratch_.push_back(lookup(items[1]));
    for (int32_t i = 2; i < x.count; ++i) scratch_.push_back(resolve(items[i], false));
    n.kind = NodeKind::CALL;
    n.tail = true;
    return finish(n, mark);
  }
  scratch_.push_back(resolve(items[1], false));  // #assert
  n.kind = NodeKind::ASSERT;
  n.name = &a_->texts[size_t((*a_)[items[2]].text)];
  return finish(n, mark);
}

int32_t Resolver::f_lambda(DRef d) {
  const Datum& x = (*a_)[d];
  const DRef* items = a_->begin_items(d);
  const Datum& formals = (*a_)[items[1]];
  frame_start_.push_back(static_cast<uint32_t>(scope_.size()));
  bool rest = false;
  if (formals.kind == DKind::SYM) {
    scope_.push_back(formals.text);
    rest = true;
  } else {
    const DRef* f = a_->begin_items(items[1]);
    for (int32_t i = 0; i < formals.count; ++i) scope_.push_back((*a_)[f[i]].text);
    if (formals.tail >= 0) {
      scope_.push_back((*a_)[formals.tail].text);
      rest = true;
    }
  }
  const int32_t size = static_cast<int32_t>(scope_.size() - frame_start_.back());
  const size_t mark = scratch_.size();
  scratch_.push_back(resolve(items[2], true));
  pop_frame();
  INode n;
  n.kind = NodeKind::LAMBDA;
  n.a = size - (rest ? 1 : 0);
  n.b = rest ? 1 : 0;
  static const std::string kLambda = "lambda";
  n.name = &kLambda;
  n.line = x.line;
  n.column = x.column;
  return finish(n, mark);
}

int32_t Resolver::f_let(DRef d, bool tail, bool rec) {
  const Datum& x = (*a_)[d];
  const DRef* items = a_->begin_items(d);
  const DRef spec = items[1];
  const int32_t nb = (*a_)[spec].count;
  const DRef* binds = a_->begin_items(spec);
  const size_t mark = scratch_.size();
  INode n;
  n.line = x.line;
  n.column = x.column;
  auto push_names = [&] {
    frame_start_.push_back(static_cast<uint32_t>(scope_.size()));
    for (int32_t i = 0; i < nb; ++i) scope_.push_back((*a_)[a_->begin_items(binds[i])[0]].text);
  };
  if (rec) {
    push_names();
    n.a = static_cast<int32_t>(names_.size());
    n.b = nb;
    for (int32_t i = 0; i < nb; ++i) {  // all of them before the inits add their own
      names_.push_back(&a_->texts[size_t((*a_)[a_->begin_items(binds[i])[0]].text)]);
    }
    for (int32_t i = 0; i < nb; ++i) {
      const int32_t init = resolve(a_->begin_items(binds[i])[1], false);
      if (nodes_[size_t(init)].kind == NodeKind::LAMBDA) {
        nodes_[size_t(init)].name = names_[size_t(n.a + i)];
      }
      scratch_.push_back(init);
    }
  } else {
    for (int32_t i = 0; i < nb; ++i) {
      scratch_.push_back(resolve(a_->begin_items(binds[i])[1], false));
    }
    push_names();
  }
  scratch_.push_back(resolve(items[2], tail));
  pop_frame();
  n.kind = rec ? NodeKind::LETREC : NodeKind::LET;
  return finish(n, mark);
}

int32_t Resolver::splice(const Fragment& f) {
  const auto base = static_cast<int32_t>(nodes_.size());
  const auto kbase = static_cast<int32_t>(kids_.size());
  const auto nbase = static_cast<int32_t>(names_.size());
  for (INode n : f.nodes) {
    n.kids += kbase;
    if (n.kind == NodeKind::LETREC) n.a += nbase;
    nodes_.push_back(n);
  }
  for (int32_t k : f.kids) kids_.push_back(k + base);
  names_.insert(names_.end(), f.names.begin(), f.names.end());
  return base;
}

int32_t Resolver::letrec(const std::vector<int32_t>& inits,
                         const std::vector<const std::string*>& names, int32_t body) {
  INode n;
  n.kind = NodeKind::LETREC;
  n.a = static_cast<int32_t>(names_.size());
  n.b = static_cast<int32_t>(names.size());
  names_.insert(names_.end(), names.begin(), names.end());
  const size_t mark = scratch_.size();
  scratch_.insert(scratch_.end(), inits.begin(), inits.end());
  scratch_.push_back(body);
  return finish(n, mark);
}

std::pair<int32_t, int32_t> Resolver::input_position(size_t i) const {
  return input_pos_[size_t(input_index_.find(inputs_[i]))];
}

}  // namespace ndvm::front::detail
