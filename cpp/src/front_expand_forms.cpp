// The expander's derived forms: and or when unless cond case do loop recur assert (the
// expressions, bodies and binding forms are in front_expand.cpp).
#include <string>

#include "front_expand.hpp"

#define NDVM_COLD __attribute__((cold, noinline))

namespace ndvm::front {

NDVM_COLD void Expander::State::fail_when_usage(DRef d) const {
  std::string usage = "(";
  usage += a.name(item(d, 0));
  usage += " test expr ...)";
  fail_usage(d, usage);
}

NDVM_COLD void Expander::State::fail_recur_arity(DRef d) const {
  fail(d, "recur: the loop binds " + std::to_string(loop_arity) + " variable(s) but recur got ",
       std::to_string(count(d) - 1));
}

// the Str of an assert's source text, at (0, 0) as Python makes it
NDVM_COLD DRef Expander::State::assert_text(DRef expr) { return a.str(to_source(a, expr), 0, 0); }

// f_begin((begin@c c.items[from:]...)@c)
DRef Expander::State::begin_of(DRef c, int32_t from) {
  const size_t base = scratch.size();
  push(sym(kw::BEGIN, c));
  push_items(c, from);
  return f_begin(build(base, c));
}

// (and a ... z) -> (if a (... z) #f), from the last; (and) -> #t
DRef Expander::State::f_and(DRef d) {
  const int32_t n = count(d) - 1;
  if (n == 0) return boolean(true, d);
  DRef out = expand(item(d, n));
  for (int32_t k = n - 1; k >= 1; --k) {
    const DRef x = item(d, k);
    const DRef test = expand(x);
    out = list4(sym(kw::IF, x), test, out, boolean(false, x), x);
  }
  return out;
}

DRef Expander::State::f_or(DRef d) {
  const int32_t n = count(d) - 1;
  if (n == 0) return boolean(false, d);
  if (n == 1) return expand(item(d, 1));
  const size_t base = scratch.size();
  push(sym(kw::OR, d));
  for (int32_t i = 1; i <= n; ++i) {
    const DRef y = expand(item(d, i));
    push(y);
  }
  return build(base, d);
}

// (when t e ...) -> (if t (begin e ...) #void); unless swaps the branches
DRef Expander::State::f_when(DRef d) {
  if (count(d) - 1 < 2) fail_when_usage(d);
  const size_t base = scratch.size();
  push(sym(kw::BEGIN, d));
  push_items(d, 2);
  const DRef seq_form = build(base, d);
  const DRef test = expand(item(d, 1));
  const DRef then = f_begin(seq_form);
  if (head(d) == kw::UNLESS) return list4(sym(kw::IF, d), test, void_at(d), then, d);
  return list4(sym(kw::IF, d), test, then, void_at(d), d);
}

// cond: nested ifs built from the last clause (so the last clause's errors come first)
DRef Expander::State::f_cond(DRef d) {
  const int32_t nc = count(d) - 1;
  if (nc == 0) fail(d, "cond: expected at least one clause");
  DRef out = void_at(d);
  for (int32_t i = nc - 1; i >= 0; --i) {
    const DRef c = item(d, i + 1);
    if (!proper(c) || count(c) == 0) fail(c, "cond: each clause must be (test expr ...)");
    const DRef test = item(c, 0);
    if (is_sym(test) && a[test].text == kw::ELSE) {
      if (i != nc - 1) fail(c, "cond: else must be the last clause");
      if (count(c) == 1) fail(c, "cond: else clause needs an expression");
      out = begin_of(c, 1);
      continue;
    }
    out = cond_clause(c, out);
  }
  return out;
}

// one non-else cond clause around `out` (the clauses after it)
DRef Expander::State::cond_clause(DRef c, DRef out) {
  const DRef test = item(c, 0);
  const int32_t nbody = count(c) - 1;
  if (nbody > 0 && a.is_sym(item(c, 1), kw::ARROW)) {
    if (nbody != 2) fail(c, "cond: expected (test => procedure)");
    const DRef tmp = gensym("t", c);
    const DRef proc = expand(item(c, 2));
    const DRef inner = list4(sym(kw::IF, c), tmp, list2(proc, tmp, c), out, c);
    const DRef value = expand(test);
    return list3(sym(kw::LET, c), list1(list2(tmp, value, c), c), inner, c);
  }
  if (nbody == 0) {
    const DRef value = expand(test);
    return list3(sym(kw::OR, c), value, out, c);
  }
  const DRef then = begin_of(c, 1);
  const DRef value = expand(test);
  return list4(sym(kw::IF, c), value, then, out, c);
}

// case: the key bound to a fresh name, the clauses as nested ifs of eqv? tests (built from
// the last clause; the key expression is expanded last)
DRef Expander::State::f_case(DRef d) {
  args(d, 2, -1, "(case key ((datum ...) expr ...) ... [(else expr ...)])");
  const DRef key = gensym("k", d);
  DRef out = void_at(d);
  const int32_t nc = count(d) - 2;
  for (int32_t i = nc - 1; i >= 0; --i) out = case_clause(item(d, i + 2), key, out, i == nc - 1);
  const DRef value = expand(item(d, 1));
  return list3(sym(kw::LET, d), list1(list2(key, value, d), d), out, d);
}

DRef Expander::State::case_clause(DRef c, DRef key, DRef out, bool last) {
  if (!proper(c) || count(c) < 2) fail(c, "case: each clause must be ((datum ...) expr ...)");
  DRef then;
  if (a.is_sym(item(c, 1), kw::ARROW)) {
    if (count(c) != 3) fail(c, "case: expected (... => procedure)");
    const DRef proc = expand(item(c, 2));
    then = list2(proc, key, c);
  } else {
    then = begin_of(c, 1);
  }
  const DRef sel = item(c, 0);
  if (a.is_sym(sel, kw::ELSE)) {
    if (!last) fail(c, "case: else must be the last clause");
    return then;
  }
  if (!proper(sel)) fail(c, "case: clause must start with a list of data");
  const int32_t ns = count(sel);
  DRef test;
  if (ns == 0) {
    test = boolean(false, c);
  } else {
    const size_t base = scratch.size();
    if (ns > 1) push(sym(kw::OR, c));
    for (int32_t j = 0; j < ns; ++j) {
      const DRef x = item(sel, j);
      push(list3(sym(kw::EQV, x), key, list2(sym(kw::QUOTE, x), x, x), x));
    }
    if (ns == 1) {
      test = scratch.back();
      scratch.resize(base);
    } else {
      test = build(base, c);
    }
  }
  return list4(sym(kw::IF, c), test, then, out, c);
}

// (do ((v init step) ...) (test res ...) body ...) -> a named let over a fresh name
DRef Expander::State::f_do(DRef d) {
  args(d, 2, -1, "(do ((var init [step]) ...) (test expr ...) body ...)");
  const DRef spec = item(d, 1), end = item(d, 2);
  if (!proper(spec)) fail(spec, "do: expected a list of (var init [step])");
  if (!proper(end) || count(end) == 0) {
    fail(end, "do: expected (test expr ...) after the bindings");
  }
  const int32_t nb = count(spec);
  size_t base = scratch.size();
  for (int32_t i = 0; i < nb; ++i) {
    const DRef b = item(spec, i);
    if (!proper(b) || count(b) < 2 || count(b) > 3) {
      fail(b, "do: each binding must be (var init [step])");
    }
    check_bindable(item(b, 0));
    push(list2(item(b, 0), item(b, 1), b));
  }
  const DRef binds = build(base, spec);
  const DRef name = gensym("do", d);
  DRef result;
  if (count(end) > 1) {
    base = scratch.size();
    push(sym(kw::BEGIN, end));
    push_items(end, 1);
    result = build(base, end);
  } else {
    result = void_at(end);
  }
  base = scratch.size();
  push(name);
  for (int32_t i = 0; i < nb; ++i) {
    const DRef b = item(spec, i);
    push(item(b, count(b) == 3 ? 2 : 0));
  }
  DRef again = build(base, d);
  if (count(d) > 3) {
    base = scratch.size();
    push(sym(kw::BEGIN, d));
    push_items(d, 3);
    push(again);
    again = build(base, d);
  }
  const DRef test = list4(sym(kw::IF, end), item(end, 0), result, again, d);
  return named_let(list4(sym(kw::LET, d), name, binds, test, d));
}

// (loop ((v init) ...) body ...): a named let whose hidden name recur calls
DRef Expander::State::f_loop(DRef d) {
  args(d, 2, -1, "(loop ((var init) ...) body ...)");
  const DRef spec = item(d, 1);
  check_bindings(d, spec);
  const int32_t nb = count(spec);
  const DRef name = gensym("loop", d);
  const DRef formals = binding_names(spec, nb);
  const int32_t saved_name = loop_name, saved_arity = loop_arity;
  loop_name = a[name].text;  // the innermost loop only
  loop_arity = nb;
  const int32_t pushed_n = bind_formals(formals);
  const DRef b = body(d, 2, d);
  unbind(pushed_n);
  loop_name = saved_name;
  loop_arity = saved_arity;
  const DRef lam = list3(sym(kw::LAMBDA, d), formals, b, d);
  return apply_letrec(name, lam, spec, nb, d);
}

DRef Expander::State::f_recur(DRef d) {
  if (loop_name < 0) {
    fail(d, "recur outside of a loop body (recur may only call the innermost loop)");
  }
  if (count(d) - 1 != loop_arity) fail_recur_arity(d);
  const size_t base = scratch.size();
  push(sym(kw::HASH_RECUR, d));
  push(sym(loop_name, d));
  for (int32_t i = 1, n = count(d); i < n; ++i) {
    const DRef y = expand(item(d, i));
    push(y);
  }
  return build(base, d);
}

DRef Expander::State::f_assert(DRef d) {
  args(d, 1, 1, "(assert expr)");
  const DRef value = expand(item(d, 1));
  return list3(sym(kw::HASH_ASSERT, d), value, assert_text(item(d, 1)), d);
}

}  // namespace ndvm::front
