"""Time bounds for sympy calls: ``time_limit`` and ``simplified``.

sympy's ``simplify`` has no time bound of its own (``(S + a)**3000`` takes about 19 s, a
stored ``(S + a)**100000`` minutes). A worker thread cannot be stopped and a subprocess per
expression costs an interpreter start and a sympy import (about a second) for every row of a
report, so the bound is ``SIGALRM`` (``setitimer``) on the main thread: the handler raises
between bytecodes and the caller falls back to the unsimplified expression. A single long C
call (a huge integer power) is not interrupted by a signal, so a precheck refuses the shapes
that need one before sympy starts: more than ``MAX_OPS`` operations, an integer exponent
above ``MAX_POWER`` on a compound base, an integer of more than ``MAX_DIGITS`` digits. Off
the main thread (or without ``setitimer``) no timer can be set, and ``simplified`` returns
its input unchanged. ``deadline`` (the export's bound) is ``time_limit`` for any thread: off
the main thread a timer thread raises the exception in the bounded one instead of a signal.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

SECONDS = 2.0
MAX_OPS = 40
MAX_POWER = 16
MAX_DIGITS = 60


class SympyTimeout(Exception):
    """A sympy call ran past its time bound (caught by the callers here; never user-facing)."""


def can_bound() -> bool:
    """Whether ``time_limit`` can interrupt this thread (POSIX ``setitimer``, main thread)."""
    main = threading.current_thread() is threading.main_thread()
    return main and hasattr(signal, "setitimer")


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``SympyTimeout`` in the block after ``seconds`` (no limit where ``can_bound()``
    is false). An interval timer already set (pytest-timeout, the caller's own) is restored
    afterwards with its remaining time, and fires first when it is due first."""
    if not can_bound():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise SympyTimeout

    start = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, expire)
    old_left, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    if old_left and old_left < seconds:  # the outer timer is due first: let it fire as it would
        signal.signal(signal.SIGALRM, old_handler)
        signal.setitimer(signal.ITIMER_REAL, old_left, old_interval)
        old_left = 0.0
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_left:
            left = max(old_left - (time.monotonic() - start), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


def small_enough(expr: Any) -> bool:
    """The precheck: few operations, no big integer power of a compound base, no huge integer
    (the shapes on which one sympy step can run long inside C, beyond a signal's reach)."""
    import sympy

    if sympy.count_ops(expr) > MAX_OPS:
        return False
    for p in expr.atoms(sympy.Pow):
        e = p.exp
        if e.is_Integer and abs(int(e)) > MAX_POWER and not p.base.is_Atom:
            return False
    return all(len(str(abs(int(n)))) <= MAX_DIGITS for n in expr.atoms(sympy.Integer))


def simplified(expr: Any, seconds: float = SECONDS) -> Any:
    """``sympy.simplify(expr)`` within ``seconds``, else ``expr`` unchanged (also when the
    precheck refuses it or no timer can be set)."""
    import sympy

    if not can_bound() or not small_enough(expr):
        return expr
    try:
        with time_limit(seconds):
            return sympy.simplify(expr)
    except SympyTimeout:
        return expr


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise ``SympyTimeout`` in the block after ``seconds``, on any thread: ``time_limit``
    where it can bound this thread, else a timer thread that raises it in this one
    (``PyThreadState_SetAsyncExc``: between bytecodes, as a signal handler would)."""
    if can_bound():
        with time_limit(seconds):
            yield
        return
    import ctypes

    set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc
    ident = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    state = {"done": False, "fired": False}

    def expire() -> None:
        with lock:
            if not state["done"]:
                state["fired"] = True
                set_async(ident, ctypes.py_object(SympyTimeout))

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            state["done"] = True
        timer.cancel()
        if state["fired"]:  # not delivered yet (the block was ending): deliver it here
            set_async(ident, None)
            if sys.exc_info()[0] is None:
                raise SympyTimeout
