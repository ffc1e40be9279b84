"""Line counts per folder, and the size budget CI enforces.

Usage: ``python tools/sz.py [--check]``. ``--check`` exits 1 when a Python module exceeds
``PY_MAX`` lines or a C++ source exceeds ``CPP_MAX`` lines (STYLE.md 2.1 size budgets).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY_MAX = 650  # the ~500-line target, with headroom; the check catches runaway modules
CPP_MAX = 1000
GENERATED = {"cpp/include/ndvm/prims.inc"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    totals: dict[str, int] = defaultdict(int)
    over: list[str] = []
    for path in sorted(ROOT.glob("**/*")):
        rel = path.relative_to(ROOT).as_posix()
        if not path.is_file() or rel in GENERATED or rel.startswith((".venv", "build", ".git")):
            continue
        if path.suffix not in (".py", ".cpp", ".hpp", ".h"):
            continue
        n = sum(1 for _ in path.open(encoding="utf-8", errors="replace"))
        totals[str(Path(rel).parent)] += n
        limit = PY_MAX if path.suffix == ".py" else CPP_MAX
        if n > limit and rel.startswith(("src/", "cpp/", "bindings/")):
            over.append(f"{rel}: {n} lines (budget {limit})")
    for folder, n in sorted(totals.items()):
        print(f"{n:7d}  {folder}")
    print(f"{sum(totals.values()):7d}  total")
    for line in over:
        print("over budget:", line, file=sys.stderr)
    return 1 if (args.check and over) else 0


if __name__ == "__main__":
    sys.exit(main())
