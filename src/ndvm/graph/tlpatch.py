"""TransformerLens' ``patching.get_act_patch_*`` sweeps on a ``from_transformer_lens`` graph.

Each function takes TL's own arguments ``(model, corrupted_tokens, clean_cache,
patching_metric)`` with a HookedTransformer and TL's ``ActivationCache`` (or any mapping of
hook names to tensors, in TL's shapes), or ndvm's ``(graph, clean, metric)`` with the graph in
its baseline (corrupted) state and a ``Cache`` (or an ``ActivationCache``). Each returns the
tensor TL's function of the same name returns, in TL's axis order: [layer, pos] for the
residual stream and layer outputs, [layer, head] and [layer, pos, head] for head outputs and
q, k, v, and [layer, head], [layer, head, dest_pos] and [layer, head, dest_pos, src_pos] for
attention patterns. The sweeps run on ``rowsweep.sweep_hook`` (row-restricted cones, heads
and ``chunk`` positions per pass).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError, UnknownNodeError
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


class ShapeMismatchError(GraphError):
    """The clean cache and the corrupted run differ in batch, positions or widths."""


def hooks(g: Graph) -> list[str]:
    """The hook names a sweep can patch (layer 0's, without ``blocks.0.``)."""
    return sorted(n[len("blocks.0.") :] for n in g._ids if n.startswith("blocks.0.") and
                  "hook" in n and not n.rsplit(".", 1)[-1].isdigit())  # fmt: skip


def check_hook(g: Graph, hook: str) -> None:
    if site_name(hook, 0) not in g:
        raise UnknownNodeError(f"unknown hook {hook!r}; this model has: {', '.join(hooks(g))}")


def from_activation_cache(g: Graph, acts: Any) -> Cache:
    """A ``Cache`` of the graph's hook nodes from TL's ``ActivationCache`` (or a mapping).

    TL's [batch, pos, head, width] values become the graph's [batch, pos, head * width];
    ``attn.hook_z.{h}`` sites take head h of ``attn.hook_z``.
    """
    g.demand("logits")
    have = set(acts.keys())
    values: dict[int, Any] = {}
    for name, i in g._ids.items():
        base, _, head = name.rpartition(".")
        if name in have:
            v = torch.as_tensor(acts[name])
            if g.meta[i].get("heads") is not None and v.ndim == g.value(i).ndim + 1:
                v = v.flatten(-2)
        elif head.isdigit() and base in have and g.meta[i].get("kind") == "site":
            v = torch.as_tensor(acts[base])[..., int(head), :]
        else:
            continue
        if v.shape != g.value(i).shape:
            raise ShapeMismatchError(
                f"clean cache {name!r} has shape {tuple(v.shape)} but the corrupted run has "
                f"{tuple(g.value(i).shape)}: clean and corrupted prompts need the same batch "
                "size and length"
            )
        values[i] = v.to(g.value(i).dtype)
    return Cache(values, g.revision, {})


def _graph_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Graph, Cache, Any]:
    """(graph, clean Cache, metric) from TL's or ndvm's arguments."""
    names = ("model", "corrupted_tokens", "clean_cache", "patching_metric")
    if args and isinstance(args[0], Graph):
        if len(args) + len(kwargs) != 3:
            raise GraphError("ndvm form: f(graph, clean, metric)")
        g, clean, metric = (*args, *kwargs.values())
    else:
        given = dict(zip(names, args)) | kwargs
        missing = [n for n in names if n not in given]
        if missing or len(given) != 4:
            raise GraphError(f"TL form: f({', '.join(names)}); missing {missing or 'none'}, "
                             f"got {sorted(given)}")  # fmt: skip
        from ndvm.graph.tlens import from_transformer_lens

        tokens = given["corrupted_tokens"]
        if not isinstance(tokens, torch.Tensor):
            raise GraphError(f"corrupted_tokens must be a tensor of token ids, got "
                             f"{type(tokens).__name__} (use model.to_tokens)")  # fmt: skip
        g = from_transformer_lens(given["model"], tokens)
        clean, metric = given["clean_cache"], given["patching_metric"]
    if not isinstance(clean, Cache):
        clean = from_activation_cache(g, clean)
    return g, clean, metric


def act_patch(
    g: Graph, hook: str, clean: Cache, metric: Callable[[Any], Any], *, heads: bool = False,
    positions: bool = False, sources: bool = False, chunk: int = 4,
) -> RowSweep:  # fmt: skip
    """``sweep_hook`` over every layer [x head] [x position [x source]] of the graph."""
    n_layers, n_heads, seq = dims(g)
    check_hook(g, hook)
    return sweep_hook(
        g, hook, n_layers, clean, metric, heads=n_heads if heads else None,
        positions=seq if positions else None, sources=seq if sources else None, chunk=chunk,
    )  # fmt: skip


def _tl(hook: str, heads: bool, positions: bool, sources: bool, order: tuple[int, ...]) -> Sweep:
    def fn(*args: Any, chunk: int = 4, **kwargs: Any) -> Any:
        g, clean, metric = _graph_args(args, kwargs)
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


def get_act_patch_attn_head_all_pos_every(*args: Any, **kwargs: Any) -> torch.Tensor:
    """Head out, q, k, v and pattern, all positions: [5, layer, head]."""
    g, clean, metric = _graph_args(args, kwargs)
    fns = (get_act_patch_attn_head_out_all_pos, get_act_patch_attn_head_q_all_pos,
           get_act_patch_attn_head_k_all_pos, get_act_patch_attn_head_v_all_pos,
           get_act_patch_attn_head_pattern_all_pos)  # fmt: skip
    return torch.stack([f(g, clean, metric) for f in fns])


def get_act_patch_attn_head_by_pos_every(*args: Any, **kwargs: Any) -> torch.Tensor:
    """Head out, q, k, v and pattern by (destination) position: [5, layer, pos, head]."""
    g, clean, metric = _graph_args(args, kwargs)
    fns = (get_act_patch_attn_head_out_by_pos, get_act_patch_attn_head_q_by_pos,
           get_act_patch_attn_head_k_by_pos, get_act_patch_attn_head_v_by_pos)  # fmt: skip
    pattern = act_patch(g, "attn.hook_pattern", clean, metric, heads=True, positions=True)
    return torch.stack([*(f(g, clean, metric) for f in fns), pattern.values])


def get_act_patch_block_every(*args: Any, **kwargs: Any) -> torch.Tensor:
    """resid_pre, attn_out and mlp_out by position: [3, layer, pos]."""
    g, clean, metric = _graph_args(args, kwargs)
    fns = (get_act_patch_resid_pre, get_act_patch_attn_out, get_act_patch_mlp_out)
    return torch.stack([f(g, clean, metric) for f in fns])


for _name, _fn in list(globals().items()):  # TL's names on the generated functions
    if _name.startswith("get_act_patch_"):
        _fn.__name__ = _fn.__qualname__ = _name
del _name, _fn
