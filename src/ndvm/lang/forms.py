"""The names the expander treats specially: special forms, reserved names, and the Scheme
forms the language leaves out (mutation, continuations, macros, ...) with the reason given."""

from __future__ import annotations

RESERVED = frozenset(("define", "else", "=>", ".", "params", "quote", "lambda"))
SPECIAL_FORMS = frozenset(
    "quote if cond case and or when unless begin let let* letrec letrec* define lambda do "
    "loop recur assert params else => . quasiquote unquote".split()
)
# heads that make a body more than a sequence of expressions
BODY_HEADS = frozenset(("define", "begin"))
MUTATION_FORMS = frozenset(
    "set! set-car! set-cdr! vector-set! vector-fill! string-set! string-fill! list-set! "
    "matrix-set! hash-table-set!".split()
)
UNSUPPORTED_FORMS = {
    "call/cc": "first-class continuations are not part of the language",
    "call-with-current-continuation": "first-class continuations are not part of the language",
    "dynamic-wind": "dynamic-wind is not part of the language",
    "define-syntax": "macros are not part of the language",
    "let-syntax": "macros are not part of the language",
    "letrec-syntax": "macros are not part of the language",
    "syntax-rules": "macros are not part of the language",
    "guard": "exception handling is not part of the language",
    "raise": "exception handling is not part of the language",
    "with-exception-handler": "exception handling is not part of the language",
    "delay": "promises are not part of the language",
    "force": "promises are not part of the language",
    "define-record-type": "records are not part of the language",
    "let-values": "multiple values are not part of the language",
    "call-with-values": "multiple values are not part of the language",
    "values": "multiple values are not part of the language",
    "eval": "eval is not part of the language",
}
