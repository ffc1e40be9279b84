"""``ndvm.from_numpy``: the subset it reads, what it maps it to, and typed positioned errors
for everything else (hostile skeletons included) without executing anything."""

from __future__ import annotations

import builtins
import math
import time
from pathlib import Path

import numpy as np
import pytest

import ndvm
from ndvm.errors import CompileError
from ndvm.lang.numpy_reader import translate

T = np.linspace(0.1, 2.0, 5)


def _eval(source: str, params: list[float], **inputs: np.ndarray) -> np.ndarray:
    prog = ndvm.from_numpy(source)
    return np.asarray(prog.eval(np.asarray(params, dtype=float), inputs))


def test_issue_example_inputs_params_and_values() -> None:
    src = (
        "def equation(t, x, v, params):\n"
        "    a = params[0] * x + params[1] * x**3          # locals, Python precedence, **\n"
        "    return a - params[2] * v + params[3] * np.sin(params[4] * t)\n"
    )
    prog = ndvm.from_numpy(src)
    assert prog.inputs == ("t", "x", "v")
    assert prog.params == ("p0", "p1", "p2", "p3", "p4")
    assert np.all(prog.init_theta() == 1.0)  # LLM-SR's ones
    p = [0.5, -0.25, 2.0, 1.5, 3.0]
    x, v = T * 2 - 1, np.cos(T)
    expected = p[0] * x + p[1] * x**3 - p[2] * v + p[3] * np.sin(p[4] * T)
    np.testing.assert_allclose(prog.eval(np.array(p), t=T, x=x, v=v), expected, rtol=1e-14)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("-x ** 2", -(T**2)),  # ** binds tighter than unary minus
        ("2 ** -x", 2.0 ** -T),
        ("x - x / 2 * 3", T - T / 2 * 3),
        ("x * 2 ** 3 ** 0.5", T * 2 ** 3**0.5),  # ** is right-associative
        ("math.log(x, 2) + np.log10(x) + np.log2(x)", np.log2(T) + np.log10(T) + np.log2(T)),
        ("np.pi * x + math.e + numpy.e", np.pi * T + 2 * math.e),
        ("np.clip(x, 0.5, None) + np.clip(x, None, 0.5)",
         np.clip(T, 0.5, None) + np.clip(T, None, 0.5)),
        ("np.where((x > 0.5) & ~(x > 1.5), x, -x)", np.where((T > 0.5) & ~(T > 1.5), T, -T)),
        ("np.where(x != 1.05, 1.0, 0.0) + (x > 1) * 2",
         np.where(T != 1.05, 1.0, 0.0) + (T > 1) * 2.0),
        ("(1.0 if x > 1 else 2.0) + abs(-x) + max(x, 1) + np.maximum(x, 1)",
         np.where(T > 1, 1.0, 2.0) + T + 2 * np.maximum(T, 1)),
        ("np.arctan2(x, 2.0) + math.atan(x) + np.power(x, 1.5)",
         np.arctan2(T, 2.0) + np.arctan(T) + T**1.5),
        ("0.5 < x <= 1.5", ((T > 0.5) & (T <= 1.5)).astype(float)),
        ("x % 0.3", T % 0.3),
        ("np.multiply(np.add(x, 1), np.subtract(x, 2)) / np.divide(x, 3) + np.negative(x)",
         np.multiply(np.add(T, 1), np.subtract(T, 2)) / np.divide(T, 3) - T),
        ("np.reciprocal(x) + np.exp2(x) + np.mod(x, 0.7) + np.remainder(-x, 0.7)",
         1 / T + 2**T + np.mod(T, 0.7) + np.remainder(-T, 0.7)),
        ("np.heaviside(x - 1.05, 0.5) + np.zeros_like(x) + np.ones_like(x) + np.full_like(x, 3)",
         np.heaviside(T - 1.05, 0.5) + 4.0),
    ],
)  # fmt: skip
def test_expressions(expr: str, expected: np.ndarray) -> None:
    np.testing.assert_allclose(_eval(expr, [], x=T), expected, rtol=1e-13)


def test_locals_augmented_loops_helpers_lambdas_and_unpacking() -> None:
    src = '''
def square_plus(u, params):
    return u * u + params[0]

def equation(x, params):
    """A docstring."""
    a, b = params[1:3]
    c: float = params[3]
    scale = lambda z: z * c
    total = 0.0
    for k in range(1, 4):
        total += params[k] * x ** k
    total *= 0.5
    return square_plus(scale(total), params) + a - b
'''
    p = np.array([0.3, -1.2, 0.7, 2.5])
    total = 0.5 * (p[1] * T + p[2] * T**2 + p[3] * T**3)
    expected = (total * p[3]) ** 2 + p[0] + p[1] - p[2]
    np.testing.assert_allclose(ndvm.from_numpy(src).eval(p, x=T), expected, rtol=1e-13)


