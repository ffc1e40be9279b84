"""TransformerLens' ``patching.get_act_patch_*`` sweeps on a ``from_transformer_lens`` graph.

Each function takes the graph in its baseline (corrupted) state, the clean ``Cache`` and a
metric of the logits, and returns the tensor TL's function of the same name returns, in TL's
axis order: [layer, pos] for the residual stream and layer outputs, [layer, head] and
[layer, pos, head] for head outputs and q, k, v, and [layer, head], [layer, head, dest_pos]
and [layer, head, dest_pos, src_pos] for attention patterns. The sweeps run on
``rowsweep.sweep_hook`` (row-restricted cones, heads and ``chunk`` positions per pass).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError
from ndvm.graph.patching import Cache
from ndvm.graph.rowsweep import RowSweep, sweep_hook
from ndvm.graph.sweep import site_name

Sweep = Callable[..., torch.Tensor]


def dims(g: Graph) -> tuple[int, int, int]:
    """(layers, heads, positions) of a graph built by ``from_transformer_lens``."""
    layers = 0
    while site_name("attn.hook_q", layers) in g:
        layers += 1
    if not layers or "logits" not in g:
        raise GraphError("not a from_transformer_lens graph (no blocks.0.attn.hook_q / logits)")
    heads = g.meta[g.id("blocks.0.attn.hook_q")]["heads"].n
    return layers, heads, g.get("logits").shape[-2]


def act_patch(
    g: Graph, hook: str, clean: Cache, metric: Callable[[Any], Any], *, heads: bool = False,
    positions: bool = False, sources: bool = False, chunk: int = 4,
) -> RowSweep:  # fmt: skip
    """``sweep_hook`` over every layer [x head] [x position [x source]] of the graph."""
    n_layers, n_heads, seq = dims(g)
    return sweep_hook(
        g, hook, n_layers, clean, metric, heads=n_heads if heads else None,
        positions=seq if positions else None, sources=seq if sources else None, chunk=chunk,
    )  # fmt: skip


def _tl(hook: str, heads: bool, positions: bool, sources: bool, order: tuple[int, ...]) -> Sweep:
    def fn(g: Graph, clean: Cache, metric: Callable[[Any], Any], *, chunk: int = 4) -> Any:
        res = act_patch(g, hook, clean, metric, heads=heads, positions=positions,
                        sources=sources, chunk=chunk)  # fmt: skip
        return res.values.permute(*order, *range(len(order), res.values.ndim))

    fn.__doc__ = f"TL's sweep of ``{hook}`` (layer{', pos' * positions}{', head' * heads})."
    return fn


_HEAD_ALL, _HEAD_POS = (0, 1), (0, 1, 2)
get_act_patch_resid_pre = _tl("hook_resid_pre", False, True, False, (0, 1))
get_act_patch_resid_mid = _tl("hook_resid_mid", False, True, False, (0, 1))
get_act_patch_attn_out = _tl("hook_attn_out", False, True, False, (0, 1))
get_act_patch_mlp_out = _tl("hook_mlp_out", False, True, False, (0, 1))
get_act_patch_attn_head_out_all_pos = _tl("attn.hook_z", True, False, False, _HEAD_ALL)
get_act_patch_attn_head_out_by_pos = _tl("attn.hook_z", True, True, False, _HEAD_POS)
get_act_patch_attn_head_q_all_pos = _tl("attn.hook_q", True, False, False, _HEAD_ALL)
get_act_patch_attn_head_q_by_pos = _tl("attn.hook_q", True, True, False, _HEAD_POS)
get_act_patch_attn_head_k_all_pos = _tl("attn.hook_k", True, False, False, _HEAD_ALL)
get_act_patch_attn_head_k_by_pos = _tl("attn.hook_k", True, True, False, _HEAD_POS)
get_act_patch_attn_head_v_all_pos = _tl("attn.hook_v", True, False, False, _HEAD_ALL)
get_act_patch_attn_head_v_by_pos = _tl("attn.hook_v", True, True, False, _HEAD_POS)
get_act_patch_attn_head_pattern_all_pos = _tl("attn.hook_pattern", True, False, False, _HEAD_ALL)
# sweep_hook gives [layer, pos, head(, src)]; TL's pattern sweeps are [layer, head, dest(, src)]
get_act_patch_attn_head_pattern_by_pos = _tl("attn.hook_pattern", True, True, False, (0, 2, 1))
get_act_patch_attn_head_pattern_dest_src_pos = _tl(
    "attn.hook_pattern", True, True, True, (0, 2, 1, 3)
)


def get_act_patch_attn_head_all_pos_every(g: Graph, clean: Cache, metric: Any) -> torch.Tensor:
    """Head out, q, k, v and pattern, all positions: [5, layer, head]."""
    fns = (get_act_patch_attn_head_out_all_pos, get_act_patch_attn_head_q_all_pos,
           get_act_patch_attn_head_k_all_pos, get_act_patch_attn_head_v_all_pos,
           get_act_patch_attn_head_pattern_all_pos)  # fmt: skip
    return torch.stack([f(g, clean, metric) for f in fns])


def get_act_patch_attn_head_by_pos_every(g: Graph, clean: Cache, metric: Any) -> torch.Tensor:
    """Head out, q, k, v and pattern by (destination) position: [5, layer, pos, head]."""
    fns = (get_act_patch_attn_head_out_by_pos, get_act_patch_attn_head_q_by_pos,
           get_act_patch_attn_head_k_by_pos, get_act_patch_attn_head_v_by_pos)  # fmt: skip
    pattern = act_patch(g, "attn.hook_pattern", clean, metric, heads=True, positions=True)
    return torch.stack([*(f(g, clean, metric) for f in fns), pattern.values])


def get_act_patch_block_every(g: Graph, clean: Cache, metric: Any) -> torch.Tensor:
    """resid_pre, attn_out and mlp_out by position: [3, layer, pos]."""
    fns = (get_act_patch_resid_pre, get_act_patch_attn_out, get_act_patch_mlp_out)
    return torch.stack([f(g, clean, metric) for f in fns])


for _name, _fn in list(globals().items()):  # TL's names on the generated functions
    if _name.startswith("get_act_patch_"):
        _fn.__name__ = _fn.__qualname__ = _name
del _name, _fn
