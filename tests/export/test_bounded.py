"""Time bounds on sympy calls (issue 48): ``ndvm report``'s equations end quickly on the
powers that made ``sympy.simplify`` run for 19 s and past 120 s."""

from __future__ import annotations

import signal
import time

import pytest
from tests.helpers.extras import need

from ndvm.export.bounded import SympyTimeout, simplified, small_enough, time_limit
from ndvm.search.frontier import equation

pytestmark = pytest.mark.sympy


@pytest.mark.parametrize("power", [3000, 100000])
def test_report_equation_of_a_big_power_ends_quickly(power: int) -> None:
    need("sympy")
    start = time.perf_counter()
    out = equation(f"(expt (+ S a) {power})", {"a": 1.5}, ("S",))
    assert time.perf_counter() - start < 5.0
    assert out["equation_symbolic"] == f"(S + a)**{power}"  # unsimplified, as exported
    assert out["equation"] == f"(S + 1.5)**{power}"


def test_small_expressions_are_still_simplified() -> None:
    sp = need("sympy")
    x = sp.Symbol("x", real=True)
    assert simplified(sp.sin(x) ** 2 + sp.cos(x) ** 2) == 1
    assert not small_enough((x + 1) ** 3000)
    assert not small_enough(x + 10**100)


def test_time_limit_interrupts_and_restores_an_outer_timer() -> None:
    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        start = time.perf_counter()
        with pytest.raises(SympyTimeout), time_limit(0.2):
            while time.perf_counter() - start < 3.0:
                pass
        assert time.perf_counter() - start < 1.0
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 3.0 < left <= 5.0  # the outer timer runs on with its remaining time
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert not fired