def test_annotations_and_inputs_order() -> None:
    src = "def f(s: np.ndarray, temp: np.ndarray, params: np.ndarray) -> np.ndarray:\n" \
          "    return params[0] * s - temp\n"
    assert ndvm.from_numpy(src).inputs == ("s", "temp")
    assert ndvm.from_numpy(src, inputs=["temp", "s"]).inputs == ("temp", "s")
    renamed = ndvm.from_numpy(src, inputs=["strain", "T"])  # one new name per argument
    assert renamed.inputs == ("strain", "T")
    np.testing.assert_allclose(renamed.eval(np.array([2.0]), strain=T, T=T), T)
    with pytest.raises(CompileError, match="do not name the function's 2 data"):
        ndvm.from_numpy(src, inputs=["s"])
    assert ndvm.from_numpy("params[0] * q + r * q").inputs == ("q", "r")


def test_parameter_vector_named_otherwise() -> None:
    by_position = ndvm.from_numpy("def f(x, v, p):\n    return p[0] * x + p[1] * v\n")
    assert by_position.inputs == ("x", "v") and by_position.params == ("p0", "p1")
    named = ndvm.from_numpy("def f(c, x):\n    return c[0] * x\n", params="c")
    assert named.inputs == ("x",) and named.params == ("p0",)
    no_params = ndvm.from_numpy("def f(x, y):\n    return x * y\n")
    assert no_params.inputs == ("x", "y") and no_params.params == ()


def test_init_n_params_and_negative_index() -> None:
    prog = ndvm.from_numpy("params[-1] * x + params[1]", n_params=4, init=[1, 2, 3, 4])
    assert prog.params == ("p1", "p3")  # the indices read, ascending
    np.testing.assert_allclose(prog.init_theta(), [2, 4])
    with pytest.raises(CompileError, match="needs the vector's length"):
        ndvm.from_numpy("params[-1] * x")


def test_translation_is_let_star_of_fresh_names() -> None:
    skel = translate("def f(x, params):\n    exp = params[0] * x\n    return np.exp(exp)\n")
    assert skel.scheme == "(let* ((exp%1 (* p0 x))) (exp exp%1))"


def _f(body: str) -> str:
    """A skeleton function around ``body`` (its lines at 4 spaces; body line 1 is line 2)."""
    return "def f(x, params):\n    " + body.replace("\n", "\n    ") + "\n"


HOSTILE = [
    ("import os\ndef f(x, params):\n    return x\n", "import", (1, 1)),
    (_f("import os\nreturn x"), "import", (2, 5)),
    (_f("return __import__('os').system('true')"), "dunder", (2, 12)),
    (_f("return open('/tmp/ndvm-pwned', 'w')"), "'open'", (2, 12)),
    (_f("return x.__class__.__bases__[0]"), "dunder", None),
    (_f("return np.random.rand(3)[0] * x"), "attribute access", None),
    (_f("return np.sum(x) * params[0]"), "reduces over the data", (2, 12)),
    (_f("return np.mean(x)"), "reduces over the data", None),
    (_f("g = lambda: exec('1')\nreturn g()"), "'exec'", None),
    (_f("g = lambda: (yield)\nreturn x"), "yield", None),
    (_f("return eval('x')"), "'eval'", (2, 12)),
    (_f("while True:\n    pass\nreturn x"), "while", (2, 5)),
    (_f("return sum([v for v in x])"), "list comprehension", None),
    (_f("return x * 1e999"), "too large", None),
    (_f("return x * " + "9" * 5000), "syntax error", None),
    (_f("return f(x, params)"), "recursive", None),
    (_f("for i in range(10 ** 9):\n    x = x + 1\nreturn x"), "integer literal", None),
    (_f("for i in range(10000):\n    for j in range(10000):\n        x = x + 1\nreturn x"),
     "unroll", None),
    (_f("if x > 0:\n    return x\nreturn -x"), "if statement", (2, 5)),
    (_f("return x if x else 'a'"), "not a number", None),
    (_f("return x @ x"), "matrix product", None),
    (_f("return x[0]"), "only for the parameter vector", None),
    (_f("return params"), "used as a number", None),
    (_f("global y\nreturn x"), "global", None),
    ("@decorate\ndef f(x, params):\n    return x\n", "decorator", None),
    ("def f(x, params, *rest):\n    return x\n", "positional", None),
    (_f("return getattr(np, 'sum')(x)"), "call of an expression", None),
    (_f("return (lambda: 0)()"), "call of an expression", None),
    (_f("return [x][0]"), "list", (2, 12)),
    ("x +", "syntax error", (1, 4)),
    ("", "no function", None),
]  # fmt: skip


