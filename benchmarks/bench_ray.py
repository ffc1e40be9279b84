"""The search on Ray, node by node: candidates per second with 1, 2 (, 3) worker nodes.

    python benchmarks/bench_ray.py [--nodes 1,2,3] [--candidates 1200] [--starts 16]
        [--repeats 1] [--out bench-out]

A ``ray.cluster_utils.Cluster`` on this machine (as Ray tests itself): a head raylet with no
CPU (the driver's) and worker raylets of one CPU each, added one by one; with n worker nodes
the search runs ``--executor ray`` with n workers, one actor per node. Beside each, the
process pool with n workers on the same machine, the same search. Every run is the same
evolve search on sr-damped (seed, candidate budget): the records are checked equal across
runs. The rate is candidates decided per second between the first and the last result, so
the actors' start-up is left out.

Each node here is a set of processes on one machine: nodes share its cores, so the rate
cannot grow past as many nodes as the machine has free cores (the figures say how many it
has and its load average). Writes ``ray.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from tempfile import TemporaryDirectory

SEED, BATCH = 5, 64


def run(executor: str, workers: int, candidates: int, starts: int, db: Path) -> tuple[float, list]:
    """(candidates per second between the first and the last result, record keys)."""
    from ndvm import tasks
    from ndvm.search import Budget, CalibLimits, run_search
    from ndvm.search.evolve import EvolveProposer

    task = tasks.get("sr-damped")
    marks: list[tuple[float, int]] = []

    def progress(p) -> None:
        marks.append((time.perf_counter(), p.evaluated + p.rejected))

    st = run_search(task, EvolveProposer(task.search.grammar, task.search.seeds), db,
                    budget=Budget(candidates=candidates), workers=workers, seed=SEED,
                    batch_size=BATCH, limits=CalibLimits(starts=starts), executor=executor,
                    progress=progress)  # fmt: skip
    (t0, n0), (t1, n1) = marks[0], marks[-1]
    keys = [(r.idx, r.candidate.src, r.status, r.evaluation and r.evaluation.params)
            for r in st.records]  # fmt: skip
    return (n1 - n0) / (t1 - t0), keys


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="1,2,3")
    ap.add_argument("--candidates", type=int, default=1200)
    ap.add_argument("--starts", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    sizes = sorted({int(n) for n in args.nodes.split(",")})
    c = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 0})
    rows, ref = [], None
    try:
        with TemporaryDirectory() as tmp:
            for n in sizes:
                while len(c.worker_nodes) < n:
                    c.add_node(num_cpus=1)
                c.wait_for_nodes()
                for rep in range(args.repeats):
                    load = os.getloadavg()[0]
                    row = {"nodes": n, "repeat": rep, "load_before": load}
                    for ex in ("ray", "auto"):
                        db = Path(tmp, f"{ex}-{n}-{rep}.db")
                        rate, keys = run(ex, n, args.candidates, args.starts, db)
                        ref = ref or keys
                        assert keys == ref, f"{ex} with {n} workers: other records"
                        row["ray" if ex == "ray" else "processes"] = rate
                    rows.append(row)
                    print(f"{n} node(s): ray {row['ray']:7.1f}/s, processes "
                          f"{row['processes']:7.1f}/s (load {load:.2f})", flush=True)  # fmt: skip
    finally:
        ray.shutdown()
        c.shutdown()
    one = next(r["ray"] for r in rows if r["nodes"] == sizes[0])
    for r in rows:
        r["ray_vs_first"] = r["ray"] / one
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"cpus": os.cpu_count(), "candidates": args.candidates, "starts": args.starts,
              "rows": rows}  # fmt: skip
    (out / "ray.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
