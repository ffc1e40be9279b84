"""Keeping the LLM busy: endpoint and calibrator utilization with requests issued ahead.

    python benchmarks/bench_llm_busy.py [--latency 2] [--seconds 15] [--ahead 0,2,4]

A stub OpenAI-compatible endpoint on 127.0.0.1 (``tests/search/hostile.py``) answers every
request after ``--latency`` seconds with 8 distinct programs for ``sr-damped``; ``ndvm search``'s
loop (``run_search``, one calibrator in this process, batches of 8) runs ``--seconds`` per
``--llm-ahead`` value, side by side in one run. Printed per value: requests, batches
calibrated, the server's busy fraction (time with at least one request being answered, measured
at the server), the proposer's own measure of it, and the calibrator's busy fraction (the share
of the search not spent waiting for a reply; also after the first reply, which is always
waited for). ``--starts`` sets how heavy a calibration is: 512 leaves the endpoint the slower
side here, 4096 the calibrator. Run it from the repository root.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.search.hostile import Hostile  # noqa: E402

from ndvm.search import Budget, run_search  # noqa: E402
from ndvm.search.evaluate import CalibLimits  # noqa: E402
from ndvm.search.llm import LLMConfig, LLMProposer  # noqa: E402
from ndvm.tasks import get  # noqa: E402

FORMS = (
    "(+ (* a ({u} (* b x))) (* c ({v} (* d ({w} x)))))",
    "(* a ({u} (* b x)) ({v} (+ (* c ({w} x)) d)))",
    "(+ a (* b ({u} ({v} (* c ({w} x))))))",
    "(/ (* a ({u} ({w} x))) (+ b ({v} (* c x))))",
    "(* a ({u} (+ (* b ({w} x)) (* c ({v} x)))))",
)
UNARY = ("exp", "log", "sqrt", "sin", "cos", "abs")
PROGRAMS = [f.format(u=u, v=v, w=w) for u, v, w, f in itertools.product(UNARY, UNARY, UNARY, FORMS)]


def programs(served: int, n: int = 8) -> str:
    """Reply ``served``: ``n`` programs none of the earlier replies had (cycling after 1080)."""
    k = (served - 1) * n
    picks = [PROGRAMS[(k + i) % len(PROGRAMS)] for i in range(n)]
    return "\n".join(f"```scheme\n{p}\n```" for p in picks)


def run(ahead: int, latency: float, seconds: float, batch: int, starts: int) -> dict[str, float]:
    stub = Hostile()
    stub.plan = [("ok", lambda served: programs(served, batch), latency)]
    try:
        cfg = LLMConfig(base_url=stub.url, model="stub", transport="urllib", ahead=ahead)
        prop = LLMProposer(get("sr-damped"), cfg)
        with tempfile.TemporaryDirectory() as tmp:
            st = run_search("sr-damped", prop, Path(tmp) / "b.db", budget=Budget(seconds=seconds),
                            batch_size=batch, limits=CalibLimits(starts=starts))  # fmt: skip
        use, pool = prop.usage(), prop.ahead
        assert pool is not None and pool.t_end is not None
        first = pool.first_wait or 0.0
        return {
            "ahead": ahead, "requests": use.requests, "batches": st.next_batch,
            "calibrated": len(st.evaluated), "server": stub.busy(pool.t0, pool.t_end) / use.seconds,
            "endpoint": use.endpoint_fraction, "calibrator": use.calibrator_fraction,
            "after": 1 - (use.waited - first) / (use.seconds - first),
        }  # fmt: skip
    finally:
        stub.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latency", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--ahead", default="0,1,2,4")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--starts", type=int, default=16, help="starts per candidate")
    args = ap.parse_args()
    print(f"stub latency {args.latency:g}s, {args.seconds:g}s per run, sr-damped, batches of "
          f"{args.batch_size}, {args.starts} starts per candidate")  # fmt: skip
    print(f"{'ahead':>5} {'requests':>8} {'batches':>7} {'calibrated':>10} "
          f"{'server busy':>11} {'(client view)':>13} {'calibrator busy':>15} "
          f"{'(after 1st reply)':>17}")  # fmt: skip
    for ahead in (int(a) for a in args.ahead.split(",")):
        r = run(ahead, args.latency, args.seconds, args.batch_size, args.starts)
        print(f"{r['ahead']:>5} {r['requests']:>8} {r['batches']:>7} {r['calibrated']:>10} "
              f"{r['server']:>11.0%} {r['endpoint']:>13.0%} {r['calibrator']:>15.0%} "
              f"{r['after']:>17.0%}")  # fmt: skip


if __name__ == "__main__":
    main()
