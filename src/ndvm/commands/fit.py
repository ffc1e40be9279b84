"""``ndvm fit``: calibrate a program's parameters to columns of a CSV file.

ndvm fit PROGRAM --data FILE.csv --x COL [--x COL ...] --y COL [--starts 16] [--steps 200]
         [--optimizer auto] [--loss mse] [--fix NAME=VALUE] [--json] [--plot out.png]
         [--backend NAME] [--allow-unconverged]

Exit status: 0 for a fit that converged; 1 when it did not (not converged, not identifiable,
every start failed, or a limit stopped the whole run: the verdict on stderr, the values still
printed when a start left one); 2 for an error in the program, the data or the options (one
line, no traceback).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ndvm.commands.common import (
    HelpFormatter,
    add_limit_options,
    check_inputs,
    json_safe,
    limits_from,
)
from ndvm.errors import LimitExceeded, NdvmError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fit",
        help="calibrate a program's parameters to CSV data",
        description="Fit a program's parameters to columns of a CSV file: many starts run as "
        "lanes of one evaluation; Levenberg-Marquardt in the runtime for mse, Adam then an "
        "L-BFGS polish of the best starts for gaussian_nll. Prints the fitted values with "
        "standard errors (curve_fit's pcov for mse) and whether the fit converged.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("program", help="program file")
    p.add_argument("--data", required=True, help="CSV file with a header row")
    p.add_argument(
        "--x",
        required=True,
        action="append",
        metavar="COL",
        help="column bound to a program input of the same name (repeat for several inputs)",
    )
    p.add_argument("--y", required=True, metavar="COL", help="column with the observed values")
    p.add_argument(
        "--as",
        dest="input_name",
        action="append",
        default=None,
        metavar="NAME",
        help="input name for the matching --x (default: the column's name)",
    )
    p.add_argument("--starts", type=int, default=None,
                   help="independent starts (lanes; default 16, run in waves: the first 4 "
                        "alone when they agree, as ndvm.calibrate)")  # fmt: skip
    p.add_argument("--steps", type=int, default=200,
                   help="iterations (LM, L-BFGS) or Adam steps")  # fmt: skip
    p.add_argument("--loss", default="mse", choices=("mse", "gaussian_nll"), help="loss")
    p.add_argument(
        "--optimizer",
        default="auto",
        choices=("auto", "lm", "adam", "lbfgs", "adam+lbfgs"),
        help="auto: Levenberg-Marquardt for mse, else Adam then L-BFGS on the best starts",
    )
    p.add_argument("--polish", type=int, default=None, help="starts L-BFGS polishes (auto: 8)")
    p.add_argument(
        "--fix",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="hold a parameter at a value (repeat for several): reported as fixed, no "
        "standard error; the others' errors from the free parameters alone",
    )
    p.add_argument("--lr", type=float, default=0.05, help="Adam learning rate")
    p.add_argument("--seed", type=int, default=0, help="seed for the start jitter")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--allow-unconverged",
        action="store_true",
        help="exit 0 when the fit did not converge or is not identifiable (still warns)",
    )
    p.add_argument("--plot", default=None, metavar="OUT.png", help="save a plot (matplotlib)")
    p.add_argument("--backend", default=None, help="reference or native (default: auto)")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: on a terminal for long fits)",
    )
    add_limit_options(p)
    p.set_defaults(func=run)


def check_numbers(args: argparse.Namespace) -> None:
    """Every numeric option in range (a one-line ``ConfigError``, exit status 2)."""
    from ndvm.errors import ConfigError
    from ndvm.search import options

    options.count("--starts", args.starts, optional=True)
    options.count("--steps", args.steps, minimum=0)
    options.count("--polish", args.polish, minimum=0, optional=True)
    options.count("--seed", args.seed, minimum=0)
    if not 0 < args.lr < math.inf:  # NaN fails too
        raise ConfigError(f"--lr must be a finite number > 0, got {args.lr!r}")


def read_columns(path: str, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Named float columns of a CSV file with a header row (``ndvm.tasks.columns.read_csv``:
    errors name the file, line and column)."""
    from ndvm.tasks.columns import read_csv

    return read_csv(path, names)


def progress_bar(total: int) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """(update, close) for a progress display: tqdm, else a stderr line."""
    try:
        from tqdm import tqdm

        bar = tqdm(total=total, unit="step", file=sys.stderr, leave=False, desc="fit")

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


def _bindings(args: argparse.Namespace) -> dict[str, str]:
    """{input name: column} from --x (and --as)."""
    names = args.input_name or list(args.x)
    if len(names) != len(args.x):
        raise NdvmError(f"--as given {len(names)} time(s) for {len(args.x)} --x column(s)")
    if len(set(names)) != len(names):
        raise NdvmError(f"an input is bound twice: {', '.join(names)}")
    return dict(zip(names, args.x))


