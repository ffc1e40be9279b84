// The expander: expressions, bodies (defines become one letrec) and the binding forms
// (lambda let named-let let* letrec). The derived forms are in front_expand_forms.cpp.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "front_expand.hpp"

#define NDVM_COLD __attribute__((cold, noinline))

namespace ndvm::front {

namespace {

// expand.py's _check_bindable: forms.RESERVED
bool is_reserved(int32_t id) {
  switch (id) {
    case kw::DEFINE:
    case kw::ELSE:
    case kw::ARROW:
    case kw::DOT:
    case kw::PARAMS:
    case kw::QUOTE:
    case kw::LAMBDA: return true;
    default: return false;
  }
}

// forms.MUTATION_FORMS (reason empty) and forms.UNSUPPORTED_FORMS
struct Banned {
  std::string_view name;
  std::string_view reason;
};
constexpr std::string_view kContinuations = "first-class continuations are not part of the language";
constexpr std::string_view kMacros = "macros are not part of the language";
constexpr std::string_view kExceptions = "exception handling is not part of the language";
constexpr std::string_view kPromises = "promises are not part of the language";
constexpr std::string_view kValues = "multiple values are not part of the language";
constexpr Banned kBanned[] = {
    {"set!", {}},
    {"set-car!", {}},
    {"set-cdr!", {}},
    {"vector-set!", {}},
    {"vector-fill!", {}},
    {"string-set!", {}},
    {"string-fill!", {}},
    {"list-set!", {}},
    {"matrix-set!", {}},
    {"hash-table-set!", {}},
    {"call/cc", kContinuations},
    {"call-with-current-continuation", kContinuations},
    {"dynamic-wind", "dynamic-wind is not part of the language"},
    {"define-syntax", kMacros},
    {"let-syntax", kMacros},
    {"letrec-syntax", kMacros},
    {"syntax-rules", kMacros},
    {"guard", kExceptions},
    {"raise", kExceptions},
    {"with-exception-handler", kExceptions},
    {"delay", kPromises},
    {"force", kPromises},
    {"define-record-type", "records are not part of the language"},
    {"let-values", kValues},
    {"call-with-values", kValues},
    {"values", kValues},
    {"eval", "eval is not part of the language"},
};

// UnsupportedForm for a banned head (expand.py's _form for a name without a method)
NDVM_COLD [[noreturn]] void fail_banned(const Arena& a, const Banned& b, DRef d) {
  std::string m(b.name);
  if (b.reason.empty()) {
    m += " is not supported: the heap is write-once (no mutation in the language)";
  } else {
    m += ": ";
    m += b.reason;
  }
  throw FrontError{ErrKind::UNSUPPORTED, std::move(m), a[d].line, a[d].column};
}

__attribute__((noinline)) void check_banned(const Arena& a, int32_t head, DRef d) {
  const std::string& name = a.texts[size_t(head)];
  const size_t n = name.size();
  if (n < 4 || n > 30) return;
  for (const Banned& b : kBanned) {
    if (b.name.size() == n && std::memcmp(b.name.data(), name.data(), n) == 0) {
      fail_banned(a, b, d);
    }
  }
}

}  // namespace

// -- errors -----------------------------------------------------------------------------
NDVM_COLD void Expander::State::fail(DRef at, std::string_view p1, std::string_view p2,
                                     std::string_view p3) const {
  std::string m;
  m.reserve(p1.size() + p2.size() + p3.size());
  m.append(p1).append(p2).append(p3);
  throw FrontError{ErrKind::COMPILE, std::move(m), a[at].line, a[at].column};
}

NDVM_COLD void Expander::State::fail_repr(DRef at, std::string_view prefix, DRef name,
                                          std::string_view suffix) const {
  fail(at, prefix, py_repr(a.name(name)), suffix);
}

NDVM_COLD void Expander::State::fail_usage(DRef d, std::string_view usage) const {
  std::string m = "bad ";
  m += a.name(item(d, 0));
  m += " form: expected ";
  m += usage;
  fail(d, m);
}

NDVM_COLD void Expander::State::fail_quasi(DRef d) const {
  std::string m = a.name(item(d, 0));
  m += " is not supported";
  throw FrontError{ErrKind::UNSUPPORTED, std::move(m), a[d].line, a[d].column};
}

NDVM_COLD void Expander::State::too_deep() {
  throw FrontError{ErrKind::COMPILE, "program nested too deeply to compile", -1, -1};
}

NDVM_COLD void Expander::State::form_as_value(DRef d) const {
  if (a[d].text == kw::RECUR) {
    fail(d, "recur used as a value: it may only be called, in tail position");
  }
  fail_repr(d, "special form ", d, " used as a value");
}

NDVM_COLD void Expander::State::fail_not_bindable(DRef name) const {
  if (kind(name) != DKind::SYM) fail(name, "expected a variable name, got ", to_source(a, name));
  fail_repr(name, "cannot bind the special form name ", name, "");
}

// -- building ---------------------------------------------------------------------------
void Expander::State::reset() {
  depth = 0;
  loop_name = -1;
  loop_arity = 0;
  std::fill(std::begin(shadow), std::end(shadow), 0);
  pushed.clear();
  scratch.clear();
}

DRef Expander::State::build(size_t base, DRef at, DRef tail) {
  const Datum& p = a[at];
  const DRef out = a.list(scratch.data() + base, scratch.size() - base, tail, p.line, p.column);
  scratch.resize(base);
  return out;
}

DRef Expander::State::list1(DRef x, DRef at) { return a.list(&x, 1, -1, a[at].line, a[at].column); }

DRef Expander::State::list2(DRef x, DRef y, DRef at) {
  const DRef e[2] = {x, y};
  return a.list(e, 2, -1, a[at].line, a[at].column);
}

DRef Expander::State::list3(DRef x, DRef y, DRef z, DRef at) {
  const DRef e[3] = {x, y, z};
  return a.list(e, 3, -1, a[at].line, a[at].column);
}

DRef Expander::State::list4(DRef w, DRef x, DRef y, DRef z, DRef at) {
  const DRef e[4] = {w, x, y, z};
  return a.list(e, 4, -1, a[at].line, a[at].column);
}

void Expander::State::push_items(DRef d, int32_t from, int32_t to) {
  if (to < 0) to = count(d);
  const auto first = size_t(a[d].first);
  scratch.insert(scratch.end(), a.items.begin() + std::ptrdiff_t(first) + from,
                 a.items.begin() + std::ptrdiff_t(first) + to);
}

DRef Expander::State::gensym(std::string_view base, DRef at) {
  buf.assign("#");
  buf.append(base);
  char digits[24];
  int n = 0;
  for (int64_t v = next_id++; n == 0 || v > 0; v /= 10) digits[n++] = char('0' + v % 10);
  while (n > 0) buf += digits[--n];
  return a.sym(a.intern(buf), a[at].line, a[at].column);
}

// -- scopes -----------------------------------------------------------------------------
int32_t Expander::State::bind(DRef name) {
  const Datum& x = a[name];
  if (x.kind != DKind::SYM || !is_special(x.text)) return 0;
  ++shadow[x.text];
  pushed.push_back(static_cast<int8_t>(x.text));
  return 1;
}

void Expander::State::unbind(int32_t n) {
  for (; n > 0; --n) {
    --shadow[pushed.back()];
    pushed.pop_back();
  }
}

int32_t Expander::State::bind_formals(DRef formals) {
  if (!is_list(formals)) return bind(formals);
  int32_t n = 0;
  for (int32_t i = 0, c = count(formals); i < c; ++i) n += bind(item(formals, i));
  if (a[formals].tail >= 0) n += bind(a[formals].tail);
  return n;
}

int32_t Expander::State::bind_binding_names(DRef spec, int32_t n) {
  int32_t pushed_n = 0;
  for (int32_t i = 0; i < n; ++i) pushed_n += bind(item(item(spec, i), 0));
  return pushed_n;
}

DRef Expander::State::binding_names(DRef spec, int32_t n) {
  const size_t base = scratch.size();
  for (int32_t i = 0; i < n; ++i) push(item(item(spec, i), 0));
  return build(base, spec);
}

// The inits expanded in order (the order in which expansion draws generated names).
DRef Expander::State::expanded_bindings(DRef spec, int32_t n) {
  const size_t base = scratch.size();
  for (int32_t i = 0; i < n; ++i) {
    const DRef b = item(spec, i);
    const DRef value = expand(item(b, 1));
    push(list2(item(b, 0), value, item(b, 0)));
  }
  return build(base, spec);
}

DRef Expander::State::apply_letrec(DRef name, DRef fn, DRef spec, int32_t n, DRef d) {
  const DRef rec = list3(sym(kw::LETREC, d), list1(list2(name, fn, d), d), name, d);
  const size_t base = scratch.size();
  push(rec);
  for (int32_t i = 0; i < n; ++i) {
    const DRef value = expand(item(item(spec, i), 1));
    push(value);
  }
  return build(base, d);
}

// Whether `id`, the name at index i, occurred among the names before it (up to 8 names are
// compared directly; longer lists mark the ids seen with a fresh stamp, set up at i == 0).
bool Expander::State::repeated(DRef list, int32_t i, int32_t id, bool nested) {
  const int32_t n = count(list) + (a[list].tail >= 0 ? 1 : 0);
  if (n <= 8) {
    for (int32_t j = 0; j < i; ++j) {
      const DRef x = j == count(list) ? a[list].tail : item(list, j);
      if (a[nested ? item(x, 0) : x].text == id) return true;
    }
    return false;
  }
  if (i == 0 && ++stamp == 0) {
    std::fill(mark.begin(), mark.end(), 0u);
    stamp = 1;
  }
  if (size_t(id) >= mark.size()) mark.resize(a.texts.size(), 0u);
  if (mark[size_t(id)] == stamp) return true;
  mark[size_t(id)] = stamp;
  return false;
}

// -- checks -----------------------------------------------------------------------------
void Expander::State::check_bindable(DRef name) const {
  const Datum& x = a[name];
  if (x.kind != DKind::SYM || is_reserved(x.text)) fail_not_bindable(name);
}

void Expander::State::check_formals(DRef formals) {
  if (is_sym(formals)) {
    check_bindable(formals);
    return;
  }
  if (!is_list(formals)) fail(formals, "lambda: formals must be a list of symbols or a symbol");
  const int32_t n = count(formals) + (a[formals].tail >= 0 ? 1 : 0);
  for (int32_t i = 0; i < n; ++i) {
    const DRef f = i == count(formals) ? a[formals].tail : item(formals, i);
    check_bindable(f);
    if (repeated(formals, i, a[f].text, false)) fail_repr(f, "duplicate parameter name ", f, "");
  }
}

void Expander::State::check_bindings(DRef d, DRef spec) const {
  if (!proper(spec)) fail(spec, a.name(item(d, 0)), ": bindings must be a list of (name expr)");
  for (int32_t i = 0, n = count(spec); i < n; ++i) {
    const DRef b = item(spec, i);
    if (!proper(b) || count(b) != 2) {
      fail(b, a.name(item(d, 0)), ": each binding must be (name expr)");
    }
    check_bindable(item(b, 0));
  }
}

void Expander::State::args(DRef d, int32_t lo, int32_t hi, std::string_view usage) const {
  const int32_t n = count(d) - 1;
  if (n < lo || (hi >= 0 && n > hi)) fail_usage(d, usage);
}

// -- expressions ------------------------------------------------------------------------
DRef Expander::State::expand(DRef d) {
  const Datum& x = a[d];
  if (x.kind == DKind::SYM) {
    if (is_special(x.text) && is_form(x.text)) form_as_value(d);
    return d;
  }
  if (x.kind != DKind::LIST) return d;
  if (x.tail >= 0) fail(d, "dotted list is not a valid expression (quote it for data)");
  if (x.count == 0) fail(d, "empty application '()' (use '() for the empty list)");
  const int32_t h = head(d);
  enter();
  DRef out;
  if (is_special(h) && h != kw::DOT && is_form(h)) {
    out = form(h, d);
  } else {
    if (h >= kw::COUNT) check_banned(a, h, d);
    out = application(d);
  }
  --depth;
  return out;
}

// An application: atoms as they are, lists expanded; unchanged parts give `d` itself.
DRef Expander::State::application(DRef d) {
  const size_t base = scratch.size();
  bool same = true;
  for (int32_t i = 0, n = count(d); i < n; ++i) {
    const DRef x = item(d, i);
    const Datum& xd = a[x];
    if (xd.kind != DKind::LIST) {
      if (xd.kind == DKind::SYM && is_special(xd.text) && is_form(xd.text)) form_as_value(x);
      if (!same) push(x);
      continue;
    }
    const DRef y = expand(x);
    if (same) {
      if (y == x) continue;
      same = false;
      push_items(d, 0, i);
    }
    push(y);
  }
  return same ? d : build(base, d);
}

DRef Expander::State::form(int32_t id, DRef d) {
  switch (id) {
    case kw::QUOTE: args(d, 1, 1, "(quote datum)"); return d;
    case kw::IF: return f_if(d);
    case kw::BEGIN: return f_begin(d);
    case kw::DEFINE: fail(d, "define is only allowed at the start of a body or at top level");
    case kw::PARAMS: fail(d, "params header is only allowed as the first form of a program");
    case kw::ELSE:
    case kw::ARROW: fail(d, "else outside cond/case");
    case kw::LAMBDA: return f_lambda(d);
    case kw::LET: return f_let(d);
    case kw::LET_STAR: return f_let_star(d);
    case kw::LETREC:
    case kw::LETREC_STAR: return f_letrec(d);
    case kw::AND: return f_and(d);
    case kw::OR: return f_or(d);
    case kw::WHEN:
    case kw::UNLESS: return f_when(d);
    case kw::COND: return f_cond(d);
    case kw::CASE: return f_case(d);
    case kw::DO: return f_do(d);
    case kw::LOOP: return f_loop(d);
    case kw::RECUR: return f_recur(d);
    case kw::ASSERT: return f_assert(d);
    default: fail_quasi(d);  // quasiquote, unquote
  }
}

DRef Expander::State::f_if(DRef d) {
  args(d, 2, 3, "(if test then [else])");
  const size_t base = scratch.size();
  push(sym(kw::IF, d));
  const int32_t n = count(d);
  for (int32_t i = 1; i < n; ++i) {
    const DRef y = expand(item(d, i));
    push(y);
  }
  if (n == 3) push(void_at(d));
  return build(base, d);
}

DRef Expander::State::f_begin(DRef d) {
  args(d, 1, -1, "(begin expr ...)");
  const int32_t n = count(d);
  for (int32_t i = 1; i < n; ++i) {
    if (head(item(d, i)) == kw::DEFINE) {
      fail(item(d, i), "define is only allowed at the start of a body or at top level");
    }
  }
  const size_t base = scratch.size();
  push(sym(kw::BEGIN, d));
  for (int32_t i = 1; i < n; ++i) {
    const DRef y = expand(item(d, i));
    push(y);
  }
  return build(base, d);
}

// -- bodies -----------------------------------------------------------------------------
DRef Expander::State::body(DRef list, int32_t from, DRef at) {
  const int32_t n = count(list);
  if (n <= from) fail(at, "empty body: expected at least one expression");
  enter();
  bool plain = true;
  for (int32_t i = from; i < n && plain; ++i) {
    const int32_t h = head(item(list, i));
    plain = h != kw::DEFINE && h != kw::BEGIN;
  }
  const DRef out = plain ? sequence(list, from, at) : defines_body(list, from, at);
  --depth;
  return out;
}

// the expressions list.items[from:] in order: one, or (begin e ...) at `at`
DRef Expander::State::sequence(DRef list, int32_t from, DRef at) {
  const int32_t n = count(list);
  if (n - from == 1) return expand(item(list, from));
  const size_t base = scratch.size();
  push(sym(kw::BEGIN, at));
  for (int32_t i = from; i < n; ++i) {
    const DRef y = expand(item(list, i));
    push(y);
  }
  return build(base, at);
}

// a body with a define or a begin: begins holding defines spliced, the defined names bound
DRef Expander::State::defines_body(DRef list, int32_t from, DRef at) {
  const size_t base = scratch.size();
  splice(list, from);
  const DRef flat = a.list(scratch.data() + base, scratch.size() - base, -1, 0, 0);
  scratch.resize(base);
  int32_t pushed_n = 0;
  for (int32_t i = 0, n = count(flat); i < n; ++i) {
    const DRef f = item(flat, i);
    if (head(f) != kw::DEFINE) continue;
    DRef target = count(f) > 1 ? item(f, 1) : f;  // expand.py's _defined_name
    if (is_list(target) && count(target) > 0) target = item(target, 0);
    pushed_n += bind(target);
  }
  const DRef out = letrec_body(flat, at);
  unbind(pushed_n);
  return out;
}

void Expander::State::splice(DRef list, int32_t from) {
  enter();
  for (int32_t i = from, n = count(list); i < n; ++i) {
    const DRef f = item(list, i);
    bool defines = false;
    if (head(f) == kw::BEGIN) {
      for (int32_t j = 1, m = count(f); j < m && !defines; ++j) {
        defines = head(item(f, j)) == kw::DEFINE;
      }
    }
    if (defines) {
      splice(f, 1);
    } else {
      push(f);
    }
  }
  --depth;
}

// expand.py's _expand_body: the defines (and the expressions between them, bound to fresh
// names) become one letrec whose body is the last expression
DRef Expander::State::letrec_body(DRef flat, DRef at) {
  const int32_t m = count(flat);
  bool any = false;
  for (int32_t i = 0; i < m && !any; ++i) any = head(item(flat, i)) == kw::DEFINE;
  if (!any) return sequence(flat, 0, at);
  const size_t base = scratch.size();
  for (int32_t i = 0; i < m; ++i) {
    const DRef form = item(flat, i);
    if (head(form) == kw::DEFINE) {
      DRef name = -1;
      const DRef value = define_value(form, &name);
      push(list2(name, value, form));
    } else if (i == m - 1) {
      break;
    } else {
      const DRef g = gensym("_", form);
      const DRef value = expand(form);
      push(list2(g, value, form));
    }
  }
  const DRef last = item(flat, m - 1);
  const DRef last_value = head(last) == kw::DEFINE ? void_at(last) : expand(last);
  const DRef binds = build(base, at);
  return list3(sym(kw::LETREC, at), binds, last_value, at);
}

// expand.py's _define_parts: the value of a define (its name in *name)
DRef Expander::State::define_value(DRef form, DRef* name) {
  if (count(form) < 2) {
    fail(form, "define: expected (define name expr) or (define (name args) body)");
  }
  const DRef target = item(form, 1);
  if (is_list(target)) {
    if (count(target) == 0 || !is_sym(item(target, 0))) {
      fail(form, "define: the procedure name must be a symbol");
    }
    *name = item(target, 0);
    check_bindable(*name);
    size_t base = scratch.size();
    push_items(target, 1);
    const DRef formals = build(base, target, a[target].tail);
    base = scratch.size();
    push(sym(kw::LAMBDA, form));
    push(formals);
    push_items(form, 2);
    return f_lambda(build(base, form));
  }
  if (!is_sym(target)) fail(target, "define: expected a symbol to define");
  check_bindable(target);
  if (count(form) != 3) fail(form, "define: expected exactly one expression after the name");
  *name = target;
  return expand(item(form, 2));
}

// -- binding forms ----------------------------------------------------------------------
DRef Expander::State::f_lambda(DRef d) {
  args(d, 2, -1, "(lambda (args ...) body ...)");
  const DRef formals = item(d, 1);
  check_formals(formals);
  const int32_t saved_name = loop_name, saved_arity = loop_arity;
  loop_name = -1;  // a loop's recur does not reach into a lambda
  const int32_t pushed_n = bind_formals(formals);
  const DRef b = body(d, 2, d);
  unbind(pushed_n);
  loop_name = saved_name;
  loop_arity = saved_arity;
  return list3(sym(kw::LAMBDA, d), formals, b, d);
}

DRef Expander::State::f_let(DRef d) {
  if (count(d) >= 2 && is_sym(item(d, 1))) return named_let(d);
  if (seq) return f_let_star(d);
  args(d, 2, -1, "(let ((name expr) ...) body ...)");
  const DRef spec = item(d, 1);
  check_bindings(d, spec);
  const int32_t nb = count(spec);
  for (int32_t i = 0; i < nb; ++i) {
    const DRef n = item(item(spec, i), 0);
    if (repeated(spec, i, a[n].text, true)) fail_repr(n, "let: duplicate binding ", n, "");
  }
  const DRef inits = expanded_bindings(spec, nb);
  const int32_t pushed_n = bind_binding_names(spec, nb);
  const DRef b = body(d, 2, d);
  unbind(pushed_n);
  return list3(sym(kw::LET, d), inits, b, d);
}

// (let name ((var init) ...) body ...) -> ((letrec ((name (lambda (var ...) body ...))) name)
// init ...)
DRef Expander::State::named_let(DRef d) {
  args(d, 3, -1, "(let name ((var init) ...) body ...)");
  const DRef name = item(d, 1);
  check_bindable(name);
  const DRef spec = item(d, 2);
  check_bindings(d, spec);
  const int32_t nb = count(spec);
  const DRef formals = binding_names(spec, nb);
  const size_t base = scratch.size();
  push(sym(kw::LAMBDA, d));
  push(formals);
  push_items(d, 3);
  const DRef lam = build(base, d);
  const int32_t pushed_n = bind(name);
  const DRef fn = f_lambda(lam);
  unbind(pushed_n);
  return apply_letrec(name, fn, spec, nb, d);
}

// let*: nested lets; the body first, then the inits from the last (each sees the names
// bound before it)
DRef Expander::State::f_let_star(DRef d) {
  args(d, 2, -1, "(let* ((name expr) ...) body ...)");
  const DRef spec = item(d, 1);
  check_bindings(d, spec);
  const int32_t nb = count(spec);
  int32_t pushed_n = bind_binding_names(spec, nb);
  DRef out = body(d, 2, d);
  unbind(pushed_n);
  if (nb == 0) {
    const DRef empty = a.list(nullptr, 0, -1, a[d].line, a[d].column);
    return list3(sym(kw::LET, d), empty, out, d);
  }
  bind_binding_names(spec, nb - 1);  // names[:i] for i = nb - 1, popped one by one below
  for (int32_t i = nb - 1; i >= 0; --i) {
    const DRef b = item(spec, i);
    const DRef n = item(b, 0);
    const DRef init = expand(item(b, 1));
    out = list3(sym(kw::LET, d), list1(list2(n, init, n), n), out, d);
    if (i > 0) unbind(is_special(a[item(item(spec, i - 1), 0)].text) ? 1 : 0);
  }
  return out;
}

DRef Expander::State::f_letrec(DRef d) {
  args(d, 2, -1, "(letrec ((name expr) ...) body ...)");
  const DRef spec = item(d, 1);
  check_bindings(d, spec);
  const int32_t nb = count(spec);
  const int32_t pushed_n = bind_binding_names(spec, nb);
  const DRef inits = expanded_bindings(spec, nb);
  const DRef b = body(d, 2, d);
  unbind(pushed_n);
  return list3(sym(kw::LETREC, d), inits, b, d);
}

// -- the interface ----------------------------------------------------------------------
// One expander's state is kept per thread for the next expander (its vectors keep their
// capacity): a compile then allocates nothing for the expander once warm.
namespace {
struct Spare {
  void* state = nullptr;          // an Expander::State
  void (*free)(void*) = nullptr;  // deletes it (set by the expander, which may name State)
  ~Spare() {
    if (state != nullptr) free(state);
  }
};
thread_local Spare spare;
}  // namespace

Expander::Expander(Arena& arena, bool sequential_let) {
  auto* old = static_cast<State*>(spare.state);
  if (old == nullptr) {
    s_ = new State(arena, sequential_let);
    s_->scratch.reserve(64);
    return;
  }
  spare.state = nullptr;
  std::vector<DRef> scratch = std::move(old->scratch);
  std::vector<int8_t> pushed = std::move(old->pushed);
  std::vector<uint32_t> mark = std::move(old->mark);
  const uint32_t stamp = old->stamp;  // the marks stay older than the next stamp
  old->~State();
  s_ = new (old) State(arena, sequential_let);
  s_->scratch = std::move(scratch);
  s_->pushed = std::move(pushed);
  s_->mark = std::move(mark);
  s_->stamp = stamp;
}

Expander::~Expander() {
  if (spare.state == nullptr) {
    spare.free = [](void* p) { delete static_cast<State*>(p); };
    spare.state = s_;
  } else {
    delete s_;
  }
}

DRef Expander::expand_body(const DRef* forms, size_t n, DRef at) {
  State& s = *s_;
  s.reset();
  s.scratch.assign(forms, forms + n);  // `forms` may point into the arena, which grows
  const DRef list = s.build(0, at);
  return s.body(list, 0, at);
}

DRef Expander::expand(DRef d) {
  s_->reset();
  return s_->expand(d);
}

}  // namespace ndvm::front
