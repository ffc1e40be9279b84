"""The in-runtime optimizer with a callback: runs in chunks, calls back after each, and keeps
the one-call semantics where they are defined (a run that fits in one chunk is bitwise it)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.calibrate.conftest import X, damped

import ndvm
from ndvm.backends import registry
from ndvm.calibrate import native

pytestmark = pytest.mark.skipif(
    "native" not in registry.available(), reason="native backend not built"
)


def _fit(steps: int, callback=None, **kw):  # type: ignore[no-untyped-def]
    p, y = damped("native")
    return ndvm.calibrate(
        p,
        {"x": X},
        y,
        starts=4,
        steps=steps,
        optimizer="adam",
        engine="native",
        callback=callback,
        **kw,
    )


def test_callback_after_every_chunk() -> None:
    calls: list[tuple[int, int]] = []
    cal = _fit(3 * native.CHUNK + 5, lambda k, n: calls.append((k, n)))
    n = 3 * native.CHUNK + 6
    assert calls == [(native.CHUNK * i + 1, n) for i in (1, 2, 3)] + [(n, n)]
    assert cal.history.shape == (n, 4) and np.isfinite(cal.history).all()
    # each chunk starts where the last ended: the loss keeps falling across chunk borders
    assert (cal.history[-1] < cal.history[0]).all()
    assert cal.evaluations == 3 * (native.CHUNK + 1) + 6  # a forward at each chunk end


def test_one_chunk_is_bitwise_the_one_call_run() -> None:
    plain = _fit(native.CHUNK)
    chunked = _fit(native.CHUNK, lambda k, n: None)
    np.testing.assert_array_equal(plain.history, chunked.history)
    np.testing.assert_array_equal(plain.all_theta, chunked.all_theta)


def test_failed_lane_stays_failed_across_chunks() -> None:
    p = ndvm.compile(
        "(params (a 0.5) (k 0.3 positive) (c 1.0))\n"
        "(if (and (< c 0) (> a 1.5)) (sqrt -1.0) (* a (exp (- (* k x)))))",
        inputs=("x",),
        backend="native",
    )
    init = np.array([[0.5, 0.3, 1.0], [1.6, 0.3, -1.0]])
    y = 2.0 * np.exp(-0.5 * X)
    kw = dict(starts=2, steps=2 * native.CHUNK, init=init, optimizer="adam", engine="native")
    cal = ndvm.calibrate(p, {"x": X}, y, callback=lambda k, n: None, **kw)
    assert cal.status[0] == "ok" and cal.status[1].startswith("failed")
    assert np.isnan(cal.history[1:, 1]).all() and np.isfinite(cal.history[:, 0]).all()
