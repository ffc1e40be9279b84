// The front end's driver: read, the params header, expand, bind the prelude, resolve, with
// the checks in the order the language documents (docs/language.md, docs/errors.md).
//
// The prelude procedures (map, fold-left, ...) are ndvm source in the primitive table
// (prims.inc: NDVM_PRIM_PRELUDE); each is read and expanded once per process, and the ones a
// program names, with those they use, are resolved in an outermost letrec frame around it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "front_resolve.hpp"
#include "ndvm/front.hpp"
#include "ndvm/prims.hpp"

namespace ndvm::front {

namespace {

// -- the prelude --------------------------------------------------------------------------
struct PreludeProc {
  std::string name;
  std::vector<int> deps;  // indices of the prelude procedures it uses
  DRef datum = -1;        // the expanded definition, in Prelude::arena
  int32_t id = -1;        // the name's id in Prelude::arena
};

struct Prelude {
  Arena arena;
  std::vector<PreludeProc> procs;  // sorted by name
  std::unordered_map<std::string, int> by_name;  // names and aliases -> index in procs
  std::vector<int8_t> by_code;  // opcode -> index in procs, -1: not a prelude procedure
  size_t shortest = 0;  // the length of the shortest name or alias (a shorter one is not one)
};

const Prelude& prelude() {
  static const Prelude* p = [] {
    auto* t = new Prelude;
    struct Src {
      int code;
      const char* deps;
      const char* source;
    };
    std::vector<Src> srcs;
#define NDVM_PRIM(upper, code, name, lo, hi, kind, shape, domain)
#define NDVM_PRIM_PRELUDE(upper, deps, source) \
  srcs.push_back({static_cast<int>(::ndvm::Prim::upper), deps, source});
#include "ndvm/prims.inc"
#undef NDVM_PRIM_PRELUDE
    std::sort(srcs.begin(), srcs.end(), [](const Src& a, const Src& b) {
      return std::string(prim_info(a.code).name) < std::string(prim_info(b.code).name);
    });
    t->by_code.assign(kPrimCodeLimit, -1);
    for (const Src& s : srcs) {
      t->by_code[size_t(s.code)] = static_cast<int8_t>(t->procs.size());
      t->by_name.emplace(prim_info(s.code).name, static_cast<int>(t->procs.size()));
      t->procs.push_back({prim_info(s.code).name, {}, -1, -1});
    }
#define NDVM_PRIM_ALIAS(upper, alias)                                                  \
  if (prim_info(static_cast<int>(::ndvm::Prim::upper)).kind == PrimKind::PRELUDE) {    \
    t->by_name.emplace(alias, t->by_name.at(prim_info(int(::ndvm::Prim::upper)).name)); \
  }
#include "ndvm/prims.inc"
#undef NDVM_PRIM_ALIAS
#undef NDVM_PRIM
    const ReadLimits limits{5'000'000, 50'000};  // Limits() defaults
    for (size_t i = 0; i < srcs.size(); ++i) {
      PreludeProc& proc = t->procs[i];
      const std::string deps = srcs[i].deps;
      size_t at = 0;
      while (at < deps.size()) {
        size_t end = deps.find(' ', at);
        if (end == std::string::npos) end = deps.size();
        auto it = t->by_name.find(deps.substr(at, end - at));
        if (it != t->by_name.end()) proc.deps.push_back(it->second);  // a prelude procedure
        at = end + 1;
      }
      const ReadOutput out = read(t->arena, srcs[i].source, limits, false);
      Expander expander(t->arena, false);  // one per procedure, as Python's
      proc.datum = expander.expand(out.top.at(0));
    }
    for (PreludeProc& proc : t->procs) proc.id = t->arena.intern(proc.name);
    t->shortest = t->by_name.empty() ? 0 : t->by_name.begin()->first.size();
    for (const auto& [name, index] : t->by_name) t->shortest = std::min(t->shortest, name.size());
    if (t->procs.size() > 64) throw std::logic_error("prelude: more than 64 procedures");
    return t;
  }();
  return *p;
}

// The closure of the prelude procedures in `named` (indices; sorted by name as procs are).
std::vector<int> closure(std::vector<char>& named) {
  const Prelude& p = prelude();
  std::vector<int> todo;
  for (size_t i = 0; i < named.size(); ++i) {
    if (named[i]) todo.push_back(static_cast<int>(i));
  }
  std::fill(named.begin(), named.end(), 0);
  while (!todo.empty()) {
    const int i = todo.back();
    todo.pop_back();
    if (named[size_t(i)]) continue;
    named[size_t(i)] = 1;
    for (int d : p.procs[size_t(i)].deps) {
      if (!named[size_t(d)]) todo.push_back(d);
    }
  }
  std::vector<int> out;
  for (size_t i = 0; i < named.size(); ++i) {
    if (named[i]) out.push_back(static_cast<int>(i));
  }
  return out;
}

void mark_named(const std::string& name, std::vector<char>& named) {
  const Prelude& p = prelude();
  if (name.size() < p.shortest) return;  // most of a program's names: no hash, no look-up
  // a prelude procedure's name or alias is a primitive's (by_name holds the same names)
  const int code = detail::prim_code(name);
  if (code >= 0 && p.by_code[size_t(code)] >= 0) named[size_t(p.by_code[size_t(code)])] = 1;
}

// -- the params header --------------------------------------------------------------------
constexpr const char* kConstraints[] = {"free", "positive", "unit", "signed-unit"};

std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates) {
  return hooks().did_you_mean ? hooks().did_you_mean(name, candidates) : std::string();
}

std::string float_repr(double v) {
  if (hooks().float_repr) return hooks().float_repr(v);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

[[noreturn]] void fail_at(const std::string& msg, const Datum& at) {
  throw FrontError{ErrKind::COMPILE, msg, at.line, at.column};
}

std::vector<ParamSpecOut> parse_header(const Arena& a, DRef form) {
  std::vector<ParamSpecOut> specs;
  specs.reserve(static_cast<size_t>(a[form].count));  // one spec per entry at most
  auto declared = [&](const std::string& name) {
    for (const ParamSpecOut& s : specs) {
      if (s.name == name) return true;
    }
    return false;
  };
  const Datum& f = a[form];
  for (int32_t k = 1; k < f.count; ++k) {
    const Datum& item = a[a.begin_items(form)[k]];
    if (item.kind == DKind::SYM) {
      const std::string& name = a.texts[size_t(item.text)];
      if (declared(name)) fail_at("params: " + py_repr(name) + " declared twice", item);
      specs.push_back({name, 0.0, "free", item.line, item.column});
      continue;
    }
    const DRef* sub = item.kind == DKind::LIST ? a.items.data() + item.first : nullptr;
    if (item.kind != DKind::LIST || item.tail >= 0 || item.count < 1 || item.count > 3 ||
        a[sub[0]].kind != DKind::SYM) {
      fail_at("params: each entry must be (name [init] [constraint])", item);
    }
    const std::string& name = a.texts[size_t(a[sub[0]].text)];
    ParamSpecOut spec{name, 0.0, "free", item.line, item.column};
    int32_t r = 1;
    if (r < item.count && a[sub[r]].kind == DKind::NUM) spec.init = a[sub[r++]].num;
    if (r < item.count) {
      const Datum& c = a[sub[r]];
      bool ok = false;
      if (c.kind == DKind::SYM) {
        const std::string_view got = a.texts[size_t(c.text)];
        for (const char* k : kConstraints) ok = ok || got == k;
      }
      if (!ok) {
        const std::string got = c.kind == DKind::SYM ? a.texts[size_t(c.text)] : "";
        const std::string hint =
            got.empty() ? "" : did_you_mean(got, {std::begin(kConstraints), std::end(kConstraints)});
        fail_at("params: constraint must be one of free, positive, unit, signed-unit" +
                    (hint.empty() ? "" : " (" + hint + ")"),
                c);
      }
      spec.constraint = a.texts[size_t(c.text)];
      if (item.count - r > 1) fail_at("params: too many fields in entry", item);
    }
    if (declared(name)) fail_at("params: " + py_repr(name) + " declared twice", item);
    specs.push_back(std::move(spec));
  }
  return specs;
}

// str() of a float as Python prints the constraint bounds
const char* bound_text(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v == 0.0 ? "0.0" : v == 1.0 ? "1.0" : "-1.0";
}

void check_init(const ParamSpecOut& s) {
  double lo = -std::numeric_limits<double>::infinity(), hi = -lo;
  const std::string_view c = s.constraint;  // (string_view: no strlen, no out-of-line compare)
  if (c == "free") return;
  if (c == "positive") lo = 0.0;
  if (c == "unit") lo = 0.0, hi = 1.0;
  if (c == "signed-unit") lo = -1.0, hi = 1.0;
  if (lo < s.init && s.init < hi) return;
  throw FrontError{ErrKind::COMPILE,
                   "params: initial value " + float_repr(s.init) + " of " + py_repr(s.name) +
                       " is outside its constraint " + s.constraint + " (" + bound_text(lo) +
                       ", " + bound_text(hi) + ")",
                   s.line != 0 ? s.line : -1, s.column != 0 ? s.column : -1};
}

bool is_params_form(const Arena& a, DRef d) { return a.head_id(d) == kw::PARAMS; }

// Every symbol name in `data` (quoted or not), marked in `named` where it is a prelude name.
void mark_symbols_in(const Arena& a, const DRef* data, size_t n, std::vector<char>& named) {
  std::vector<DRef> stack(data, data + n);
  std::vector<char> seen(a.texts.size(), 0);
  while (!stack.empty()) {
    const DRef d = stack.back();
    stack.pop_back();
    const Datum& x = a[d];
    if (x.kind == DKind::SYM) {
      if (!seen[size_t(x.text)]) {
        seen[size_t(x.text)] = 1;
        mark_named(a.texts[size_t(x.text)], named);
      }
    } else if (x.kind == DKind::LIST) {
      stack.insert(stack.end(), a.begin_items(d), a.begin_items(d) + x.count);
      if (x.tail >= 0) stack.push_back(x.tail);
    }
  }
}

// The definitions of the prelude procedures `used`, resolved in the frame that binds them (a
// Lambda each, named after its procedure); they depend on nothing else, so each set is resolved
// once per process (a bounded number of sets is kept; `local` holds the others).
struct PreludeIr {
  detail::Fragment f;
  std::vector<int32_t> roots;  // per procedure used
};

const PreludeIr& prelude_ir(const std::vector<int>& used, PreludeIr& local) {
  static std::mutex mu;
  static std::unordered_map<uint64_t, std::unique_ptr<PreludeIr>> cache;
  const Prelude& pre = prelude();
  uint64_t key = 0;
  for (int i : used) key |= uint64_t(1) << i;  // (the prelude has fewer than 64 procedures)
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return *it->second;
  }
  std::vector<std::string> no_params;
  const std::vector<std::string> no_inputs;
  detail::Resolver res(no_params, no_inputs, false);
  std::vector<int32_t> frame;
  for (int i : used) frame.push_back(pre.procs[size_t(i)].id);
  res.use_arena(pre.arena, 1);
  res.push_frame(frame.data(), frame.size());
  auto ir = std::make_unique<PreludeIr>();
  for (int i : used) {
    const PreludeProc& proc = pre.procs[size_t(i)];
    const int32_t node = res.resolve(proc.datum, false);
    if (res.node(node).kind == NodeKind::LAMBDA) res.node(node).name = &proc.name;
    ir->roots.push_back(node);
  }
  ir->f = res.fragment();
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= 256) {
    local = std::move(*ir);
    return local;
  }
  auto [it, inserted] = cache.emplace(key, std::move(ir));
  return *it->second;
}

// The program's body resolved in the outermost frame of the prelude procedures `used`, with
// those bound around it by a letrec (each definition resolved in that frame).
int32_t resolve_with_prelude(detail::Resolver& res, Arena& arena, DRef body,
                             const std::vector<int>& used) {
  const Prelude& pre = prelude();
  std::vector<int32_t> frame;
  for (int i : used) frame.push_back(arena.intern(pre.procs[size_t(i)].name));
  res.use_arena(arena, 0);
  res.push_frame(frame.data(), frame.size());
  const int32_t root = res.resolve(body, true);
  if (used.empty()) return root;
  res.pop_frame();
  PreludeIr local;
  const PreludeIr& defs = prelude_ir(used, local);
  const int32_t base = res.splice(defs.f);
  std::vector<int32_t> inits;
  std::vector<const std::string*> init_names;
  for (size_t k = 0; k < used.size(); ++k) {
    inits.push_back(base + defs.roots[k]);
    init_names.push_back(&pre.procs[size_t(used[k])].name);
  }
  return res.letrec(inits, init_names, root);
}

// A header needs an expression after it, and no other form may be a header.
void check_forms(const Arena& arena, const DRef* data, size_t n, bool has_header) {
  if (has_header && n == 0) {
    throw FrontError{ErrKind::COMPILE, "program has a params header but no expression", 1, 1};
  }
  // (with a header, the first form after it is left to the expander, as Python does)
  for (size_t i = has_header ? 1 : 0; i < n; ++i) {
    if (is_params_form(arena, data[i])) {
      fail_at("params header is only allowed as the first form", arena[data[i]]);
    }
  }
}

}  // namespace

