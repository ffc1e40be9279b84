"""An independent reference for NumPy skeletons' gradients: forward-mode dual numbers.

``Dual(value, grad)`` carries d value / d params exactly; ``DualNumpy`` is a stand-in for the
``np`` module whose functions compute values with NumPy and derivatives by their textbook
rules. A skeleton is run on it point by point (so conditional expressions see scalars), in a
namespace of nothing but ``np`` and ``range`` (the test's reference only: ndvm never runs it).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class Dual:
    __slots__ = ("v", "g")

    def __init__(self, v: float, g: np.ndarray) -> None:
        self.v = float(v)
        self.g = g

    @staticmethod
    def lift(x: Any, n: int) -> Dual:
        return x if isinstance(x, Dual) else Dual(float(x), np.zeros(n))

    def _n(self) -> int:
        return self.g.shape[0]

    def __add__(self, o: Any) -> Dual:
        o = Dual.lift(o, self._n())
        return Dual(self.v + o.v, self.g + o.g)

    __radd__ = __add__

    def __sub__(self, o: Any) -> Dual:
        o = Dual.lift(o, self._n())
        return Dual(self.v - o.v, self.g - o.g)

    def __rsub__(self, o: Any) -> Dual:
        return Dual.lift(o, self._n()) - self

    def __mul__(self, o: Any) -> Dual:
        o = Dual.lift(o, self._n())
        return Dual(self.v * o.v, self.g * o.v + o.g * self.v)

    __rmul__ = __mul__

    def __truediv__(self, o: Any) -> Dual:
        o = Dual.lift(o, self._n())
        return Dual(self.v / o.v, (self.g * o.v - o.g * self.v) / (o.v * o.v))

    def __rtruediv__(self, o: Any) -> Dual:
        return Dual.lift(o, self._n()) / self

    def __neg__(self) -> Dual:
        return Dual(-self.v, -self.g)

    def __pos__(self) -> Dual:
        return self

    def __pow__(self, o: Any) -> Dual:
        return DualNumpy.power(self, o)

    def __rpow__(self, o: Any) -> Dual:
        return DualNumpy.power(Dual.lift(o, self._n()), self)

    def __lt__(self, o: Any) -> bool:
        return self.v < _v(o)

    def __le__(self, o: Any) -> bool:
        return self.v <= _v(o)

    def __gt__(self, o: Any) -> bool:
        return self.v > _v(o)

    def __ge__(self, o: Any) -> bool:
        return self.v >= _v(o)


def _v(x: Any) -> float:
    return x.v if isinstance(x, Dual) else float(x)


def _unary(f: Any, df: Any) -> Any:
    def apply(x: Any) -> Any:
        if not isinstance(x, Dual):
            return f(float(x))
        return Dual(f(x.v), x.g * df(x.v))

    return staticmethod(apply)


class DualNumpy:
    """The ``np`` of the reference: NumPy values, textbook derivatives."""

    pi = np.pi
    e = np.e
    exp = _unary(np.exp, np.exp)
    log = _unary(np.log, lambda v: 1.0 / v)
    sqrt = _unary(np.sqrt, lambda v: 0.5 / np.sqrt(v))
    sin = _unary(np.sin, np.cos)
    cos = _unary(np.cos, lambda v: -np.sin(v))
    tan = _unary(np.tan, lambda v: 1.0 / np.cos(v) ** 2)
    tanh = _unary(np.tanh, lambda v: 1.0 - np.tanh(v) ** 2)
    arctan = _unary(np.arctan, lambda v: 1.0 / (1.0 + v * v))
    abs = _unary(np.abs, np.sign)
    sign = _unary(np.sign, lambda v: 0.0)

    @staticmethod
    def power(a: Any, b: Any) -> Any:
        if not isinstance(a, Dual) and not isinstance(b, Dual):
            return np.power(float(a), float(b))
        n = (a if isinstance(a, Dual) else b).g.shape[0]
        a, b = Dual.lift(a, n), Dual.lift(b, n)
        v = np.power(a.v, b.v)
        g = a.g * (b.v * np.power(a.v, b.v - 1.0))
        if np.any(b.g != 0.0):
            g = g + b.g * (v * np.log(a.v))
        return Dual(v, g)

    @staticmethod
    def where(c: bool, a: Any, b: Any) -> Any:
        return a if c else b

    @staticmethod
    def maximum(a: Any, b: Any) -> Any:
        return a if _v(a) >= _v(b) else b

    @staticmethod
    def minimum(a: Any, b: Any) -> Any:
        return a if _v(a) <= _v(b) else b

    @staticmethod
    def clip(x: Any, lo: Any, hi: Any) -> Any:
        return DualNumpy.minimum(DualNumpy.maximum(x, lo), hi)


def reference(source: str, name: str, args: list[np.ndarray], params: np.ndarray) -> Any:
    """(values [N], summed gradient [P]) of the skeleton by dual numbers, point by point."""
    namespace: dict[str, Any] = {"np": DualNumpy, "__builtins__": {"range": range}}
    exec(source, namespace)  # the test's reference only: trusted, generated text
    fn = namespace[name]
    p = len(params)
    duals = [Dual(v, np.eye(p)[i]) for i, v in enumerate(params)]
    values, grad = [], np.zeros(p)
    scale = np.zeros(p)
    for row in zip(*args):
        out = Dual.lift(fn(*[float(x) for x in row], duals), p)
        values.append(out.v)
        grad += out.g
        scale += np.abs(out.g)
    return np.array(values), grad, scale
