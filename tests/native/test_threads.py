"""Independent evaluations on several threads give results bitwise equal to serial runs."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import ndvm

pytestmark = pytest.mark.native

ROOT = Path(__file__).resolve().parents[2]
Y = np.random.default_rng(11).normal(size=(80, 2)).cumsum(axis=0)
X = np.linspace(0.0, 4.0, 44)
CASES = [
    ((ROOT / "examples" / "kalman80.scm").read_text(), {"Y": ndvm.const(Y)}),
    ("(* a (exp (- (* b x))) (cos (+ (* c x) d)))", {"x": X}),
    ("(if (> a 0) (list a (* a b)) (* a b))", {}),
    ("(let loop ((k 0) (s a)) (if (> (abs s) 3) (+ s k) (loop (+ k 1) (+ (* s 1.7) b))))", {}),
]


def _run(client: str, source: str, inputs: dict, theta: np.ndarray) -> tuple:
    prog = ndvm.compile(source, inputs=tuple(inputs), backend=client, strict=False)
    try:
        r = prog.evaluate(theta, inputs, grad=True)
        return (r.value.tobytes(), r.grad.tobytes(), r.status.tobytes())
    except ndvm.NdvmError:
        r = prog.evaluate(theta, inputs, grad=False)
        return (repr(r.value.tolist()), r.status.tobytes())


def test_native_threads_bitwise_equal_serial(client: str) -> None:
    rng = np.random.default_rng(5)
    jobs = []
    for source, inputs in CASES:
        prog = ndvm.compile(source, inputs=tuple(inputs), backend="reference")
        for B in (1, 7, 32):
            jobs.append((client, source, inputs, rng.normal(size=(B, len(prog.params)))))
    serial = [_run(*job) for job in jobs]
    results: dict[tuple[int, int], tuple] = {}
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for rep in range(3):
                for k in range((t + rep) % len(jobs), len(jobs)):
                    results[(t, k, rep)] = _run(*jobs[k])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert results
    for (_, k, _), got in results.items():
        assert got == serial[k]