def parse_fixed(items: list[str] | None) -> dict[str, float]:
    """{name: value} from ``--fix NAME=VALUE`` arguments."""
    out: dict[str, float] = {}
    for item in items or ():
        name, eq, value = item.partition("=")
        name = name.strip()
        try:
            out[name] = float(value) if eq and name else float("nan")
        except ValueError:
            out[name] = float("nan")
        if out[name] != out[name]:
            raise NdvmError(f"--fix {item!r}: give NAME=VALUE with a number, e.g. --fix K=0.06")
    return out


def _fit(
    args: argparse.Namespace, source: str, binds: dict[str, str], cols: dict[str, np.ndarray]
) -> tuple[Any, float]:
    import ndvm

    program = ndvm.compile(
        source, inputs=tuple(binds), backend=args.backend, limits=limits_from(args)
    )
    show = args.progress
    if show is None:
        show = sys.stderr.isatty() and args.steps * (args.starts or 16) >= 5000
    update, close = progress_bar(args.steps + 1) if show else (None, lambda: None)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ndvm.calibrate.ConvergenceWarning)
            cal = ndvm.calibrate(
                program,
                {name: cols[col] for name, col in binds.items()},
                cols[args.y],
                loss=args.loss,
                starts=args.starts,
                steps=args.steps,
                optimizer=args.optimizer,
                polish=args.polish,
                lr=args.lr,
                seed=args.seed,
                callback=update,
                fixed=parse_fixed(args.fix),
            )
    finally:
        close()
    return cal, time.perf_counter() - t0


def _print_text(cal: Any, args: argparse.Namespace, elapsed: float) -> None:
    se = cal.stderr or {}
    r2 = "" if cal.r2 is None else f", R² {cal.r2:.6g}"
    print(f"loss: {cal.loss:.6g}  ({args.loss}, best of {len(cal.status)} start(s){r2})")
    for pname, v in cal.params.items():
        err = se.get(pname)
        tail = "  (fixed)" if pname in cal.fixed else "" if err is None else f"  ± {err:.3g}"
        print(f"{pname} = {v:.10g}{tail}")
    if cal.n_failed:
        print(f"{cal.n_failed} start(s) failed: {_reasons(cal)}", file=sys.stderr)
    print(f"{elapsed:.3f} s, {cal.nit} iterations, {cal.nfev} evaluations", file=sys.stderr)


def failure_groups(status: list[str]) -> list[dict[str, Any]]:
    """The failed starts grouped by reason, most frequent first (ties: first seen first):
    ``{"reason", "count", "starts"}``."""
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(status):
        if s != "ok":
            groups.setdefault(s.removeprefix("failed: "), []).append(i)
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    return [{"reason": r, "count": len(ix), "starts": ix} for r, ix in ranked]


def _reasons(cal: Any) -> str:
    """Each reason once, with its count: ``reason (64 starts)``; ``; `` between reasons."""
    return "; ".join(f"{g['reason']} ({g['count']} of {len(cal.status)} starts)"
                     for g in failure_groups(list(cal.status)))  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from ndvm.extras import require

    if args.plot:
        require("ndvm fit --plot", "plot")  # before fitting: a missing extra costs nothing
    try:
        check_numbers(args)
    except NdvmError as exc:
        print(f"ndvm fit: {exc}", file=sys.stderr)
        return 2
    try:
        with open(args.program, encoding="utf-8") as fh:
            source = fh.read()
    except OSError as exc:
        print(f"{args.program}: error: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        binds = _bindings(args)
        check_inputs(source, binds, complete=True)
    except NdvmError as exc:
        print(exc.located(args.program), file=sys.stderr)
        return 2
    try:  # problems with the data are reported against the data file
        cols = read_columns(args.data, (*dict.fromkeys(binds.values()), args.y))
    except NdvmError as exc:
        print(str(exc), file=sys.stderr)  # names the file (and line, column)
        return 2
    try:
        cal, elapsed = _fit(args, source, binds, cols)
    except LimitExceeded as exc:  # a limit of the whole run (the payload cap): the run failed
        print(exc.located(args.program), file=sys.stderr)
        return 1
    except NdvmError as exc:
        print(exc.located(args.program), file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"{args.program}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print(
            f"ndvm fit: error: out of memory for --steps {args.steps} x --starts "
            f"{args.starts} (the loss history has one entry per step and start)",
            file=sys.stderr,
        )
        return 2
    out = cal.to_dict()
    out["failures"] = failure_groups(list(cal.status))
    out["elapsed_s"] = elapsed
    if args.json:
        print(json.dumps(json_safe(out), allow_nan=False))
    if not cal.ok:  # no start left a value: the reasons, each once, and no numbers
        print(f"{args.program}: error: every start failed: {_reasons(cal)}", file=sys.stderr)
        return 1
    if not args.json:
        _print_text(cal, args, elapsed)
    if not cal.success:
        print(f"warning: {cal.message}", file=sys.stderr)
    sys.stdout.flush()  # the result is out before plotting can fail
    if args.plot:
        cal.plot(args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0 if cal.success or args.allow_unconverged else 1
