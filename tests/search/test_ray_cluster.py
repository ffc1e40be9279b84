"""The search on a Ray cluster of several nodes, as Ray tests itself: ``ray.cluster_utils.Cluster``
starts a head and two worker raylets on this machine (one CPU each), and a worker node that
runs a job is removed while the job runs. The search finishes with the records of a
one-process run of the same seed and candidate budget; no calibration is repeated except the
work lost with the removed node (done again once, elsewhere); and a replacement that cannot
be placed (more workers than the cluster has CPUs) does not stop the work. A task no worker
can load is an error naming the cause, not a wait.
"""

from __future__ import annotations

import collections
import sqlite3
import threading
import time

import pytest
from tests.helpers.records import record_key
from tests.search import held

from ndvm.search import Budget, driver, run_search
from ndvm.search.evaluate import CalibLimits, Job, run_job
from ndvm.search.evolve import EvolveProposer

pytestmark = pytest.mark.ray

SEED, BATCH, CANDIDATES = 11, 16, 160
LIMITS = CalibLimits(starts=4)
FAST_DEATH = {  # the head notices a node gone within about a second (Ray's own tests do this)
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 200,
    "health_check_failure_threshold": 5,
}


@pytest.fixture(scope="module")
def cluster():
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()  # an earlier test's local instance: connect to this cluster instead
    c = Cluster(initialize_head=True, connect=True,
                head_node_args={"num_cpus": 1, "_system_config": FAST_DEATH})  # fmt: skip
    workers = [c.add_node(num_cpus=1) for _ in range(2)]
    c.wait_for_nodes()
    try:
        yield c, workers
    finally:
        ray.shutdown()
        c.shutdown()


def _search(task, db, executor, workers, progress=None):
    spec = task.search
    return run_search(task, EvolveProposer(spec.grammar, spec.seeds), db,
                      budget=Budget(candidates=CANDIDATES), workers=workers, seed=SEED,
                      batch_size=BATCH, limits=LIMITS, executor=executor,
                      progress=progress)  # fmt: skip


class _Remover:
    """Holds the first worker node (not the head) that logged a calibration once ``after``
    results are in, and removes it (from a thread) as soon as one of its jobs is held."""

    def __init__(self, cluster, workers, box, after=BATCH) -> None:
        self.cluster, self.workers, self.box, self.after = cluster, workers, box, after
        self.node = ""  # the node id held, then removed
        self.removed = False
        self.error: Exception | None = None
        self.logged_before = 0  # calibrations logged when the removal began
        self.over = threading.Event()
        self.thread = threading.Thread(target=self._remove, daemon=True)
        self.thread.start()

    def progress(self, p) -> None:
        if self.removed:  # the search has taken the node's death: the others go full speed
            (self.box / "hold").unlink(missing_ok=True)
        if self.node or p.evaluated + p.rejected < self.after:
            return
        ours = {w.node_id for w in self.workers}
        self.node = next((n for n, _ in held.calibrations(self.box) if n in ours), "")
        if self.node:
            (self.box / "hold").write_text(self.node)

    def _remove(self) -> None:
        caught = self.box / "caught"
        while not self.over.is_set() and not caught.exists():
            time.sleep(0.02)
        if not caught.exists():
            return
        # let the other workers finish a few jobs of the chunks they run (a chunk returns its
        # results together: those are lost if the survivors are stopped too)
        base, end = len(held.calibrations(self.box)), time.monotonic() + 5
        while len(held.calibrations(self.box)) < base + 2 and time.monotonic() < end:
            time.sleep(0.02)
        self.logged_before = len(held.calibrations(self.box))
        try:
            node = next(w for w in self.workers if w.node_id == caught.read_text())
            self.cluster.remove_node(node)
            self.removed = True
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def join(self) -> None:
        self.over.set()
        self.thread.join(timeout=120)


def test_search_survives_a_node_removed_mid_search(cluster, tmp_path, monkeypatch):
    c, workers = cluster
    (tmp_path / "one").mkdir()
    (tmp_path / "ray").mkdir()
    one = _search(held.task(tmp_path / "one"), tmp_path / "one.db", "serial", 1)
    made = []  # the search's executor, to read what it did
    real = driver.make_executor
    monkeypatch.setattr(driver, "make_executor", lambda *a: made.append(real(*a)) or made[0])
    remover = _Remover(c, workers, tmp_path / "ray")
    try:
        st = _search(held.task(tmp_path / "ray"), tmp_path / "ray.db", "ray", 2,
                     remover.progress)  # fmt: skip
    finally:
        remover.join()
    assert remover.removed, remover.error or "no job of the chosen node was held: not removed"
    gone = remover.node
    used = made[0]  # two actors, one ended with its node, a replacement asked for
    assert (used.made, used.lost) == (3, 1)
    assert gone not in [node for n, (_, node) in used.placed.items() if n == 2]

    # nothing lost, nothing recorded twice: the records of the one-process run
    assert len(st.records) == CANDIDATES
    assert record_key(st.records) == record_key(one.records)
    with sqlite3.connect(tmp_path / "ray.db") as db:
        rows = db.execute("SELECT idx, status FROM candidates").fetchall()
    assert sorted(i for i, _ in rows) == list(range(CANDIDATES))
    assert not [i for i, s in rows if s == "pending"]

    # no calibration was repeated but the work lost with the removed node, done again once
    log = held.calibrations(tmp_path / "ray")
    assert not any(n == gone for n, _ in log[remover.logged_before :])
    survivors = collections.Counter(k for n, k in log if n != gone)
    assert max(survivors.values()) == 1, [k for k, n in survivors.items() if n > 1]
    ok = [r for r in st.records if r.status == "ok"]
    assert len({k for _, k in log}) >= len(ok) > 0

    # a replacement with no free CPU (3 workers, 2 CPUs left) waits; the others do the work
    from ndvm.search.ray_executor import RayExecutor

    task = held.task(tmp_path / "ray")
    ok = [r for r in one.records if r.status == "ok"]  # distinct skeletons: no shortcut
    jobs = [Job(r.idx, r.candidate, r.seed) for r in ok[:12]]
    out: dict[int, object] = {}
    ex = RayExecutor(task, 3, LIMITS, grace=60.0)
    try:
        nodes = ex.nodes()
        ex.run(jobs, lambda rs: out.update({r.idx: r for r in rs}), lambda: False)
    finally:
        ex.close()
    assert len(nodes) == 2 and gone not in nodes
    assert sorted(out) == [j.idx for j in jobs]
    for j in jobs:
        ref = run_job(task, j, LIMITS, set())
        assert out[j.idx].evaluation.params == ref.evaluation.params, j.candidate.src


def test_a_task_no_worker_can_load_is_an_error(cluster):
    from ndvm.errors import WorkersUnavailable
    from ndvm.search.candidate import Candidate
    from ndvm.search.ray_executor import RayExecutor

    ex = RayExecutor(held.unloadable(), 1, LIMITS)
    try:
        with pytest.raises(WorkersUnavailable, match="cannot load the task: .* live nowhere"):
            ex.run([Job(0, Candidate("(* a x)"), 0)], lambda rs: None, lambda: False)
    finally:
        ex.close()
