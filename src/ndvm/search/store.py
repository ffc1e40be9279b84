"""SQLite (WAL) persistence of a search: every proposed candidate, its funnel verdict and its
calibration result, keyed by ``(run, idx)``.

Proposals are written (status ``pending``, or ``rejected`` for a proposer error) in one
transaction before any is run; results (funnel verdict, skeleton and calibration) then update
their rows one transaction per group of results. A search killed at any moment (``kill -9``
included) therefore loses at most the results not yet committed, which stay ``pending`` and
are run again on resume; a result is never written twice because rows are keyed and only
``pending`` rows are updated.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ndvm.errors import NdvmError
from ndvm.search.candidate import Candidate, Evaluation, Record

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run INTEGER PRIMARY KEY,
    task TEXT NOT NULL,
    proposer TEXT NOT NULL,
    seed INTEGER NOT NULL,
    config TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    created REAL NOT NULL,
    elapsed REAL NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS candidates (
    run INTEGER NOT NULL,
    idx INTEGER NOT NULL,
    batch INTEGER NOT NULL,
    src TEXT NOT NULL,
    params TEXT,
    origin TEXT NOT NULL,
    skeleton TEXT NOT NULL,
    n_params INTEGER NOT NULL,
    complexity INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    train_loss REAL,
    heldout_mse REAL,
    heldout_r2 REAL,
    success INTEGER NOT NULL DEFAULT 0,
    values_json TEXT,
    extra TEXT,
    wall REAL,
    steps INTEGER,
    t_done REAL,
    validation_mse REAL,
    validation_r2 REAL,
    PRIMARY KEY (run, idx)
);
"""
# columns added after the first schema: (name, type) added to older databases on open
_ADDED = (("validation_mse", "REAL"), ("validation_r2", "REAL"), ("text", "TEXT"))


# A column that may be NULL takes ``NULLIF(?, '')`` and is sent ``NULL_TEXT`` for NULL: the
# ``sqlite3`` module binds ``None`` only after looking it up as an object to adapt (an
# AttributeError made and dropped per value), a string at once.
NULL_TEXT = ""
_FINISH = (  # a result into its pending row (``Store.finish_many``)
    "UPDATE candidates SET status = ?, reason = ?, train_loss = NULLIF(?, ''), "
    "heldout_mse = NULLIF(?, ''), heldout_r2 = NULLIF(?, ''), success = ?, values_json = ?, "
    "extra = ?, wall = ?, steps = ?, t_done = ?, skeleton = ?, n_params = ?, complexity = ?, "
    "validation_mse = NULLIF(?, ''), validation_r2 = NULLIF(?, '') "
    "WHERE run = ? AND idx = ? AND status = 'pending'"
)
_INSERT_COLUMNS = 14  # a proposal's row (``Store.add``)
INSERT_ROWS = 64  # proposals per INSERT statement (14 x 64 values: under SQLite's oldest
# limit of 999 per statement)


@functools.lru_cache(maxsize=8)
def _insert(rows: int) -> str:
    """The statement that inserts ``rows`` proposals (already stored rows are kept); its
    ``params`` and ``text`` are NULL where ``NULL_TEXT`` is sent."""
    one = "(?, ?, ?, ?, NULLIF(?, ''), ?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, ''))"
    return ("INSERT OR IGNORE INTO candidates (run, idx, batch, src, params, origin, skeleton, "
            "n_params, complexity, seed, status, reason, t_done, text) VALUES "
            + ", ".join([one] * rows))  # fmt: skip


_JSON = json.JSONEncoder()  # ``json.dumps`` with its defaults, without the call's checks


def _dumps_fn() -> Callable[[Any], str]:
    """``json.dumps`` of a result's values and extras (dicts of numbers, lists and strings,
    never circular): CPython's C encoder made once with ``json.dumps``'s defaults (the text is
    that of ``json.dumps``), rather than per call as ``JSONEncoder.encode`` makes it; the
    encoder itself where there is no C encoder."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _JSON.encode
    enc = make(None, _JSON.default, json.encoder.encode_basestring_ascii, None, ": ", ", ",
               False, False, True)  # fmt: skip

    def dumps(obj: Any) -> str:
        return "".join(enc(obj, 0))

    return dumps


_DUMPS = _dumps_fn()


def _nan(x: Any) -> float:
    return float("nan") if x is None else float(x)


def _invalid(train: Any, mse: Any, r2: Any, vmse: Any, vr2: Any) -> str | None:
    """What is wrong with a stored row's scores (a hand-edited row): ndvm writes non-finite
    values as NULL, MSEs are >= 0 and R² <= 1; None when nothing is. (The training loss may
    be negative: ``gaussian_nll``.)"""
    named = {"train_loss": train, "heldout_mse": mse, "heldout_r2": r2,
             "validation_mse": vmse, "validation_r2": vr2}  # fmt: skip
    for name, v in named.items():
        if v is None:
            continue
        if not isinstance(v, int | float) or not math.isfinite(v):
            return f"{name} {v!r} is not a finite number"
        if name.endswith("mse") and v < 0:
            return f"{name} {v!r} is negative"
        if name.endswith("r2") and v > 1:
            return f"{name} {v!r} is above 1"
    return None


class StoreError(NdvmError):
    """A search database that cannot be used: not SQLite, malformed, another schema, read-only."""


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn SQLite's exceptions into one-line ``StoreError``s naming the file."""

    @functools.wraps(fn)
    def wrapper(self: Store, *args: Any, **kw: Any) -> Any:
        try:
            return fn(self, *args, **kw)
        except sqlite3.Error as exc:
            raise StoreError(f"{self.path}: search database error: {exc}") from None
        except (ValueError, TypeError) as exc:  # a row that does not decode (hand-edited)
            raise StoreError(f"{self.path}: malformed search database: {exc}") from None

    return wrapper


