"""Reactive graph engine: exact downstream-cone recomputation for intervention sweeps.

``Graph`` keeps cached values under the closure invariant and recomputes only invalid nodes
that a demand needs; ``sweep`` patches sites one at a time and copy-restores each cone.
Torch is optional: torch-dependent builders import it lazily.
"""

from ndvm.graph.dag import Graph as Graph
from ndvm.graph.errors import CycleError as CycleError
from ndvm.graph.errors import EvaluationError as EvaluationError
from ndvm.graph.errors import GraphError as GraphError
from ndvm.graph.errors import NotAnEdgeError as NotAnEdgeError
from ndvm.graph.errors import OverlappingPatchError as OverlappingPatchError
from ndvm.graph.errors import StaleCacheError as StaleCacheError
from ndvm.graph.errors import UnknownNodeError as UnknownNodeError
from ndvm.graph.ledger import Event as Event
from ndvm.graph.ledger import Ledger as Ledger
from ndvm.graph.ledger import Report as Report
from ndvm.graph.ledger import SiteRecord as SiteRecord
from ndvm.graph.patching import BLOCK_INPUT as BLOCK_INPUT
from ndvm.graph.patching import Block as Block
from ndvm.graph.patching import Cache as Cache
from ndvm.graph.patching import Step as Step
from ndvm.graph.sweep import Site as Site
from ndvm.graph.sweep import SweepResult as SweepResult
from ndvm.graph.sweep import sweep as sweep

_TLENS = ("from_transformer_lens", "sweep_positions", "tl_cache", "UnsupportedModelError")
_LAZY = {  # torch-dependent names (module of each), imported on first use
    **dict.fromkeys(_TLENS, "tlens"),
    **dict.fromkeys(("attribution_sweep", "agreement"), "attribution"),
    "sweep_hook": "rowsweep",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"ndvm.graph.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'ndvm.graph' has no attribute {name!r}")
