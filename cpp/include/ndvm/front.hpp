// The front end: source text -> resolved program tables (read, expand, resolve).
//
// One definition of the language. The reader turns UTF-8 source into data (an arena of
// datums, each with its 1-based line and column, columns counted in code points); the
// expander rewrites surface forms into core forms, still as data in the same arena; the
// resolver turns core forms into the node tables build_program validates (program.hpp), with
// lexical addresses and opcodes. Errors are FrontError (a ReadError, CompileError or
// UnsupportedForm on the Python side) with the message and position the language documents.
//
// Message formatting that mirrors Python (repr of a name or token, repr of a float, the
// "did you mean" hint) goes through Hooks, so messages read exactly as Python prints them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ndvm::front {

// -- errors -------------------------------------------------------------------------------
enum class ErrKind : uint8_t { READ, COMPILE, UNSUPPORTED };

struct FrontError {
  ErrKind kind = ErrKind::COMPILE;
  std::string message;
  int32_t line = -1;  // -1: no position (Python's None); 0 is a position, as Python prints it
  int32_t column = -1;
};

// -- message hooks (the binding implements them with Python's own functions) ---------------
struct Hooks {
  // Python's repr() of a str: 'abc', "a'b", '\\x00' ...
  std::function<std::string(std::string_view)> repr;
  // Python's repr() of a float: 0.5, 1e-05, inf, nan
  std::function<std::string(double)> float_repr;
  // ndvm.lang.suggest.did_you_mean(name, candidates): "did you mean 'a'?" or ""
  std::function<std::string(std::string_view, const std::vector<std::string>&)> did_you_mean;
  // the value of a token with a non-ASCII character, as Python's reader classifies it:
  // returns 0 for a plain symbol, 1 for a number (value in *out), 2 for a bad token
  // ("bad token ..."), 3 for a bad number ("bad number ...")
  std::function<int(std::string_view, double* out)> classify_unicode;
};

const Hooks& hooks();         // the installed hooks (the binding installs them once)
void set_hooks(Hooks hooks);  // called once by the binding at import

// True when this thread's stack is nearly used up (under 512 KiB left): the expander and the
// resolver then stop with "program nested too deeply to compile" rather than overflow it, on
// any thread and in any build (a sanitizer's frames are several times larger).
bool stack_nearly_exhausted();
// The address below which stack_nearly_exhausted() is true (a per-thread constant: a caller
// that checks at every level of its recursion reads it once).
const char* stack_floor();

// repr() of a str as Python prints it: a fast path for printable ASCII, hooks().repr otherwise
std::string py_repr(std::string_view s);

// -- data ---------------------------------------------------------------------------------
enum class DKind : uint8_t { SYM, NUM, STR, BOOL, LIST };

using DRef = int32_t;  // index of a datum in Arena::data; -1: none

struct Datum {
  DKind kind = DKind::SYM;
  bool flag = false;  // BOOL: the value
  int32_t line = 0, column = 0;
  double num = 0.0;    // NUM: the value
  int32_t text = -1;   // SYM: interned name id; NUM: its token's text id; STR: the value's id
  int32_t first = 0;   // LIST: items are Arena::items[first, first + count)
  int32_t count = 0;
  DRef tail = -1;      // LIST: the datum after '.' in (a b . c), or -1
};

// Fixed ids of the names the front end treats specially; Arena's constructor interns them in
// this order, so Datum::text == kw::IF means the symbol `if`.
namespace kw {
enum : int32_t {
  QUOTE, IF, COND, CASE, AND, OR, WHEN, UNLESS, BEGIN, LET, LET_STAR, LETREC, LETREC_STAR,
  DEFINE, LAMBDA, DO, LOOP, RECUR, ASSERT, PARAMS, ELSE, ARROW /* => */, DOT /* . */,
  QUASIQUOTE, UNQUOTE, VEC, VOID /* #void */, HASH_RECUR /* #recur */,
  HASH_ASSERT /* #assert */, EQV /* eqv? */,
  COUNT  // the number of fixed ids
};
}  // namespace kw

inline constexpr const char* kKeywordNames[kw::COUNT] = {
    "quote", "if", "cond", "case", "and", "or", "when", "unless", "begin", "let", "let*",
    "letrec", "letrec*", "define", "lambda", "do", "loop", "recur", "assert", "params", "else",
    "=>", ".", "quasiquote", "unquote", "vec", "#void", "#recur", "#assert", "eqv?"};

// FNV-1a of a name, never 0 (the mark of an empty slot in the front end's name tables).
inline uint32_t name_hash(std::string_view t) {
  uint32_t h = 2166136261u;
  for (const char c : t) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return h | 1u;
}

