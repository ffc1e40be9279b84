// The expander's state, shared by its two files (front_expand.cpp: expressions, bodies and the
// binding forms; front_expand_forms.cpp: the derived conditional and iteration forms).
//
// The expansion mirrors src/ndvm/lang/expand.py step for step: the same data are built, the
// same checks run in the same order (the first error Python raises is the one raised here) and
// the generated names `#<base><n>` are numbered by one counter in the order Python draws them.
//
// Data live in the arena; a `const Datum&` is never held across a call that may add data (the
// arena's vectors grow), so fields are read through the small accessors below. Lists are built
// on `scratch`, a stack shared by all the recursive calls: a call pushes its items above the
// items of its callers and pops them when it builds its list, so no list allocates per node.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ndvm/front.hpp"

namespace ndvm::front {

// ids [0, kSpecialEnd) are forms.SPECIAL_FORMS (the kw enum lists them first)
inline constexpr int32_t kSpecialEnd = kw::UNQUOTE + 1;
static_assert(kw::QUOTE == 0 && kw::UNQUOTE == 24 && kw::VEC == 25,
              "SPECIAL_FORMS are the first 25 fixed ids");

// Expansion recursion (nested expressions, spliced begins) deeper than this is a CompileError
// "program nested too deeply to compile" (Python: RecursionError at 20000 frames).
inline constexpr int32_t kMaxExpandDepth = 10000;

inline bool is_special(int32_t id) { return id >= 0 && id < kSpecialEnd; }

struct Expander::State {
  State(Arena& arena, bool sequential) : a(arena), seq(sequential) {}

  Arena& a;
  bool seq;              // the dmci dialect: let binds like let*
  int64_t next_id = 0;   // the gensym counter
  int32_t depth = 0;     // the recursion depth (kMaxExpandDepth)
  const char* floor = stack_floor();  // this thread's: enter() stops above it
  int32_t loop_name = -1;  // the innermost loop's hidden name id, -1: none (loop_stack empty)
  int32_t loop_arity = 0;
  int32_t shadow[kSpecialEnd] = {};  // per special-form name: how many bindings shadow it
  std::vector<int8_t> pushed;        // the shadowed names, in binding order (popped LIFO)
  std::vector<DRef> scratch;         // the list-building stack
  std::vector<uint32_t> mark;        // duplicate-name checks: mark[name id] == stamp: seen
  uint32_t stamp = 0;
  std::string buf;

  void reset();

  // -- data access (by value: the arena may grow between two reads) ----------------------
  DKind kind(DRef d) const { return a[d].kind; }
  int32_t count(DRef d) const { return a[d].count; }
  DRef item(DRef d, int32_t i) const { return a.items[size_t(a[d].first + i)]; }
  bool is_list(DRef d) const { return a[d].kind == DKind::LIST; }
  bool is_sym(DRef d) const { return a[d].kind == DKind::SYM; }
  bool proper(DRef d) const { return a[d].kind == DKind::LIST && a[d].tail < 0; }
  int32_t head(DRef d) const { return a.head_id(d); }  // expand.head_name as an id, or -1

  // -- building -------------------------------------------------------------------------
  DRef sym(int32_t id, DRef at) { return a.sym(id, a[at].line, a[at].column); }
  DRef void_at(DRef at) { return sym(kw::VOID, at); }
  DRef boolean(bool v, DRef at) { return a.boolean(v, a[at].line, a[at].column); }
  void push(DRef d) { scratch.push_back(d); }
  // the list of scratch[base:] (and `tail`) at `at`'s position; pops those items
  DRef build(size_t base, DRef at, DRef tail = -1);
  DRef list1(DRef x, DRef at);
  DRef list2(DRef x, DRef y, DRef at);
  DRef list3(DRef x, DRef y, DRef z, DRef at);
  DRef list4(DRef w, DRef x, DRef y, DRef z, DRef at);
  // push d.items[from:to] (to < 0: to the end)
  void push_items(DRef d, int32_t from, int32_t to = -1);
  DRef gensym(std::string_view base, DRef at);

  // -- scopes ---------------------------------------------------------------------------
  int32_t bind(DRef name);  // Expander.binding for one name: 1 if it shadows a form
  void unbind(int32_t n);
  bool is_form(int32_t id) const { return shadow[id] == 0; }
  bool repeated(DRef list, int32_t i, int32_t id, bool nested);
  void enter() {
    const auto* here = static_cast<const char*>(__builtin_frame_address(0));
    if (++depth > kMaxExpandDepth || here < floor) too_deep();
  }

  // -- errors (cold, out of line: the recursive frames stay small) ----------------------
  [[noreturn]] void fail(DRef at, std::string_view p1, std::string_view p2 = {},
                         std::string_view p3 = {}) const;
  [[noreturn]] void fail_repr(DRef at, std::string_view prefix, DRef name,
                              std::string_view suffix) const;
  [[noreturn]] void fail_usage(DRef d, std::string_view usage) const;
  [[noreturn]] static void too_deep();
  [[noreturn]] void fail_quasi(DRef d) const;
  [[noreturn]] void fail_not_bindable(DRef name) const;
  [[noreturn]] void fail_when_usage(DRef d) const;
  [[noreturn]] void fail_recur_arity(DRef d) const;
  DRef assert_text(DRef expr);  // the Str of an assert's source text, at (0, 0)

  // -- expressions (front_expand.cpp) ---------------------------------------------------
  DRef expand(DRef d);
  DRef form(int32_t id, DRef d);
  DRef application(DRef d);
  void form_as_value(DRef d) const;
  void args(DRef d, int32_t lo, int32_t hi, std::string_view usage) const;
  DRef body(DRef list, int32_t from, DRef at);  // expand_body(list.items[from:], at)
  DRef sequence(DRef list, int32_t from, DRef at);
  DRef defines_body(DRef list, int32_t from, DRef at);
  DRef letrec_body(DRef flat, DRef at);
  void splice(DRef list, int32_t from);
  DRef define_value(DRef form, DRef* name);
  void check_bindable(DRef name) const;
  void check_formals(DRef formals);
  void check_bindings(DRef d, DRef spec) const;
  int32_t bind_formals(DRef formals);
  int32_t bind_binding_names(DRef spec, int32_t n);
  DRef binding_names(DRef spec, int32_t n);     // (name ...) of spec's n bindings, at spec
  DRef expanded_bindings(DRef spec, int32_t n);  // ((name expanded-init) ...), at spec
  // ((letrec ((name fn)) name) expanded-init ...) of spec's n bindings, at d
  DRef apply_letrec(DRef name, DRef fn, DRef spec, int32_t n, DRef d);
  DRef f_if(DRef d);
  DRef f_begin(DRef d);
  DRef f_lambda(DRef d);
  DRef f_let(DRef d);
  DRef named_let(DRef d);
  DRef f_let_star(DRef d);
  DRef f_letrec(DRef d);

  // -- derived forms (front_expand_forms.cpp) -------------------------------------------
  DRef f_and(DRef d);
  DRef f_or(DRef d);
  DRef f_when(DRef d);
  DRef f_cond(DRef d);
  DRef cond_clause(DRef c, DRef out);
  DRef f_case(DRef d);
  DRef case_clause(DRef c, DRef key, DRef out, bool last);
  DRef f_do(DRef d);
  DRef f_loop(DRef d);
  DRef f_recur(DRef d);
  DRef f_assert(DRef d);
  DRef begin_of(DRef c, int32_t from);  // f_begin((begin@c c.items[from:]...)@c)
};

}  // namespace ndvm::front
