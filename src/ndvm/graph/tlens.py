"""Graphs of TransformerLens ``HookedTransformer`` models, built from the model's own weights.

``from_transformer_lens(model, tokens)`` reads the weights and config of a HookedTransformer
(layer norms with biases, attention biases, learned or rotary positions, GELU/ReLU/SiLU
MLPs) and builds an
engine graph whose nodes carry TransformerLens hook names; per-head nodes add ``.{head}``
(``blocks.0.attn.hook_z.3``). ``tl_cache(g)`` returns values in TransformerLens' shapes, keyed by
hook name. Models the builder does not cover raise ``UnsupportedModelError``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError
from ndvm.graph.sweep import site_name

PER_HEAD = ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_pattern", "attn.hook_z",
            "attn.hook_result")  # fmt: skip
_ACTS = {
    "gelu": F.gelu,
    "gelu_new": partial(F.gelu, approximate="tanh"),
    "gelu_pytorch_tanh": partial(F.gelu, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
}


class UnsupportedModelError(GraphError):
    """The model uses a feature ``from_transformer_lens`` does not build."""


def _check(cfg: Any) -> None:
    bad = []
    if cfg.positional_embedding_type not in ("standard", "rotary"):
        bad.append(f"positional_embedding_type={cfg.positional_embedding_type!r}")
    if cfg.normalization_type not in ("LN", None):
        bad.append(f"normalization_type={cfg.normalization_type!r}")
    if cfg.act_fn not in _ACTS and not cfg.attn_only:
        bad.append(f"act_fn={cfg.act_fn!r}")
    for flag in ("gated_mlp", "parallel_attn_mlp", "attn_only"):
        if getattr(cfg, flag, False):
            bad.append(f"{flag}=True")
    if getattr(cfg, "n_key_value_heads", None) not in (None, cfg.n_heads):
        bad.append("grouped-query attention")
    if getattr(cfg, "use_dynamic_ntk_rope", False):
        bad.append("use_dynamic_ntk_rope=True")
    if cfg.attention_dir != "causal":
        bad.append(f"attention_dir={cfg.attention_dir!r}")
    if bad:
        raise UnsupportedModelError("from_transformer_lens does not build: " + ", ".join(bad))


def normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    x = x - x.mean(-1, keepdim=True)
    return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()


def scale_shift(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x * w + b


def affine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x @ w + b


def embed(tokens: torch.Tensor, w_e: torch.Tensor) -> torch.Tensor:
    return w_e[tokens]


def pos_embed(tokens: torch.Tensor, w_pos: torch.Tensor) -> torch.Tensor:
    return w_pos[: tokens.shape[-1]].expand(tokens.shape[0], -1, -1)


def rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dim: int, adjacent: bool
) -> torch.Tensor:
    """Rotate the first ``dim`` features of x [batch, pos, d_head] by position (TL's RoPE)."""
    rot, rest = x[..., :dim], x[..., dim:]
    if adjacent:  # pairs (0, 1), (2, 3), ...
        flip = torch.stack([-rot[..., 1::2], rot[..., ::2]], dim=-1).flatten(-2)
    else:  # pairs (i, i + dim/2)
        flip = torch.cat([-rot[..., dim // 2 :], rot[..., : dim // 2]], dim=-1)
    t = x.shape[-2]
    return torch.cat([rot * cos[:t] + flip * sin[:t], rest], dim=-1)


def pattern(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    s = (q @ k.transpose(-1, -2)) / scale
    t = s.shape[-1]
    mask = torch.ones(t, t, dtype=torch.bool, device=s.device).triu(1)
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)


def total(b: torch.Tensor, *xs: torch.Tensor) -> torch.Tensor:
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out + b


def from_transformer_lens(model: Any, tokens: torch.Tensor) -> Graph:
    """The engine graph of a HookedTransformer on ``tokens`` [batch, pos]; output ``logits``."""
    cfg = model.cfg
    _check(cfg)
    if tokens.ndim != 2:
        raise GraphError(f"tokens must be [batch, pos], got shape {tuple(tokens.shape)}")
    g = Graph()
    g.leaf("tokens", tokens)
    for name, p in model.named_parameters():
        g.leaf(name, p.detach(), kind="param")
    for name, buf in model.named_buffers():  # the model's own RoPE tables
        if name.endswith(("rotary_sin", "rotary_cos")):
            g.leaf(name, buf.detach(), kind="param")
    g.rule("hook_embed", embed, ["tokens", "embed.W_E"], kind="embed")
    resid = "blocks.0.hook_resid_pre"
    if cfg.positional_embedding_type == "rotary":
        g.alias(resid, "hook_embed")
    else:
        g.rule("hook_pos_embed", pos_embed, ["tokens", "pos_embed.W_pos"], kind="embed")
        g.rule(resid, torch.add, ["hook_embed", "hook_pos_embed"], kind="embed")
    for layer in range(cfg.n_layers):
        if layer > 0:
            g.alias(f"blocks.{layer}.hook_resid_pre", resid)
        resid = _add_layer(g, cfg, layer, resid)
    final = _norm(g, cfg, "ln_final", resid, {"kind": "final"})
    g.rule("logits", affine, [final, "unembed.W_U", "unembed.b_U"], kind="final")
    return g


def _norm(g: Graph, cfg: Any, prefix: str, x: str, meta: dict[str, Any]) -> str:
    if cfg.normalization_type is None:
        return x
    name = f"{prefix}.hook_normalized"
    g.rule(name, partial(normalize, eps=cfg.eps), [x], **meta)
    g.rule(f"{prefix}.out", scale_shift, [name, f"{prefix}.w", f"{prefix}.b"], **meta)
    return f"{prefix}.out"


def _head_param(g: Graph, p: str, name: str, h: int) -> str:
    leaf = f"{p}attn.{name}.{h}"
    g.leaf(leaf, g.value(f"{p}attn.{name}")[h], kind="param")
    return leaf


def _rotate(g: Graph, cfg: Any, layer: int, h: int, x: str) -> str:
    """``blocks.{l}.attn.hook_rot_q.{h}`` (or ``_k``) from the unrotated ``x``."""
    name = site_name(x.split(".")[-2].replace("hook_", "attn.hook_rot_"), layer, h)
    p = f"blocks.{layer}.attn."
    fn = partial(rotary, dim=cfg.rotary_dim, adjacent=bool(cfg.rotary_adjacent_pairs))
    g.rule(name, fn, [x, p + "rotary_cos", p + "rotary_sin"], layer=layer, head=h)
    return name


def _add_layer(g: Graph, cfg: Any, layer: int, resid: str) -> str:
    p, meta = f"blocks.{layer}.", {"layer": layer}
    ln1 = _norm(g, cfg, f"{p}ln1", resid, meta)
    scale = cfg.attn_scale if cfg.use_attn_scale else 1.0
    results = []
    for h in range(cfg.n_heads):
        hm = {"head": h, **meta}
        for w in ("Q", "K", "V"):
            ins = [ln1, _head_param(g, p, f"W_{w}", h), _head_param(g, p, f"b_{w}", h)]
            g.rule(site_name(f"attn.hook_{w.lower()}", layer, h), affine, ins, **hm)
        q, k, v, pat, z, res = (site_name(n, layer, h) for n in PER_HEAD)
        if cfg.positional_embedding_type == "rotary":
            q, k = _rotate(g, cfg, layer, h, q), _rotate(g, cfg, layer, h, k)
        g.rule(pat, partial(pattern, scale=scale), [q, k], **hm)
        g.rule(z, torch.matmul, [pat, v], kind="site", **hm)
        g.rule(res, torch.matmul, [z, _head_param(g, p, "W_O", h)], **hm)
        results.append(res)
    g.rule(p + "hook_attn_out", total, [p + "attn.b_O", *results], **meta)
    g.rule(p + "hook_resid_mid", torch.add, [resid, p + "hook_attn_out"], **meta)
    ln2 = _norm(g, cfg, f"{p}ln2", p + "hook_resid_mid", meta)
    g.rule(p + "mlp.hook_pre", affine, [ln2, p + "mlp.W_in", p + "mlp.b_in"], **meta)
    g.rule(p + "mlp.hook_post", _ACTS[cfg.act_fn], [p + "mlp.hook_pre"], **meta)
    g.rule(p + "hook_mlp_out", affine, [p + "mlp.hook_post", p + "mlp.W_out", p + "mlp.b_out"],
           kind="site", **meta)  # fmt: skip
    g.rule(p + "hook_resid_post", torch.add, [p + "hook_resid_mid", p + "hook_mlp_out"], **meta)
    return p + "hook_resid_post"


def tl_cache(g: Graph, n_layers: int, n_heads: int) -> dict[str, torch.Tensor]:
    """Every hook's value in TransformerLens' shape, keyed by hook name (run_with_cache)."""
    g.demand("logits")
    out: dict[str, torch.Tensor] = {}
    for name in list(g._ids):  # node names and aliases (hook_resid_pre)
        if "hook" in name or name == "logits":
            out[name] = g.get(name)
    for layer in range(n_layers):
        for hook in PER_HEAD + ("attn.hook_rot_q", "attn.hook_rot_k"):
            if site_name(hook, layer, 0) not in g:
                continue
            vals = [g.get(site_name(hook, layer, h)) for h in range(n_heads)]
            dim = 1 if hook == "attn.hook_pattern" else 2  # pattern: [b, head, q, k]
            out[site_name(hook, layer)] = torch.stack(vals, dim=dim)
    return out


def _at_pos(t: int) -> Any:
    def setter(current: torch.Tensor, clean: torch.Tensor) -> torch.Tensor:
        out = current.clone()
        out[:, t] = clean[:, t]
        return out

    return setter


def sweep_positions(
    g: Graph,
    hook: str,
    layers: int,
    positions: int,
    clean: Any,
    metric: Any,
    heads: int | None = None,
) -> torch.Tensor:
    """Patch ``hook`` at each (layer, [head,] position) with its clean value.

    Returns TL's axis order: [layer, pos] or [layer, pos, head]. Each site is a position slice
    of a batched node (no per-position nodes); the recompute is that node's downstream cone.
    """
    from ndvm.graph.sweep import grid, sweep

    sites = grid(hook, layers, heads)
    cols = [
        sweep(g, sites, clean, metric, "logits", setter=_at_pos(t)).values for t in range(positions)
    ]
    return torch.stack(cols, dim=1)
