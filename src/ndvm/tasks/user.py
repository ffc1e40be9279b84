"""A task from the user's own data: ``Task`` from arrays or from columns of a CSV file.

    task = ndvm.search.Task.from_arrays(X, y, names=["t", "c"],
                                        binary_operators=["+", "-", "*", "/"],
                                        unary_operators=["exp", "log"])
    ndvm.search.run_search(task, proposer, "runs.db", budget=Budget(seconds=60))

The rows are split at random (seeded) into train / validation / test (60 / 20 / 20 by
default): candidates are calibrated on train, every selection uses validation, and the test
split is only scored. Operators follow PySR's convention (``binary_operators``,
``unary_operators``) and must be numeric primitives of the language with that arity.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ndvm.errors import NdvmError
from ndvm.tasks.base import CalibSpec, SearchSpec, Task, TaskData, regression_score
from ndvm.tasks.grammar import Grammar

DEFAULT_BINARY = ("+", "-", "*", "/")
DEFAULT_UNARY = ("exp", "log", "sqrt", "sin", "cos")
SUCCESS_R2 = 0.99  # validation R² above which a program counts as a success


def _fixed(data: TaskData) -> TaskData:
    return data


def validation_success(metrics: Any, threshold: float = SUCCESS_R2) -> bool:
    return bool(metrics.get("validation_r2", float("-inf")) > threshold)


def check_operators(binary: Sequence[str], unary: Sequence[str]) -> None:
    """Every operator is a numeric primitive (or prelude procedure) taking that many args."""
    from ndvm.prims import PRIMS
    from ndvm.prims.registry import Kind

    for names, arity in ((binary, 2), (unary, 1)):
        for name in names:
            prim = PRIMS.get(name)
            if prim is None or prim.kind not in (Kind.NUMERIC, Kind.PRELUDE):
                raise NdvmError(f"unknown operator {name!r}: not a numeric primitive")
            if not prim.arity.accepts(arity):
                raise NdvmError(
                    f"operator {name!r} takes {prim.arity.describe()} argument(s), not {arity}"
                )


def split_rows(n: int, fractions: Sequence[float], seed: int) -> tuple[np.ndarray, ...]:
    """Seeded train / validation / test row indices (each sorted, none empty)."""
    if len(fractions) != 3 or any(f < 0 for f in fractions) or not 0.99 < sum(fractions) < 1.01:
        raise NdvmError(f"split must be three fractions summing to 1, got {tuple(fractions)}")
    if n < 6:
        raise NdvmError(f"need at least 6 rows to split into train/validation/test, got {n}")
    perm = np.random.default_rng(seed).permutation(n)
    n_va = max(1, int(round(fractions[1] * n)))
    n_te = max(1, int(round(fractions[2] * n)))
    n_tr = n - n_va - n_te
    if n_tr < 2:
        raise NdvmError(f"split {tuple(fractions)} leaves {n_tr} training rows of {n}")
    parts = (perm[:n_tr], perm[n_tr : n_tr + n_va], perm[n_tr + n_va :])
    return tuple(np.sort(p) for p in parts)


def from_arrays(
    X: Any,
    y: Any,
    *,
    names: Sequence[str] | None = None,
    binary_operators: Sequence[str] = DEFAULT_BINARY,
    unary_operators: Sequence[str] = DEFAULT_UNARY,
    split: Sequence[float] = (0.6, 0.2, 0.2),
    seed: int = 0,
    name: str = "data",
    description: str = "",
    steps: int = 100,
    lr: float = 0.05,
    max_size: int = 30,
    loops: bool = False,
) -> Task:
    """A regression task on ``y ~ f(X)``: X ``[N]`` or ``[N, d]``, y ``[N]``."""
    Xa = np.asarray(X, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64).reshape(-1)
    if Xa.ndim == 1:
        Xa = Xa[:, None]
    if Xa.ndim != 2 or Xa.shape[0] != ya.shape[0]:
        raise NdvmError(f"X must be [N] or [N, d] with N = len(y) = {ya.shape[0]}, got {Xa.shape}")
    d = Xa.shape[1]
    cols = list(names) if names is not None else (["x"] if d == 1 else [f"x{i}" for i in range(d)])
    if len(cols) != d or len(set(cols)) != d:
        raise NdvmError(f"names must be {d} distinct input names, got {cols}")
    for i, col in enumerate(cols):
        bad = np.flatnonzero(~np.isfinite(Xa[:, i]))
        if bad.size:
            raise NdvmError(f"input {col!r}: non-finite value in row {int(bad[0])}")
    bad = np.flatnonzero(~np.isfinite(ya))
    if bad.size:
        raise NdvmError(f"target: non-finite value in row {int(bad[0])}")
    check_operators(binary_operators, unary_operators)
    tr, va, te = split_rows(len(ya), split, seed)

    def part(rows: np.ndarray) -> dict[str, np.ndarray]:
        return {c: Xa[rows, i].copy() for i, c in enumerate(cols)}

    data = TaskData(
        part(tr), ya[tr], part(te), ya[te],
        {"n": int(len(ya)), "split": tuple(float(f) for f in split), "seed": seed},
        part(va), ya[va],
    )  # fmt: skip
    grammar = Grammar(
        inputs=tuple(cols), binary=tuple(binary_operators), unary=tuple(unary_operators),
        loop=loops, allow_let=False, max_size=max_size,
    )  # fmt: skip
    prompt = description or (
        f"Regression of a target on {', '.join(cols)} ({len(tr)} training rows); find a "
        "closed-form model."
    )
    return Task(
        name=name,
        description=prompt,
        inputs=tuple(cols),
        build_data=functools.partial(_fixed, data),
        calib=CalibSpec(loss="mse", steps=steps, lr=lr, optimizer="adam", init_scale=1.0),
        score=regression_score,
        success=validation_success,
        search=SearchSpec(grammar, tuple(f"(* a {c})" for c in cols), prompt),
    )


def read_csv(path: str | Path, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """Named float columns of a CSV file with a header row (delimiter sniffed: , ; tab).

    Errors name the file, the column and the 1-based line of a missing, non-numeric or
    non-finite cell."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise NdvmError(f"{p}: error: cannot read data file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise NdvmError(f"{p}: error: not a UTF-8 text file ({exc.reason})") from None
    if "\x00" in text:
        raise NdvmError(f"{p}: error: not a CSV file (NUL byte)")
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        raise NdvmError(f"{p}: error: empty CSV file (expected a header row)")
    try:
        dialect: Any = csv.Sniffer().sniff(lines[0], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(lines, dialect))
    header = [h.strip() for h in rows[0]]
    body = [(i + 2, r) for i, r in enumerate(rows[1:]) if any(c.strip() for c in r)]
    if not body:
        raise NdvmError(f"{p}: error: no data rows after the header")
    out = {}
    for col in columns:
        if col not in header:
            raise NdvmError(f"{p}: error: no column {col!r} (columns: {', '.join(header)})")
        j = header.index(col)
        vals = np.empty(len(body))
        for k, (line, r) in enumerate(body):
            cell = r[j].strip() if j < len(r) else ""
            try:
                vals[k] = float(cell)
            except ValueError:
                what = "missing" if not cell else f"not a number ({cell[:20]!r})"
                raise NdvmError(f"{p}:{line}: error: column {col!r}: {what}") from None
            if not np.isfinite(vals[k]):
                raise NdvmError(f"{p}:{line}: error: column {col!r}: non-finite value {cell!r}")
        out[col] = vals
    return out


