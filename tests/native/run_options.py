"""``native._run_options`` with some of the core's run options changed (tests of the fused,
blocked and chained paths patch it in to compare them with the default path)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ndvm.backends import native

ORIGINAL = native._run_options
FIELDS = ("max_steps", "max_heap", "max_depth", "deadline", "dmci", "replay", "client", "fused",
          "block_rows", "chain_lanes", "pairs", "updates")  # fmt: skip


def run_options_with(**changes: Any) -> Callable[..., Any]:
    """``native._run_options`` whose options are the original's with ``changes`` applied."""

    def options(*args: Any, **kwargs: Any) -> Any:
        opts = ORIGINAL(*args, **kwargs)
        module = native._core32 if type(opts).__module__.endswith("_core32") else native._core
        return module.RunOptions(**{f: getattr(opts, f) for f in FIELDS} | changes)

    return options
