"""Ctrl-C stops the native core within milliseconds: an evaluation and an in-runtime fit.

The core polls Python's pending signals (every 20 ms of work) and raises KeyboardInterrupt in
the calling thread; the context stays usable afterwards.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.native

CHILD = textwrap.dedent(
    """
    import sys, numpy as np, ndvm
    long = "(let loop ((k 0) (s 0)) (if (= k 200000000) s (loop (+ k 1) (+ s (* a a)))))"
    limits = ndvm.Limits(max_steps=10**12, max_depth=10**6)
    prog = ndvm.compile(long, backend=sys.argv[1], limits=limits)
    x = np.linspace(0, 1, 8)
    fit_prog = ndvm.compile(
        "(let loop ((k 0) (s 0)) (if (= k 20000) (* s a x) (loop (+ k 1) (+ s 1))))",
        inputs=("x",), backend=sys.argv[1], limits=limits,
    )
    print("ready", flush=True)
    try:
        if sys.argv[2] == "eval":
            prog.value_and_grad([1.0])
        else:
            ndvm.calibrate(fit_prog, {"x": x}, x, optimizer="adam", steps=10**6)
        print("not interrupted", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    print(ndvm.compile("(* a 2)", backend=sys.argv[1]).eval([3.0]), flush=True)
    """
)


@pytest.mark.parametrize("what", ["eval", "fit"])
@pytest.mark.parametrize("backend", ["native", "vm"])
def test_ctrl_c_stops_the_core_and_leaves_it_usable(what: str, backend: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, backend, what],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # the child imports the ndvm this process runs (installed, or PYTHONPATH's)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != "ready":
            proc.kill()
            pytest.fail(f"the child did not start: {line!r} {proc.communicate()[1]}")
        time.sleep(0.5)  # inside the runtime by now
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.split() == ["interrupted", "6.0"], (out, err)
    assert elapsed < 10.0  # without the poll the loop would run for minutes