def from_csv(
    path: str | Path,
    x: Sequence[str],
    y: str,
    **kw: Any,
) -> Task:
    """``from_arrays`` on columns ``x`` (inputs, named as the columns) and ``y`` of a CSV
    file; the task remembers how it was built (``data().meta["origin"]``) so that a search
    database can rebuild it for ``--resume`` and ``ndvm report``."""
    xs = [c.strip() for c in x if c.strip()]
    if not xs:
        raise NdvmError("--x needs at least one column")
    if y in xs:
        raise NdvmError(f"column {y!r} is both an input (--x) and the target (--y)")
    cols = read_csv(path, [*xs, y])
    X = np.stack([cols[c] for c in xs], axis=1)
    kw.setdefault("name", f"data:{Path(path).name}")
    task = from_arrays(X, cols[y], names=xs, **kw)
    origin = {"csv": str(Path(path).resolve()), "x": xs, "y": y}
    origin.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in kw.items()})
    data = task.data()
    meta = {**dict(data.meta), "origin": origin}
    from dataclasses import replace

    return replace(task, build_data=functools.partial(_fixed, replace(data, meta=meta)))


def rebuild(origin: dict[str, Any]) -> Task:
    """The task ``from_csv`` built, from its recorded origin."""
    kw = dict(origin)
    return from_csv(kw.pop("csv"), kw.pop("x"), kw.pop("y"), **kw)
