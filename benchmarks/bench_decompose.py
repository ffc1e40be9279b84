"""Decomposition benchmark (thin wrapper): ``python benchmarks/bench_decompose.py [--quick]``.

The logic lives in ``ndvm.bench.suites``; results go to ``--out`` (default results/bench/).
"""

from __future__ import annotations

import sys

from ndvm.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "decompose", *sys.argv[1:]]))
