"""``SymbolicRegressor``: co-search behind scikit-learn's estimator conventions (as PySR's).

``fit(X, y)`` builds a task from the arrays (``Task.from_arrays``: seeded train / validation
/ test rows), runs ``run_search`` with the ``evolve`` proposer into a SQLite database and
reads back the Pareto front; ``predict`` evaluates the selected program with ndvm at its
fitted values; ``sympy``/``latex``/``pytorch``/``jax`` export it with the fitted values
(``estimator_exports``: callable on ``X`` as PySR's). Parameters are stored by ``__init__``
unchanged and read back by ``get_params``; ``fit`` checks them first (``search.options``: a
one-line ``ConfigError``); fitted attributes end in ``_``; scikit-learn is not required.
"""

from __future__ import annotations

import inspect
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ndvm.backends.inputs import is_complex
from ndvm.errors import ConfigError, NdvmError
from ndvm.search import estimator_exports, frontier, options, selection
from ndvm.search.candidate import Record
from ndvm.search.driver import run_search
from ndvm.search.dust import prune
from ndvm.search.evaluate import CalibLimits
from ndvm.search.evolve import EvolveProposer
from ndvm.search.progress import ProgressLine, front_lines
from ndvm.search.state import Budget
from ndvm.search.store import Store
from ndvm.tasks.base import Task, check_input_names
from ndvm.tasks.columns import DEFAULT_BINARY, DEFAULT_UNARY

SELECTIONS = selection.MODES