@pytest.mark.parametrize(("source", "match", "where"), HOSTILE)
def test_hostile_skeletons_are_typed_errors_and_nothing_runs(
    source: str, match: str | None, where: tuple[int, int] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Python code was executed")

    with monkeypatch.context() as patch, pytest.raises(CompileError) as info:
        patch.setattr(builtins, "exec", refuse)
        patch.setattr(builtins, "eval", refuse)
        ndvm.from_numpy(source)
    message = str(info.value)
    assert "\n" not in message
    if match is not None:
        assert match in message
    if where is not None:
        assert (info.value.line, info.value.column) == where
    assert not Path("/tmp/ndvm-pwned").exists()


@pytest.mark.parametrize(
    "source",
    [
        "x" + " + x" * 100_000,
        "-" * 100_000 + "x",
        "(" * 100_000 + "x" + ")" * 100_000,
        "x" + " ** x" * 100_000,
        "a if b else " * 100_000 + "c",
        "np.sin(" * 50_000 + "x" + ")" * 50_000,
        "def f(x, params):\n" + "".join(f"    x = np.sin(x{' + x' * 300})\n" for _ in range(3))
        + "    return x\n",
    ],
)
def test_deep_and_huge_expressions_are_compile_errors(source: str) -> None:
    start = time.perf_counter()
    with pytest.raises(CompileError):
        ndvm.from_numpy(source)
    assert time.perf_counter() - start < 10.0


def test_huge_source_is_refused_before_parsing() -> None:
    with pytest.raises(CompileError, match="longer than"):
        ndvm.from_numpy("x + " * 100_000 + "x")


def test_exponential_helper_inlining_is_bounded() -> None:
    defs = ["def h0(u, params):\n    return u * params[0]\n"]
    for k in range(1, 30):
        call = f"h{k - 1}(u, params) + h{k - 1}(-u, params)"
        defs.append(f"def h{k}(u, params):\n    return {call}\n")
    src = "".join(defs) + "def equation(x, params):\n    return h29(x, params)\n"
    with pytest.raises(CompileError, match="nested deeper|more than"):
        ndvm.from_numpy(src)


def test_helpers_inside_deep_expressions_are_a_compile_error() -> None:
    def wrap(expr: str) -> str:
        for _ in range(95):
            expr = f"np.sin({expr})"
        return expr

    defs = ["def h0(u, params):\n    return " + wrap("u") + "\n"]
    for k in range(1, 16):
        defs.append(f"def h{k}(u, params):\n    return " + wrap(f"h{k - 1}(u, params)") + "\n")
    src = "".join(defs) + "def equation(x, params):\n    return h15(x, params)\n"
    with pytest.raises(CompileError, match="too deeply"):
        ndvm.from_numpy(src)


def test_power_towers_are_not_computed_while_reading() -> None:
    """Python itself would spend forever on 10 ** 10 ** 10; reading it computes nothing."""
    start = time.perf_counter()
    prog = ndvm.from_numpy("def f(x, params):\n    return params[0] * x + 10 ** 10 ** 10\n")
    assert time.perf_counter() - start < 5.0
    assert np.all(np.isinf(prog.eval(np.array([1.0]), x=T)))


def test_closures_bind_late_as_python() -> None:
    src = (
        "def equation(x, params):\n"
        "    a = params[0] * x\n"
        "    g = lambda z: z + a\n"
        "    def h(z):\n"
        "        return z * a\n"
        "    a = a + 1.0\n"
        "    return g(x) + h(2.0)\n"
    )
    p = np.array([0.5])
    a = p[0] * T + 1.0  # the value of a when g and h are called
    np.testing.assert_allclose(ndvm.from_numpy(src).eval(p, x=T), T + a + 2.0 * a, rtol=1e-14)


@pytest.mark.parametrize(
    "body",
    [
        "a = x\na += 1.0\nreturn a + x",  # a and x are one array in NumPy
        "a = x * 2.0\nb = a\na *= 3.0\nreturn b",
        "y = helper(x)\nreturn x + y",  # the helper changes its caller's array
    ],
)
def test_in_place_update_of_a_shared_array_is_a_compile_error(body: str) -> None:
    helper = "def helper(u):\n    u += 1.0\n    return u\n\n"
    with pytest.raises(CompileError, match="change both in place"):
        ndvm.from_numpy(helper + _f(body))


def test_in_place_updates_of_unshared_arrays_equal_numpy() -> None:
    src = _f("x += 1.0\na = x * params[0]\na -= x\nb = a\nb = b + 1.0\na *= 2.0\n"
             "c = helper(a * 1.0)\nreturn a + b + c + x")
    src = "def helper(u):\n    u += 1.0\n    return u\n\n" + src
    x = T.copy()
    namespace = {"np": np, "__builtins__": {}}
    exec(src, namespace)  # the test's reference only: NumPy's in-place semantics
    expected = namespace["f"](x, np.array([1.5]))
    np.testing.assert_allclose(ndvm.from_numpy(src).eval(np.array([1.5]), x=T), expected,
                               rtol=1e-14)
