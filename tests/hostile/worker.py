"""Runs hostile cases in this process and prints one JSON line per case (the supervisor's
worker): ``python -m tests.hostile.worker BACKEND FIRST`` runs ``CASES[FIRST:]``."""

from __future__ import annotations

import contextlib
import io
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from tests.hostile.corpus import CASES, LIMITS, Case

import ndvm


def _error(exc: BaseException) -> dict[str, Any]:
    typed = isinstance(exc, ndvm.NdvmError)
    return {
        "outcome": "error" if typed else "untyped",
        "cls": [c.__name__ for c in type(exc).__mro__],
        "line": getattr(exc, "line", None),
        "message": str(exc)[:300],
    }


def run_api(case: Case, backend: str) -> dict[str, Any]:
    limits = ndvm.Limits(**{**LIMITS, **case.limits})
    prog = ndvm.compile(
        case.source, case.params, tuple(case.inputs), backend=backend, limits=limits
    )
    res = prog.evaluate(case.theta, case.inputs)
    if res.numeric and case.grad:
        res = prog.evaluate(case.theta, case.inputs, grad=True)
    printed = repr(prog.eval(case.theta, **case.inputs))
    printed += repr(res.value) + str(res.value) + "".join(str(e) for _, e in res.errors)
    if not res.numeric:  # structural lanes: pickling and equality never expand sharing
        back = pickle.loads(pickle.dumps(res.value))
        assert repr(back) == repr(res.value)
    return {
        "outcome": "value",
        "status": np.asarray(res.status).reshape(-1).tolist(),
        "lane_errors": [type(e).__name__ for _, e in res.errors],
        "lane_lines": [e.line for _, e in res.errors],
        "printed": len(printed),
    }


def run_cli(case: Case) -> dict[str, Any]:
    from ndvm.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        src, csv = Path(tmp, "prog.scm"), Path(tmp, "data.csv")
        src.write_text(case.source, encoding="utf-8")
        csv.write_text(case.csv, encoding="utf-8")
        argv = [a.replace("{src}", str(src)).replace("{csv}", str(csv)) for a in case.cli]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exc:  # argparse
                rc = exc.code if isinstance(exc.code, int) else 2
    lines = [ln for ln in err.getvalue().strip().splitlines() if "warning:" not in ln]
    one_line = rc == 0 or (len(lines) == 1 and "Traceback" not in err.getvalue())
    if rc == 0:
        return {"outcome": "value", "status": [], "lane_errors": [], "lane_lines": [], "printed": 0}
    return {
        "outcome": "error" if one_line else "untyped",
        "cls": ["NdvmError"] if one_line else ["CliTraceback"],
        "line": None,
        "message": err.getvalue()[-300:],
    }


def run_case(case: Case, backend: str) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        out = run_cli(case) if case.cli else run_api(case, backend)
    except Exception as exc:  # noqa: BLE001 - an untyped error is what the corpus looks for
        out = _error(exc)
    out["name"] = case.name
    out["elapsed"] = time.monotonic() - t0
    return out


def main() -> int:
    backend, first = sys.argv[1], int(sys.argv[2])
    for case in CASES[first:]:
        print(json.dumps(run_case(case, backend)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