class Arena {
 public:
  Arena();  // interns kKeywordNames at ids 0 .. kw::COUNT-1
  // Back to the state of a new Arena (the keywords only), keeping the buffers of a small
  // program for the next (one compile after another reuses them).
  void reset();

  std::vector<Datum> data;
  std::vector<DRef> items;         // list items, each list's a contiguous run
  std::vector<std::string> texts;  // by id: symbol names (interned) and number/string texts

  int32_t intern(std::string_view name);  // the same name -> the same id (a keyword: its kw::)
  int32_t intern_other(std::string_view name);  // intern, for a name known not a keyword
  int32_t intern_hashed(std::string_view name, uint32_t hash);  // hash: name_hash(name)
  int32_t add_text(std::string_view text);  // a fresh id
  DRef sym(int32_t name_id, int32_t line, int32_t column);
  DRef sym(std::string_view name, int32_t line, int32_t column) {
    return sym(intern(name), line, column);
  }
  DRef num(double value, std::string_view text, int32_t line, int32_t column);
  DRef str(std::string_view value, int32_t line, int32_t column);
  DRef boolean(bool value, int32_t line, int32_t column);
  DRef list(const DRef* elems, size_t n, DRef tail, int32_t line, int32_t column);
  DRef list(const std::vector<DRef>& elems, DRef tail, int32_t line, int32_t column) {
    return list(elems.data(), elems.size(), tail, line, column);
  }

  const Datum& operator[](DRef d) const { return data[static_cast<size_t>(d)]; }
  const DRef* begin_items(DRef list) const { return items.data() + data[size_t(list)].first; }
  const std::string& name(DRef sym) const { return texts[size_t(data[size_t(sym)].text)]; }
  bool is_sym(DRef d, int32_t id) const {
    const Datum& x = data[size_t(d)];
    return x.kind == DKind::SYM && x.text == id;
  }
  // the head symbol's name id of a non-empty list headed by a symbol, else -1
  int32_t head_id(DRef d) const;

 private:
  DRef add(Datum d, int32_t line, int32_t column);  // d at (line, column), appended
  // the interned names (the keywords and the program's): an open-addressing table, at most
  // half full, of their name_hash (0: an empty slot) and ids into texts; the keywords stay
  // from one reset to the next, used_ lists the slots of the others
  size_t place(uint32_t hash, int32_t id);
  int32_t intern_new(std::string_view name, uint32_t hash);  // a name not interned yet
  std::vector<uint32_t> slot_hash_;
  std::vector<int32_t> slot_id_;
  std::vector<uint32_t> used_;
  size_t interned_ = 0;
};

// (inline: the reader and the expander build a datum per token)
inline DRef Arena::add(Datum d, int32_t line, int32_t column) {
  d.line = line;
  d.column = column;
  data.push_back(d);
  return static_cast<DRef>(data.size() - 1);
}

// (inline: most of a program's symbols are names met before, found at the first probe)
inline int32_t Arena::intern_hashed(std::string_view name, uint32_t hash) {
  const size_t mask = slot_hash_.size() - 1;
  for (size_t i = hash & mask; slot_hash_[i] != 0; i = (i + 1) & mask) {
    if (slot_hash_[i] != hash) continue;
    const int32_t id = slot_id_[i];
    const std::string& t = texts[static_cast<size_t>(id)];
    if (t.size() != name.size()) continue;
    size_t k = 0;  // (a byte loop: names are short, a memcmp call costs more)
    while (k < name.size() && t[k] == name[k]) ++k;
    if (k == name.size()) return id;
  }
  return intern_new(name, hash);
}

inline DRef Arena::sym(int32_t name_id, int32_t line, int32_t column) {
  Datum d;
  d.kind = DKind::SYM;
  d.text = name_id;
  return add(d, line, column);
}

inline DRef Arena::list(const DRef* elems, size_t n, DRef tail, int32_t line, int32_t column) {
  Datum d;
  d.kind = DKind::LIST;
  d.first = static_cast<int32_t>(items.size());
  d.count = static_cast<int32_t>(n);
  d.tail = tail;
  // (not insert: its out-of-line range insert costs several times these few push_backs;
  // `elems` never points into `items`, as for insert)
  for (size_t i = 0; i < n; ++i) items.push_back(elems[i]);
  return add(d, line, column);
}

// Print a datum back as source text (read(to_source(d)) gives d back): numbers by their text,
// strings escaped (\\ \" \n), booleans #t/#f, lists (a b . c).
std::string to_source(const Arena& a, DRef d);
// The same printer with `atom` printing each non-list datum (appending to `out`), as
// ndvm.lang.datum.to_source takes one (the skeleton's template substitutes names and numbers).
using AtomPrinter = void (*)(const Arena& a, const Datum& x, std::string& out, void* context);
void print_source(const Arena& a, DRef d, std::string& out, AtomPrinter atom, void* context);