def _exclusive(path: str) -> Any:
    """An open ``<path>.lock`` holding an exclusive ``flock`` (released when it is closed or
    the process dies, ``kill -9`` included); a ``StoreError`` when another process (or
    another open ``Store`` here) holds it. Without ``fcntl`` (Windows) no lock is taken."""
    try:
        import fcntl
    except ImportError:
        return None
    lock = open(f"{path}.lock", "a+b")  # noqa: SIM115 - held open until Store.close
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise StoreError(
            f"{path}: another ndvm search is using this database (its lock {path}.lock is "
            "held); wait for it to finish or give another --db"
        ) from None
    return lock


def _columns(schema: str, table: str) -> set[str]:
    body = schema.split(f"CREATE TABLE IF NOT EXISTS {table} (", 1)[1].split(");", 1)[0]
    lines = [line.split() for line in body.strip().splitlines()]
    return {words[0] for words in lines if words and words[0] != "PRIMARY"}


class Store:
    """One SQLite database file; may hold several runs (the latest is resumed).

    ``read_only`` (``ndvm report``): opened with SQLite's ``mode=ro`` URI, so nothing is ever
    written (an empty or foreign file is a ``StoreError``, never given a schema).
    ``exclusive`` (a search): an advisory lock on ``<path>.lock`` is held until ``close``, and
    a second exclusive open (another ``ndvm search``, a second ``--resume``) is refused with a
    ``StoreError`` rather than both running and one's results being discarded."""

    @_guarded
    def __init__(self, path: str | Path, read_only: bool = False, exclusive: bool = False) -> None:
        self.path = str(path)
        self.read_only = read_only
        self._lock: Any = None
        if Path(self.path).is_dir():
            raise StoreError(f"{self.path}: is a directory, not a search database")
        if exclusive:
            self._lock = _exclusive(self.path)
        self.db: Any = None
        try:
            if read_only:
                uri = f"{Path(self.path).resolve().as_uri()}?mode=ro"
                self.db = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None)
            else:
                self.db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        if self.read_only:
            return self._check_columns(
                {r[1] for r in self.db.execute("PRAGMA table_info(candidates)")}
            )
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        have = {row[1] for row in self.db.execute("PRAGMA table_info(candidates)")}
        for name, kind in _ADDED:
            if name not in have:
                self.db.execute(f"ALTER TABLE candidates ADD COLUMN {name} {kind}")
                have.add(name)
        self._check_columns(have)

    def _check_columns(self, have: set[str]) -> None:
        runs = {row[1] for row in self.db.execute("PRAGMA table_info(runs)")}
        missing = (_columns(_SCHEMA, "candidates") - have) | (_columns(_SCHEMA, "runs") - runs)
        if missing:
            raise StoreError(
                f"{self.path}: not an ndvm search database (missing columns: "
                f"{', '.join(sorted(missing))})"
            )

    @_guarded
    def close(self) -> None:
        try:
            if self.db is not None:
                self.db.close()
        finally:
            if self._lock is not None:
                self._lock.close()  # closing the descriptor releases the lock
                self._lock = None

    # -- runs ---------------------------------------------------------------------------
    @_guarded
    def new_run(
        self, task: str, proposer: str, seed: int, config: dict[str, Any], commit_id: str
    ) -> int:
        cur = self.db.execute(
            "INSERT INTO runs (task, proposer, seed, config, commit_id, created) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (task, proposer, seed, json.dumps(config), commit_id, time.time()),
        )
        return int(cur.lastrowid or 0)

    @_guarded
    def latest_run(self) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT run, task, proposer, seed, config, commit_id, created, elapsed "
            "FROM runs ORDER BY run DESC LIMIT 1"
        ).fetchone()
        return None if row is None else self._run_dict(row)

    @_guarded
    def run_info(self, run: int) -> dict[str, Any]:
        row = self.db.execute(
            "SELECT run, task, proposer, seed, config, commit_id, created, elapsed "
            "FROM runs WHERE run = ?",
            (run,),
        ).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no run {run}")
        return self._run_dict(row)

    @staticmethod
    def _run_dict(row: tuple[Any, ...]) -> dict[str, Any]:
        keys = ("run", "task", "proposer", "seed", "config", "commit", "created", "elapsed")
        out = dict(zip(keys, row))
        out["config"] = json.loads(out["config"])
        return out

    @_guarded
    def set_config(self, run: int, config: dict[str, Any]) -> None:
        """Replace the run's config (JSON) with ``config``."""
        self.db.execute("UPDATE runs SET config = ? WHERE run = ?", (json.dumps(config), run))

    @_guarded
    def set_elapsed(self, run: int, elapsed: float) -> None:
        self.db.execute("UPDATE runs SET elapsed = ? WHERE run = ?", (elapsed, run))

    # -- candidates ---------------------------------------------------------------------
    @_guarded
    def add(self, run: int, records: list[Record], elapsed: float | None = None) -> None:
        """Insert a batch of proposals atomically (pending or already rejected); with
        ``elapsed``, the run's elapsed seconds in the same transaction. The rows go in
        ``INSERT_ROWS`` to a statement (one statement's steps instead of one per row)."""
        values: list[Any] = []
        for r in records:
            ev, c = r.evaluation, r.candidate
            values += (
                run, r.idx, r.batch, c.src,
                NULL_TEXT if c.params is None else json.dumps(c.params), c.origin, r.skeleton,
                r.n_params, r.complexity, r.seed, "pending" if ev is None else ev.status,
                "" if ev is None else ev.reason, r.t_done,
                c.text,  # the proposer's original text (a NumPy skeleton), NULL when none
            )  # fmt: skip
        step = INSERT_ROWS * _INSERT_COLUMNS
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            for i in range(0, len(values), step):
                part = values[i : i + step]
                self.db.execute(_insert(len(part) // _INSERT_COLUMNS), part)
            if elapsed is not None:
                self.db.execute("UPDATE runs SET elapsed = ? WHERE run = ?", (elapsed, run))

    @_guarded
    def finish_many(self, run: int, results: list[tuple[Any, float]], elapsed: float) -> list[bool]:
        """Record the results ``(evaluate.Result, t_done)`` of pending candidates in one
        transaction; per result, False if its row was not pending (never written twice)."""
        rows = []
        dumps, fin = _DUMPS, math.isfinite
        for res, t_done in results:
            ev = res.evaluation
            scores = (ev.train_loss, ev.heldout_mse, ev.heldout_r2, ev.validation_mse,
                      ev.validation_r2)  # fmt: skip
            nums = [NULL_TEXT if x is None or not fin(x) else float(x) for x in scores]
            rows.append((
                ev.status, ev.reason, nums[0], nums[1], nums[2], int(ev.success),
                dumps(ev.params), dumps(ev.extra), ev.wall, ev.steps, t_done, res.skeleton,
                res.n_params, res.complexity, nums[3], nums[4], run, res.idx,
            ))  # fmt: skip
        idx = [r[-1] for r in rows]
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            # as a rule every row is pending (the driver sends each result once): one
            # statement updates them all, and its count of updated rows says so; otherwise
            # that is undone and the pending rows are looked up first
            if self.db.executemany(_FINISH, rows).rowcount != len(rows):
                self.db.execute("ROLLBACK")
                self.db.execute("BEGIN IMMEDIATE")
                pending = {i for (i,) in self.db.execute(
                    f"SELECT idx FROM candidates WHERE run = ? AND status = 'pending' AND idx "
                    f"IN ({', '.join('?' * len(idx))})", (run, *idx))}  # fmt: skip
                rows = [r for r in rows if r[-1] in pending]
                self.db.executemany(_FINISH, rows)
            self.db.execute("UPDATE runs SET elapsed = ? WHERE run = ?", (elapsed, run))
        done = {r[-1] for r in rows}
        return [i in done for i in idx]

    @_guarded
    def records(self, run: int) -> list[Record]:
        """Every row of ``run`` in index order."""
        cur = self.db.execute(
            "SELECT idx, batch, src, params, origin, skeleton, n_params, complexity, seed, "
            "status, reason, train_loss, heldout_mse, heldout_r2, success, values_json, extra, "
            "wall, steps, t_done, validation_mse, validation_r2, text FROM candidates "
            "WHERE run = ? ORDER BY idx",
            (run,),
        )
        out = []
        for row in cur:
            (idx, batch, src, params, origin, skel, n_params, cx, seed, status, reason) = row[:11]
            (train, mse, r2, success, values, extra, wall, steps, t_done, vmse, vr2) = row[11:22]
            cand = Candidate(src, None if params is None else tuple(json.loads(params)), origin,
                             text=row[22] or "")
            ev = None
            if status != "pending":
                bad = _invalid(train, mse, r2, vmse, vr2)
                if bad:  # never ranked: a failure whose reason names the row
                    status, reason = "failed", f"invalid stored row (run {run}, idx {idx}): {bad}"
                ev = Evaluation(
                    status,
                    reason,
                    _nan(train),
                    _nan(mse),
                    _nan(r2),
                    bool(success),
                    json.loads(values) if values else {},
                    wall or 0.0,
                    steps or 0,
                    json.loads(extra) if extra else {},
                    _nan(vmse),
                    _nan(vr2),
                )
            out.append(Record(idx, batch, cand, skel, n_params, cx, seed, ev, t_done or 0.0))
        return out
