"""``ndvm fit``: calibrate a program's parameters to two columns of a CSV file.

ndvm fit PROGRAM --data FILE.csv --x COL --y COL [--starts 256] [--steps 200] [--loss mse]
         [--optimizer adam] [--lr 0.05] [--seed 0] [--json] [--plot out.png] [--backend NAME]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.errors import NdvmError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fit",
        help="calibrate a program's parameters to CSV data",
        description="Fit a program's parameters to columns of a CSV file (many starts as lanes).",
    )
    p.add_argument("program", help="program file")
    p.add_argument("--data", required=True, help="CSV file with a header row")
    p.add_argument("--x", required=True, help="column bound to the program's input")
    p.add_argument("--y", required=True, help="column with the observed values")
    p.add_argument("--as", dest="input_name", default=None, help="input name (default: --x)")
    p.add_argument("--starts", type=int, default=1, help="independent starts (lanes)")
    p.add_argument("--steps", type=int, default=200, help="optimizer steps")
    p.add_argument("--loss", default="mse", choices=("mse", "gaussian_nll"))
    p.add_argument("--optimizer", default="adam", choices=("adam", "lbfgs", "adam+lbfgs"))
    p.add_argument("--lr", type=float, default=0.05, help="Adam learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed for the start jitter")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", default=None, metavar="OUT.png", help="save a plot (matplotlib)")
    p.add_argument("--backend", default=None, help="reference or native (default: auto)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None)
    p.set_defaults(func=run)


def read_columns(path: str, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Named float columns of a CSV file with a header row."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            rows = list(csv.reader(fh))
    except csv.Error as exc:
        raise NdvmError(f"{path}: malformed CSV ({exc})") from None
    if not rows:
        raise NdvmError(f"{path}: empty CSV file")
    if not any(rows[1:]):
        raise NdvmError(f"{path}: no data rows after the header")
    header = [h.strip() for h in rows[0]]
    out = {}
    for name in names:
        if name not in header:
            raise NdvmError(f"{path}: no column {name!r} (columns: {', '.join(header)})")
        i = header.index(name)
        try:
            out[name] = np.array([float(r[i]) for r in rows[1:] if r], dtype=np.float64)
        except (ValueError, IndexError) as exc:
            raise NdvmError(f"{path}: column {name!r} is not numeric ({exc})") from None
    return out


def progress_bar(total: int) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """(update, close) for a progress display: tqdm, else rich, else a stderr line."""
    try:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="step", file=sys.stderr, leave=False)

        def update(k: int, _n: int) -> None:
            bar.update(k - bar.n)

        return update, bar.close
    except ImportError:
        pass
    state = {"last": 0.0}

    def update_line(k: int, n: int) -> None:
        now = time.perf_counter()
        if now - state["last"] > 0.1 or k == n:
            state["last"] = now
            width = 30
            done = int(width * k / max(n, 1))
            print(f"\rfit [{'#' * done}{'.' * (width - done)}] {k}/{n}", end="", file=sys.stderr)

    return update_line, lambda: print("", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    import ndvm
    from ndvm.extras import require

    if args.plot:
        require("ndvm fit --plot", "plot")  # before fitting: a missing extra costs nothing
    try:
        with open(args.program, encoding="utf-8") as fh:
            source = fh.read()
        cols = read_columns(args.data, (args.x, args.y))
        name = args.input_name or args.x
        program = ndvm.compile(source, inputs=(name,), backend=args.backend)
        total = args.steps + 1
        show = args.progress
        if show is None:
            show = sys.stderr.isatty() and args.steps * args.starts >= 5000
        update, close = progress_bar(total) if show else (None, lambda: None)
        t0 = time.perf_counter()
        try:
            cal = ndvm.calibrate(
                program,
                {name: cols[args.x]},
                cols[args.y],
                loss=args.loss,
                starts=args.starts,
                steps=args.steps,
                optimizer=args.optimizer,
                lr=args.lr,
                seed=args.seed,
                callback=update,
            )
        finally:
            close()
        elapsed = time.perf_counter() - t0
    except NdvmError as exc:
        print(exc.located(args.program), file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"{args.program}: error: {exc}", file=sys.stderr)
        return 1
    out = cal.summary()
    out["elapsed_s"] = elapsed
    if args.json:
        print(json.dumps(out))
    else:
        print(f"loss: {cal.loss:.6g}  ({args.loss}, best of {args.starts} start(s))")
        for pname, v in cal.params.items():
            print(f"{pname} = {v:.10g}")
        if out["failed"]:
            print(f"{out['failed']} start(s) failed", file=sys.stderr)
        print(f"{elapsed:.3f} s, {cal.evaluations} evaluations", file=sys.stderr)
    sys.stdout.flush()  # the result is out before plotting can fail
    if args.plot:
        cal.plot(args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0 if cal.ok else 1