// -- reader -------------------------------------------------------------------------------
inline constexpr int kMaxNesting = 2000;

struct ReadLimits {
  int64_t max_source_chars = 0;  // in code points; longer: READ "source longer than ..."
  int64_t max_forms = 0;         // more: COMPILE "program too large: more than ..."
};

struct ReadOutput {
  std::vector<DRef> top;        // the top-level data, in order
  std::vector<int32_t> symbols; // the name id of every symbol read (quoted or not, `vec` of
                                // [..], `quote` of '), each once
};

// Read every datum of `source` (UTF-8). An empty program is a READ error unless allow_empty.
ReadOutput read(Arena& arena, std::string_view source, const ReadLimits& limits,
                bool allow_empty);

// -- facts of a program read (the search funnel's, without building its data) -------------
// What ndvm.search.facts gives of data `out` read into `a`: the node count (atoms and lists,
// funnel.complexity), the skeleton as a template and what decides funnel.scalar_valued. A
// symbol is named by its index in out.symbols throughout.
struct SourceFacts {
  bool described = false;  // false: the data hold a string (its skeleton is not a template)
  int64_t nodes = 0;
  // the forms printed as to_source, separated by " ", each symbol as "{i}", each number as
  // "C": the skeleton (lang.front.skeleton) is this with "P" or the name for each {i}
  std::string skeleton;
  size_t first_end = 0;  // skeleton[0, first_end) is the first form's
  // one form of numbers, symbols and lists headed by symbols (`if` with three operands):
  // funnel.scalar_valued holds exactly when every symbol of `leaves` is a name, none of
  // `heads` (every list's head, `if` included) is, every head of `value_heads` gives a
  // number (funnel.head_kind) and every head of `cond_heads` a number or a truth value
  bool may_be_scalar = false;
  std::vector<int32_t> leaves, heads, value_heads, cond_heads;
};
SourceFacts source_facts(const Arena& a, const ReadOutput& out);

// -- expander -----------------------------------------------------------------------------
// Rewrites surface forms to the core forms the resolver takes: quote if lambda let letrec
// begin or #assert #recur, `#void`, applications. Generated names start with '#'.
class Expander {
 public:
  Expander(Arena& arena, bool sequential_let);  // sequential_let: the dmci dialect
  ~Expander();
  Expander(const Expander&) = delete;
  Expander& operator=(const Expander&) = delete;

  // A body (top level, lambda or let body): defines become one letrec; `at` positions errors
  // and the synthesized forms.
  DRef expand_body(const DRef* forms, size_t n, DRef at);
  DRef expand(DRef d);

 private:
  struct State;
  State* s_;
};

// -- resolver and driver ------------------------------------------------------------------
struct ParamSpecOut {
  std::string name;
  double init = 0.0;
  std::string constraint = "free";  // free | positive | unit | signed-unit
  int32_t line = 0, column = 0;
};

// The tables build_program takes (program.hpp: node rows `kind op a b c kids nkids line
// column`, preorder ids with children after their parent, child lists, Letrec name lists in
// aux, the constant pool `kind a b` + nums with quoted pairs children first, the strings),
// plus what the Python IR records carry and the tables do not.
struct Tables {
  std::vector<int32_t> nodes, kids, aux, consts;
  std::vector<double> nums;
  std::vector<std::string> strings;
  std::vector<uint8_t> tail;  // per node: Call.tail (1: a call in tail position)
};

struct Compiled {
  Tables tables;
  std::vector<ParamSpecOut> params;  // the program's parameters, in order
  std::vector<std::string> inputs;
  bool has_header = false;
  std::vector<std::string> prelude;  // the prelude procedures bound, sorted
  std::vector<std::pair<int32_t, int32_t>> input_positions;  // per input; (0, 0): unused
};

// How the host's `params` argument is turned into parameter specs, given the header's specs
// (the binding calls Python's normalizer; it throws FrontError for a bad argument). Empty
// function: params=None (the header's specs, or inferred when there is no header).
using ParamsFn = std::function<std::vector<ParamSpecOut>(const std::vector<ParamSpecOut>&)>;

struct CompileOptions {
  ReadLimits limits;
  bool dmci = false;  // dialect "dmci": let binds sequentially
};

// Read, expand and resolve `source`, with the same checks, in the same order, as the
// language documents (docs/language.md, docs/errors.md).
Compiled compile(std::string_view source, const ParamsFn& params,
                 std::vector<std::string> inputs, const CompileOptions& options);

// The prelude procedures `names` mention, with the prelude procedures they use, sorted.
std::vector<std::string> prelude_closure(const std::vector<std::string>& names);

}  // namespace ndvm::front