std::vector<std::string> prelude_closure(const std::vector<std::string>& names) {
  const Prelude& p = prelude();
  std::vector<char> named(p.procs.size(), 0);
  for (const std::string& n : names) mark_named(n, named);
  std::vector<std::string> out;
  for (int i : closure(named)) out.push_back(p.procs[size_t(i)].name);
  return out;
}

namespace {

// This thread's arena, reused by one compile after another (reset when the compile ends,
// however it ends); a compile inside a compile (from a host hook) gets a fresh one.
struct ArenaLease {
  std::unique_ptr<Arena> own;
  Arena* arena;
  bool* busy = nullptr;
  ArenaLease() {
    thread_local Arena shared;
    thread_local bool shared_busy = false;
    if (shared_busy) {
      own = std::make_unique<Arena>();
      arena = own.get();
    } else {
      shared_busy = true;
      busy = &shared_busy;
      arena = &shared;
    }
  }
  ~ArenaLease() {
    if (busy != nullptr) {
      arena->reset();
      *busy = false;
    }
  }
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;
};

}  // namespace

Compiled compile(std::string_view source, const ParamsFn& params,
                 std::vector<std::string> inputs, const CompileOptions& options) {
  for (const std::string& name : inputs) {
    if (name.empty()) {
      throw FrontError{ErrKind::COMPILE, "input names must be non-empty strings, got ''", -1, -1};
    }
  }
  const ArenaLease lease;
  Arena& arena = *lease.arena;
  const ReadOutput rd = read(arena, source, options.limits, false);
  Compiled out;
  std::vector<ParamSpecOut> header;
  const DRef* data = rd.top.data();
  size_t n = rd.top.size();
  out.has_header = is_params_form(arena, data[0]);
  if (out.has_header) {
    header = parse_header(arena, data[0]);
    ++data;
    --n;
  }
  check_forms(arena, data, n, out.has_header);
  out.params = params ? params(header) : std::move(header);  // (header: not read after)
  const bool infer = !params && !out.has_header;
  for (const ParamSpecOut& s : out.params) {
    if (std::find(inputs.begin(), inputs.end(), s.name) != inputs.end()) {
      throw FrontError{ErrKind::COMPILE,
                       py_repr(s.name) + " is declared both as a parameter and as an input", -1,
                       -1};
    }
  }
  const DRef* const forms = data;  // (rd.top's: it does not grow, the arena may)
  const DRef top = arena.list(forms, n, -1, arena[forms[0]].line, arena[forms[0]].column);
  DRef body_datum = -1;
  {
    Expander expander(arena, options.dmci);
    body_datum = expander.expand_body(forms, n, top);
  }
  const Prelude& pre = prelude();
  std::vector<char> named(pre.procs.size(), 0);
  for (int32_t id : rd.symbols) mark_named(arena.texts[size_t(id)], named);
  std::vector<int> used = closure(named);
  if (!used.empty() && out.has_header) {  // names only the header mentions do not count
    std::fill(named.begin(), named.end(), 0);
    mark_symbols_in(arena, forms, n, named);
    used = closure(named);
  }
  std::vector<std::string> names;
  names.reserve(out.params.size() + 8);
  for (const ParamSpecOut& s : out.params) names.push_back(s.name);
  detail::Resolver res(names, inputs, infer);
  const int32_t root = resolve_with_prelude(res, arena, body_datum, used);
  if (infer) {
    out.params.clear();
    out.params.reserve(names.size());
    for (const std::string& name : names) out.params.push_back({name, 0.0, "free", 0, 0});
  }
  for (const ParamSpecOut& s : out.params) check_init(s);
  out.tables = res.emit(root);
  for (int i : used) out.prelude.push_back(pre.procs[size_t(i)].name);
  for (size_t i = 0; i < inputs.size(); ++i) out.input_positions.push_back(res.input_position(i));
  out.inputs = std::move(inputs);  // (after the resolver's last use of them)
  return out;
}

}  // namespace ndvm::front
