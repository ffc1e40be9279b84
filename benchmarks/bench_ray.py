"""The search on Ray, node by node: candidates per second with 1, 2 (, 3) worker nodes.

    python benchmarks/bench_ray.py [--nodes 1,2,3] [--candidates 6000] [--starts 16]
        [--repeats 3] [--out bench-out]

A ``ray.cluster_utils.Cluster`` on this machine (as Ray tests itself): a head raylet with no
CPU (the driver's) and worker raylets of one CPU each, added one by one; with n worker nodes
the search runs ``--executor ray`` with n workers, one actor per node. Beside each, the
same search without Ray ("local": in this process for one worker, else the process pool with
n workers). Sizes are interleaved over ``--repeats`` (medians). Every run is the same
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


def resize(c, n: int) -> None:
    """Grow or shrink the cluster to ``n`` worker nodes of one CPU."""
    while len(c.worker_nodes) < n:
        c.add_node(num_cpus=1)
    while len(c.worker_nodes) > n:
        c.remove_node(next(iter(c.worker_nodes)))
    c.wait_for_nodes()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="1,2,3")
    ap.add_argument("--candidates", type=int, default=6000)
    ap.add_argument("--starts", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="bench-out")
    args = ap.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    sizes = sorted({int(n) for n in args.nodes.split(",")})
    c = Cluster(initialize_head=True, connect=True, head_node_args={"num_cpus": 0})
    rows, ref = [], None
    try:
        with TemporaryDirectory() as tmp:
            for rep in range(args.repeats):  # sizes interleaved: load drifts alike for each
                for n in sizes:
                    resize(c, n)
                    row = {"nodes": n, "repeat": rep, "load_before": os.getloadavg()[0]}
                    for ex in ("ray", "auto"):
                        db = Path(tmp, f"{ex}-{n}-{rep}.db")
                        rate, keys = run(ex, n, args.candidates, args.starts, db)
                        ref = ref or keys
                        assert keys == ref, f"{ex} with {n} workers: other records"
                        row["ray" if ex == "ray" else "local"] = rate
                    row["load_after"] = os.getloadavg()[0]
                    rows.append(row)
                    print(f"{n} node(s): ray {row['ray']:7.1f}/s, local {row['local']:7.1f}/s "
                          f"(load {row['load_before']:.2f})", flush=True)  # fmt: skip
    finally:
        ray.shutdown()
        c.shutdown()
    summary = {}
    for n in sizes:
        ray_rates = sorted(r["ray"] for r in rows if r["nodes"] == n)
        local = sorted(r["local"] for r in rows if r["nodes"] == n)
        summary[n] = {"ray": ray_rates[len(ray_rates) // 2], "local": local[len(local) // 2]}
    one = summary[sizes[0]]["ray"] / sizes[0]
    for n, v in summary.items():
        v["ray_per_node_vs_first"] = v["ray"] / n / one
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"cpus": os.cpu_count(), "candidates": args.candidates, "starts": args.starts,
              "median": summary, "rows": rows}  # fmt: skip
    (out / "ray.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
