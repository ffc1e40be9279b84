"""Where the search loop's time per candidate goes, against the bare loop it is compared with.

    PYTHONPATH=src python benchmarks/profile_search.py [--task sr-damped] [--starts 1]
        [--corpus 400] [--seconds 8] [--out bench-out]

On the replay corpus of ``bench_search.py`` (candidates of the evolve proposer that pass the
funnel), each part of a worker's ``evaluate.run_job`` is timed on its own, in the order the
worker runs them (the median over the corpus, three passes, µs per candidate): reading the
source (the reader's facts of it, ``search.facts``, or its data for a source holding a
string), the size check, ``ndvm.compile``, the start draw, role placement (more than one
start), the parameter check (with the skeleton), the skeleton hash,
the fold check, the ``finite`` stage (only for programs whose stage the fit cannot fold: loops,
bindings), ``Task.calibrate`` (the bare loop's: a calibration plan made per call), the
worker's fit (``Task.fit`` of the plan its setup made once; the same result), scoring on the
held-out splits, the record. The bare loop of ``bench_search.py`` is compile, the start draw
and ``Task.calibrate``; the worker's parts are all but ``Task.calibrate``, and "search only"
is what they cost beyond the bare loop. The driver's own CPU per candidate comes from a
2-worker ``ndvm search`` replaying the corpus for ``--seconds`` (``time.process_time`` of the
driver process between progress reports, start-up excluded: proposals, decisions, the
database).

The last line says what the 2-worker target of issue 49 needs: with two workers on two free
cores, the search's rate over the bare loop's is 2 x (bare CPU) / (worker + driver CPU per
candidate), so a ratio r needs worker + driver <= 2 x bare / r.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_search import corpus

from ndvm import tasks
from ndvm.api import compile as compile_program
from ndvm.calibrate.starts import place_roles, program_roles
from ndvm.lang.front import skeleton_of
from ndvm.lang.reader import read_with_symbols
from ndvm.search import Budget, make_proposer, run_search
from ndvm.search import evaluate as ev
from ndvm.search.candidate import Candidate, skeleton_hash
from ndvm.search.facts import read_facts
from ndvm.search.funnel import check_finite, check_params, check_source

BARE = ("compile", "start draw", "calibrate")  # what the bare loop runs too
WORKER_FIT = "fit (plan)"  # the worker's calibration: ``Task.fit`` of its setup's plan


def parts(task_name: str, srcs: list[str], starts: int, passes: int = 3) -> dict[str, float]:
    """Median µs per candidate of each part of ``run_job`` (and of ``run_job`` whole)."""
    task = tasks.get(task_name)
    lim = ev.CalibLimits(starts=starts)
    setup = ev._setup(task, lim)
    K = starts
    spent: dict[str, list[float]] = {}
    clock = _Clock(spent)
    for _ in range(passes):
        for i, src in enumerate(srcs):
            with clock("read"):  # the reader's facts of the source (None: its data)
                facts = read_facts(src)
                data, sym = read_with_symbols(src) if facts is None else (facts, facts.symbols)
            with clock("grammar"):
                v = check_source(data if facts is None else facts.complexity, setup.grammar)
            with clock("compile"):
                prog = compile_program(src, None, task.inputs, strict=False,
                                       limits=setup.limits, free_params=True)  # fmt: skip
            with clock("start draw"):
                rng = np.random.default_rng(i)
                init = setup.scale * rng.standard_normal((K, len(prog.param_specs)))
                init = ev.spread_starts(init, K, setup.decades)
            if K > 1:
                with clock("roles"):
                    place_roles(init, K, program_roles(prog), setup.roles, rng)  # as run_job
            with clock("parameter check"):
                skel = None if facts is None else skeleton_of(prog.compiled, plain=facts.skeleton)
                v = check_params(prog, data, task, v.complexity, sym, skel)
            with clock("skeleton hash"):
                skeleton_hash(v.skeleton, src)
            with clock("fold check"):
                folds = ev._folds(task, prog, data)
            if not folds:  # the stage is not read from the fit: evaluated on its own
                with clock("finite stage"):
                    check_finite(prog, task, init, v)
            state = rng.bit_generator.state  # (a fit draws nothing: the same either way)
            for part in ("calibrate", WORKER_FIT)[:: 1 if i % 2 else -1]:  # either first
                rng.bit_generator.state = state
                with clock(part):
                    if part == WORKER_FIT:
                        cal = task.fit(setup.plan(task, K), prog, init=init, seed=rng,
                                       time_limit=10.0)  # fmt: skip
                    else:
                        cal = task.calibrate(prog, starts=K, init=init, seed=rng,
                                             time_limit=10.0, diagnostics=False)  # fmt: skip
            with clock("score"):
                m = task.score(cal, task.data())
            with clock("record"):
                ev.Result(i, v.skeleton, 0, 0, ev.evaluation(task, cal, m, 0.0), "")
            job = ev.Job(i, Candidate(src), i)
            with clock("run_job whole"):
                ev.run_job(task, job, lim, set())
    return {k: float(np.median(t)) * 1e6 for k, t in spent.items()}


class _Clock:
    """``with clock(part):`` adds the block's seconds to ``spent[part]``."""

    def __init__(self, spent: dict[str, list[float]]) -> None:
        self.spent, self.part, self.t0 = spent, "", 0.0

    def __call__(self, part: str) -> _Clock:
        self.part = part
        return self

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.spent.setdefault(self.part, []).append(time.perf_counter() - self.t0)


def driver_cpu(task_name: str, path: Path, starts: int, seconds: float, out: Path) -> float:
    """The driver process's CPU µs per candidate of a 2-worker replay search, from the first
    progress report after the workers started to the last (start-up excluded)."""
    db = out / f"profile-{task_name}.db"
    for p in out.glob(f"{db.name}*"):
        p.unlink()
    marks: list[tuple[int, float]] = []

    def sample(p: Any) -> None:
        marks.append((p.evaluated, time.process_time()))

    run_search(task_name, make_proposer(f"replay:{path}", task_name, cycles=0), db,
               budget=Budget(seconds=seconds), workers=2, limits=ev.CalibLimits(starts=starts),
               progress=sample)  # fmt: skip
    (n0, c0), (n1, c1) = marks[len(marks) // 10], marks[-1]
    return (c1 - c0) / max(n1 - n0, 1) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="sr-damped")
    ap.add_argument("--starts", type=int, default=1)
    ap.add_argument("--corpus", type=int, default=400)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = corpus(args.task, args.corpus, out)
    srcs = [json.loads(line)["src"] for line in path.read_text().splitlines()]
    got = parts(args.task, srcs, args.starts)
    whole = got.pop("run_job whole")
    for k, us in got.items():
        note = "  (bare loop too)" if k in BARE else ""
        note = "  (bare loop only)" if k == "calibrate" else note
        print(f"{k:16s} {us:7.1f} us{note}")
    bare = sum(got[k] for k in BARE)
    worker = sum(us for k, us in got.items() if k != "calibrate")
    drv = driver_cpu(args.task, path, args.starts, args.seconds, out)
    print(f"run_job whole    {whole:7.1f} us (the worker's parts: {worker:.1f})")
    print(f"bare loop {bare:.1f} us; search only, in the worker {worker - bare:.1f} us; "
          f"driver {drv:.1f} us per candidate")  # fmt: skip
    for r in (1.2, 1.5):
        need, now = 2 * bare / r, worker + drv
        print(f"2 workers at {r}x bare need worker + driver <= {need:.1f} us "
              f"(now {now:.1f} us: {2 * bare / now:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