class SymbolicRegressor:
    """Symbolic regression by co-search: ``SymbolicRegressor(...).fit(X, y).predict(X)``.

    time_budget: seconds of search (``None``: no time limit; give ``max_candidates`` or
    ``batches`` instead — a search bounded by candidates or batches is deterministic for
    ``random_state``, a timed one is not); max_candidates / batches: proposal and generation
    budgets; workers: calibration processes; binary_operators / unary_operators: the grammar
    (PySR's convention and names: "^" is pow, "neg" unary -); max_complexity: the largest
    program in nodes; starts: calibration starts per candidate (default 16);
    candidate_seconds: time limit of one candidate;
    population / batch_size: the evolutionary proposer's; split: train / validation / test
    fractions of the rows; holdout: the fraction of all rows (taken from train) that the
    search never reads and the choice below is made on (used from 30 rows; smaller data is
    cross-validated on train + validation; ``selection.for_task``); model_selection: how the
    reported model is chosen among the front's entries on those losses (re-read at every use,
    so ``set_params(model_selection=...)`` after ``fit`` takes effect at once, and in a kept
    ``database_``, whose latest run then stores the new choice for ``ndvm report``): ``"best"``
    (the smallest information criterion n log(CV loss) + cost log(n)), ``"accuracy"`` (the
    lowest CV loss) or ``"score"`` (PySR's largest score); before selection, constants a fit
    drove to 0 or 1 are pruned (``ndvm.search.dust``); pruning and the choice run inside
    ``time_budget`` (``selection.search_seconds``); random_state: the seed of the row split
    and of the search; variable_names: input names (default: a DataFrame's columns, else
    ``x0, x1, ...``); database: the SQLite file of the search (default: a temporary one,
    deleted when ``fit`` returns, unless ``warm_start``: then kept at ``database_`` for the
    next fit to continue); warm_start: continue the latest run in ``database`` (``time_budget``
    more seconds; refused when X, y or the split differ from that run's);
    verbosity: 0 silent, 1 a live progress line with the best program so far on stderr and
    the hall of fame with the chosen law at the end (default ``None``: 1 when stderr is a
    terminal or in a notebook, else 0); early_stop_condition: stop at
    the first program (index order) that reaches it (``Budget.reached``): a number (the
    ``loss`` column, validation MSE, at most it: PySR's meaning), ``"r2>=R"`` (validation
    R²), ``"loss<=L"``, or a callable ``(loss, complexity) -> bool``
    (``search.options.parse_early_stop``).
    """

    def __init__(
        self,
        *,
        time_budget: float | None = 60.0,
        max_candidates: int | None = None,
        batches: int | None = None,
        workers: int = 1,
        binary_operators: Sequence[str] = DEFAULT_BINARY,
        unary_operators: Sequence[str] = DEFAULT_UNARY,
        max_complexity: int = 30,
        starts: int | None = None,
        candidate_seconds: float = 10.0,
        population: int = 24,
        batch_size: int = 64,
        split: Sequence[float] = (0.6, 0.2, 0.2),
        model_selection: str = "best",
        random_state: int = 0,
        variable_names: Sequence[str] | None = None,
        database: str | None = None,
        warm_start: bool = False,
        verbosity: int | None = None,
        early_stop_condition: Any = None,
        holdout: float = 0.2,
    ) -> None:
        self.time_budget = time_budget
        self.max_candidates = max_candidates
        self.batches = batches
        self.workers = workers
        self.binary_operators = binary_operators
        self.unary_operators = unary_operators
        self.max_complexity = max_complexity
        self.starts = starts
        self.candidate_seconds = candidate_seconds
        self.population = population
        self.batch_size = batch_size
        self.split = split
        self.model_selection = model_selection
        self.random_state = random_state
        self.variable_names = variable_names
        self.database = database
        self.warm_start = warm_start
        self.verbosity = verbosity
        self.early_stop_condition = early_stop_condition
        self.holdout = holdout

    # -- scikit-learn conventions ---------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters by name (``deep`` is accepted for scikit-learn)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> SymbolicRegressor:
        """Set constructor parameters; an unknown name is a ``ValueError`` (as scikit-learn)."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for SymbolicRegressor "
                                 f"(valid: {', '.join(valid)})")  # fmt: skip
            setattr(self, name, value)
        if "model_selection" in params:
            self._store_choice()
        return self

    def _store_choice(self) -> None:
        """After ``fit`` with a kept database, store the choice of the current
        ``model_selection`` in its run, so ``ndvm report`` marks what ``best_`` is (an unknown
        mode stores nothing: ``best_`` raises it)."""
        kept = vars(self).get("database_")
        fitted = "cv_" in vars(self) and self.model_selection in SELECTIONS
        if fitted and kept and Path(kept).exists():
            selection.save(kept, self.cv_, self.model_selection)

    def __repr__(self) -> str:
        sig = inspect.signature(type(self).__init__).parameters
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if v != sig[k].default]
        return f"SymbolicRegressor({', '.join(changed)})"

    # -- fitting ----------------------------------------------------------------------------
    def fit(self, X: Any, y: Any) -> SymbolicRegressor:
        """Search for programs ``y ~ f(X)``; X is ``[N, d]`` (array or DataFrame), y ``[N]``."""
        if self.model_selection not in SELECTIONS:
            raise NdvmError(f"model_selection must be one of {sorted(SELECTIONS)}, "
                            f"got {self.model_selection!r}")  # fmt: skip
        start = time.perf_counter()
        until = self._check_params()
        values, names = _columns(X, self.variable_names)
        check_input_names(names)
        task = Task.from_arrays(
            values, _target(y, len(values)), names=names, split=tuple(self.split),
            seed=self.random_state, binary_operators=self.binary_operators,
            unary_operators=self.unary_operators, max_size=self.max_complexity,
            name="SymbolicRegressor", holdout=self.holdout,
        )  # fmt: skip
        db, scratch = self._database()
        try:
            state = self._search(task, db, until)
        finally:
            if scratch is not None:  # a temporary database: the records are read already
                shutil.rmtree(scratch, ignore_errors=True)
        kept = None if scratch is not None else db
        records = [r for r in state.records if r.status == "ok"]
        if not frontier.pareto_front(records):
            where = f"; see {kept}" if kept else ""
            raise NdvmError(f"the search calibrated no program ({len(state.records)} proposed"
                            f"{where}); give it a larger budget")  # fmt: skip
        self.feature_names_in_ = np.asarray(names, dtype=object)
        self.n_features_in_ = len(names)
        self.database_ = kept
        self.task_ = task
        self.records_ = list(state.records)
        deadline = None if self.time_budget is None else start + self.time_budget
        self.front_ = _pruned_front(task, records, deadline)
        self.cv_ = selection.for_task(task, self.front_, self.random_state, deadline)
        if kept:  # ``ndvm report`` on this database marks the same choice
            selection.save(kept, self.cv_, self.model_selection)
        if self._verbose():
            lines = front_lines(self.front_, self.names, self.best_.idx)
            print("\n".join(lines), file=sys.stderr)
        return self

    @property
    def best_(self) -> Record:
        """The reported model: the front entry ``model_selection`` picks now (no refit)."""
        if "front_" not in vars(self):
            raise AttributeError("best_")  # not fitted: scikit-learn's convention
        mode = self.model_selection
        if mode not in SELECTIONS:
            raise NdvmError(f"model_selection must be one of {', '.join(SELECTIONS)}, "
                            f"got {mode!r}")  # fmt: skip
        chosen = self.cv_.choose(mode)
        return chosen if chosen is not None else self.front_[-1]

    @property
    def equations_(self) -> Any:
        """One row per Pareto-front entry (a DataFrame when pandas is present), ``selected``
        marking ``best_`` under the current ``model_selection``."""
        if "front_" not in vars(self):
            raise AttributeError("equations_")
        return _table(self.front_, self.best_, self.cv_.losses)

    def _check_params(self) -> Callable[[Record], bool] | None:
        """Every numeric option in range (``ConfigError``); the early-stop predicate."""
        if self.time_budget is None and self.max_candidates is None and self.batches is None:
            raise ConfigError("give time_budget, max_candidates or batches: the search "
                              "would never end")  # fmt: skip
        options.seconds("time_budget", self.time_budget, optional=True)
        options.seconds("candidate_seconds", self.candidate_seconds)
        for name in ("max_candidates", "batches", "starts"):
            options.count(name, getattr(self, name), optional=True)
        for name in ("workers", "max_complexity", "population", "batch_size"):
            options.count(name, getattr(self, name))
        options.count("random_state", self.random_state, minimum=0)
        options.fractions("split", self.split)
        if isinstance(self.holdout, bool) or not (isinstance(self.holdout, int | float)
                                                  and 0 <= self.holdout < self.split[0]):
            raise ConfigError(f"holdout must be a fraction >= 0 below the train fraction "
                              f"{self.split[0]}, got {self.holdout!r}")  # fmt: skip
        options.count("verbosity", self.verbosity, minimum=0, optional=True)
        if not isinstance(self.warm_start, bool):
            raise ConfigError(f"warm_start must be True or False, got {self.warm_start!r}")
        cond = options.parse_early_stop(self.early_stop_condition)
        if cond is None:
            return None

        def until(r: Record) -> bool:
            ev = r.evaluation
            if ev is None or r.status != "ok":
                return False
            return cond(frontier.selection_loss(r), r.complexity, ev.validation_r2)

        return until

    def _database(self) -> tuple[str, str | None]:
        """``(database, scratch folder to delete after fit or None)``: the user's file, the
        temporary file a warm-started estimator kept, or a new temporary one."""
        if self.database:
            return str(self.database), None
        kept = getattr(self, "database_", None) if self.warm_start else None
        if kept and Path(kept).exists():
            return str(kept), None
        folder = tempfile.mkdtemp(prefix="ndvm-sr-")
        return str(Path(folder) / "search.db"), (None if self.warm_start else folder)

    def _verbose(self) -> bool:
        """``verbosity``; by default on in a terminal or a notebook (an IPython kernel), off
        in scripts, logs and tests."""
        if self.verbosity is not None:
            return self.verbosity > 0
        return bool(getattr(sys.stderr, "isatty", lambda: False)()) or "ipykernel" in sys.modules

    def _search(self, task: Task, db: str, until: Callable[[Record], bool] | None) -> Any:
        resume = bool(self.warm_start and Path(db).exists() and _elapsed(db) is not None)
        seconds = self.time_budget
        if seconds is not None:  # the rest of the budget: dust pruning and selection
            seconds = selection.search_seconds(task, seconds)
        if resume and seconds is not None:
            seconds += _elapsed(db) or 0.0  # like ``ndvm search --resume --budget``: extra time
        show = ProgressLine(quiet=not self._verbose())
        try:
            return run_search(
                task, _proposer(task, self.population), db,
                budget=Budget(seconds=seconds, candidates=self.max_candidates,
                              batches=self.batches, until=until),
                workers=self.workers, seed=self.random_state, batch_size=self.batch_size,
                resume=resume, progress=show,
                limits=CalibLimits(seconds=self.candidate_seconds, starts=self.starts),
            )  # fmt: skip
        finally:
            show.end()

    # -- using the fitted model ---------------------------------------------------------------
    def _check_fitted(self) -> None:
        if "front_" not in vars(self):
            raise NdvmError("this SymbolicRegressor is not fitted yet: call fit(X, y) first")

    def _record(self, index: int | None) -> Record:
        self._check_fitted()
        if index is None:
            return self.best_
        if not -len(self.front_) <= index < len(self.front_):
            raise NdvmError(f"index {index} is not a row of equations_ ({len(self.front_)} rows)")
        return self.front_[index]

    @property
    def names(self) -> tuple[str, ...]:
        self._check_fitted()
        return tuple(str(n) for n in self.feature_names_in_)

    def program(self, index: int | None = None) -> tuple[str, dict[str, float]]:
        """``(source, fitted values)`` of the selected program (or row ``index`` of
        ``equations_``)."""
        r = self._record(index)
        assert r.evaluation is not None
        return r.candidate.src, dict(r.evaluation.params)

    def predict(self, X: Any, index: int | Record | None = None) -> np.ndarray:
        """ndvm's values of the selected program (or row ``index``, or a calibrated record
        of ``records_``) at its fitted values."""
        from ndvm.api import compile as ndvm_compile

        if isinstance(index, Record):
            assert index.evaluation is not None
            src, values = index.candidate.src, dict(index.evaluation.params)
        else:
            src, values = self.program(index)
        cols = self._inputs(X)
        prog = ndvm_compile(src, list(values), self.names)
        theta = prog.unconstrain([values[n] for n in prog.params])
        n = len(next(iter(cols.values())))
        return np.broadcast_to(np.asarray(prog.eval(theta, **cols), dtype=np.float64), (n,)).copy()

    def score(self, X: Any, y: Any) -> float:
        """R² of ``predict(X)`` against ``y`` (scikit-learn's regressor score)."""
        yv = _target(y, None)
        pred = self.predict(X)
        if pred.shape != yv.shape:
            raise NdvmError(f"y has {yv.shape[0]} rows, X has {pred.shape[0]}")
        ss = float(np.sum((yv - yv.mean()) ** 2))
        return 1.0 - float(np.sum((yv - pred) ** 2)) / ss if ss > 0 else float("nan")

    def _inputs(self, X: Any) -> dict[str, np.ndarray]:
        names = self.names
        if hasattr(X, "columns"):
            missing = [n for n in names if n not in [str(c) for c in X.columns]]
            if missing:
                raise NdvmError(f"X has no column(s) {missing} (fitted on {list(names)})")
            X = X[list(names)]
        values, _ = _columns(X, names)
        if values.shape[1] != len(names):
            raise NdvmError(f"X has {values.shape[1]} columns, the model {len(names)}")
        return {n: values[:, i].copy() for i, n in enumerate(names)}

    # -- exports with the fitted values ---------------------------------------------------------
    def sympy(self, index: int | None = None) -> Any:
        """The selected program as a sympy expression with its fitted constants."""
        from ndvm.export import to_sympy

        src, values = self.program(index)
        return to_sympy(estimator_exports.compile_used(src, values, self.names), values)

    def latex(self, index: int | None = None, precision: int = 4) -> str:
        """LaTeX of ``sympy(index)`` with constants rounded to ``precision`` digits."""
        import sympy

        expr = self.sympy(index)
        return str(sympy.latex(expr.xreplace({f: sympy.Float(f, precision)
                                              for f in expr.atoms(sympy.Float)})))  # fmt: skip

    def pytorch(self, index: int | None = None) -> Any:
        """A ``torch.nn.Module`` holding the fitted values, called as PySR's: ``module(X)``
        with X ``[N, d]`` (tensor or array, columns in feature order) or a DataFrame; also
        ``module(**{name: tensor})`` with only the inputs the equation uses."""
        src, values = self.program(index)
        return estimator_exports.torch_module(src, values, self.names)

    def jax(self, index: int | None = None) -> estimator_exports.JaxExport:
        """``(fn, params)`` with ``params`` the fitted values (also read as PySR's
        ``{"callable": fn, "parameters": params}``): ``fn(X, params)`` with X ``[N, d]`` or a
        DataFrame, or ``fn(params, **{name: array})`` with the inputs the equation uses."""
        src, values = self.program(index)
        return estimator_exports.jax_function(src, values, self.names)


def _proposer(task: Task, population: int) -> EvolveProposer:
    assert task.search is not None
    return EvolveProposer(task.search.grammar, task.search.seeds, population=population)


def _elapsed(db: str) -> float | None:
    """Search seconds of the latest run in ``db`` (None: no run)."""
    store = Store(db)
    try:
        info = store.latest_run()
    finally:
        store.close()
    return None if info is None else float(info["elapsed"])


def _columns(X: Any, names: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    """``(values [N, d], names)`` of an array or a DataFrame (its column names by default)."""
    cols = [str(c) for c in X.columns] if hasattr(X, "columns") else None
    values = _real(X, "X")
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2:
        raise NdvmError(f"X must be [N, d], got shape {values.shape}")
    d = values.shape[1]
    out = list(names) if names is not None else cols or [f"x{i}" for i in range(d)]
    if len(out) != d:
        raise NdvmError(f"variable_names has {len(out)} names for {d} columns of X")
    return values, [str(n) for n in out]


def _real(values: Any, what: str) -> np.ndarray:
    """``values`` (an array, a list or a pandas object) as float64; complex or non-numeric
    values are an error (NumPy would drop an imaginary part with a warning)."""
    raw = values.to_numpy() if hasattr(values, "to_numpy") else values
    if is_complex(raw):
        raise NdvmError(f"{what} must be real numbers, got complex values")
    try:
        return np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise NdvmError(f"{what} must be numeric: {exc}") from None


def _target(y: Any, n: int | None) -> np.ndarray:
    yv = _real(y, "y")
    if yv.ndim != 1 and not (yv.ndim == 2 and yv.shape[1] == 1):
        raise NdvmError(f"y must be one target [N], got shape {yv.shape}")
    yv = yv.reshape(-1)
    if n is not None and yv.shape[0] != n:
        raise NdvmError(f"y has {yv.shape[0]} rows, X has {n}")
    return yv


def _pruned_front(
    task: Task, records: list[Record], deadline: float | None = None
) -> list[Record]:
    """The Pareto front after dust pruning (``dust.prune``) of its entries (those reached
    before ``deadline``, a ``time.perf_counter()`` time)."""
    front = frontier.pareto_front(records)
    pruned = {}
    for r in front:
        if deadline is not None and time.perf_counter() > deadline:
            break
        pruned[r.idx] = prune(task, r)
    return frontier.pareto_front([pruned.get(r.idx, r) for r in records])


def _table(front: list[Record], chosen: Record, cv: list[float]) -> Any:
    """``equations_``: one row per Pareto-front entry (a DataFrame when pandas is present)."""
    import importlib.util

    rows = []
    for r, score, cv_loss in zip(front, frontier.scores(front), cv):
        ev = r.evaluation
        assert ev is not None
        rows.append({  # plain Python values: json.dumps takes a row as it is
            "complexity": int(r.complexity), "n_params": int(r.n_params),
            "cost": int(frontier.cost(r)), "loss": float(frontier.selection_loss(r)),
            "cv_loss": float(cv_loss), "score": float(score), "equation": str(r.candidate.src),
            "params": {str(k): float(v) for k, v in ev.params.items()},
            "train_loss": float(ev.train_loss), "validation_r2": float(ev.validation_r2),
            "test_r2": float(ev.heldout_r2), "selected": bool(r.idx == chosen.idx),
            "idx": int(r.idx),
        })  # fmt: skip
    if importlib.util.find_spec("pandas") is None:
        return rows
    import pandas as pd

    # integer and boolean columns hold Python ints / bools (object dtype): an element read
    # from them is no NumPy scalar, so json.dumps takes it; float columns are float64 (a
    # float subclass, which JSON takes) and stay numeric for pandas and NumPy
    return pd.DataFrame(rows).astype({c: object for c in _EXACT_COLUMNS})


_EXACT_COLUMNS = ("complexity", "n_params", "cost", "selected", "idx")
