"""Graphs of TransformerLens ``HookedTransformer`` models, built from the model's own weights.

``from_transformer_lens(model, tokens)`` reads the weights and config of a HookedTransformer
(layer norms with biases, attention biases, learned or rotary positions, GELU/ReLU/SiLU
MLPs) and builds an engine graph whose nodes carry TransformerLens hook names. Attention is
batched over heads (``attn.hook_q``, ``attn.hook_pattern``, ``attn.hook_z`` hold every head,
with the position axis at -2, as ``rows`` needs); each head's z is a slice node
``blocks.{l}.attn.hook_z.{h}``, the per-head site. Head h of q, k, v (rot_q, rot_k) and of
the pattern is a slice site such as ``blocks.{l}.attn.hook_q.{h}`` without a node of its
own: the batched node's ``heads`` metadata (a ``rows.HeadAxis``) says where the head sits.
``tl_cache(g)`` returns values in TransformerLens' shapes, keyed by hook name. Models the
builder does not cover raise ``UnsupportedModelError``.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any

import torch
import torch.nn.functional as F

from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError
from ndvm.graph.rows import HeadAxis, RowRule
from ndvm.graph.sweep import site_name

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
    return F.linear(x, w.mT, b)


def embed(tokens: torch.Tensor, w_e: torch.Tensor) -> torch.Tensor:
    return w_e[tokens]


def pos_embed(tokens: torch.Tensor, w_pos: torch.Tensor) -> torch.Tensor:
    return w_pos[: tokens.shape[-1]].expand(tokens.shape[0], -1, -1)


def heads_of(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[..., pos, head * d_head] -> [..., head, pos, d_head]."""
    return x.reshape(*x.shape[:-1], n_heads, x.shape[-1] // n_heads).transpose(-3, -2)


def rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dim: int, adjacent: bool,
    n_heads: int, start: int = 0,
) -> torch.Tensor:  # fmt: skip
    """Rotate the first ``dim`` features of each head of x [..., pos, head * d_head] (RoPE).

    The rows of ``x`` are positions ``start``, ``start + 1``, ...
    """
    xh = x.reshape(*x.shape[:-1], n_heads, x.shape[-1] // n_heads)
    rot, rest = xh[..., :dim], xh[..., dim:]
    if adjacent:  # pairs (0, 1), (2, 3), ...
        flip = torch.stack([-rot[..., 1::2], rot[..., ::2]], dim=-1).flatten(-2)
    else:  # pairs (i, i + dim/2)
        flip = torch.cat([-rot[..., dim // 2 :], rot[..., : dim // 2]], dim=-1)
    t = slice(start, start + x.shape[-2])
    out = rot * cos[t].unsqueeze(-2) + flip * sin[t].unsqueeze(-2)
    return torch.cat([out, rest], dim=-1).reshape(x.shape)


@lru_cache(maxsize=256)
def _causal(rows: int, cols: int, start: int, device: torch.device) -> torch.Tensor:
    return torch.ones(rows, cols, dtype=torch.bool, device=device).triu(1 + start)


def pattern(
    q: torch.Tensor, k: torch.Tensor, scale: float, n_heads: int, start: int = 0
) -> torch.Tensor:
    """Causal attention [..., head, query, key] of queries at positions ``start``, ..."""
    s = (heads_of(q, n_heads) @ heads_of(k, n_heads).transpose(-1, -2)) / scale
    mask = _causal(s.shape[-2], s.shape[-1], start, s.device)
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)


def mix(pat: torch.Tensor, v: torch.Tensor, n_heads: int) -> torch.Tensor:
    """hook_z of all heads, [..., pos, head * d_head]."""
    z = pat @ heads_of(v, n_heads)
    return z.transpose(-3, -2).reshape(*z.shape[:-3], z.shape[-2], -1)


def head_slice(z: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    return z[..., lo:hi]


def out_proj(w: torch.Tensor, b: torch.Tensor, *zs: torch.Tensor) -> torch.Tensor:
    """hook_attn_out from every head's z [..., pos, d_head] and W_O as [head * d_head, d]."""
    return F.linear(torch.cat(torch.broadcast_tensors(*zs), dim=-1), w.mT, b)


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


def _flat(g: Graph, p: str, name: str) -> str:
    """Leaf ``{p}attn.{name}.flat``: a per-head weight with its heads merged into one axis."""
    w = g.value(f"{p}attn.{name}")
    if name == "W_O":  # [head, d_head, d_model] -> [head * d_head, d_model]
        flat = w.reshape(-1, w.shape[-1])
    elif name.startswith("W_"):  # [head, d_model, d_head] -> [d_model, head * d_head]
        flat = w.permute(1, 0, 2).reshape(w.shape[1], -1)
    else:  # b_Q, b_K, b_V: [head, d_head] -> [head * d_head]
        flat = w.reshape(-1)
    g.leaf(f"{p}attn.{name}.flat", flat.contiguous(), kind="param")
    return f"{p}attn.{name}.flat"


def _rotate(g: Graph, cfg: Any, layer: int, x: str) -> str:
    """``blocks.{l}.attn.hook_rot_q`` (or ``_k``) from the unrotated ``x``."""
    p = f"blocks.{layer}.attn."
    name = x.replace("hook_", "hook_rot_")
    fn = partial(rotary, dim=cfg.rotary_dim, adjacent=bool(cfg.rotary_adjacent_pairs),
                 n_heads=cfg.n_heads)  # fmt: skip
    rows = RowRule(at=lambda start: partial(fn, start=start))
    g.rule(name, fn, [x, p + "rotary_cos", p + "rotary_sin"], layer=layer, rows=rows,
           heads=HeadAxis(cfg.n_heads, cfg.d_head))  # fmt: skip
    return name


def _attention(g: Graph, cfg: Any, layer: int, ln1: str) -> str:
    """q, k, v, pattern and z of all heads as batched nodes; z per head as slices."""
    p, meta, n = f"blocks.{layer}.", {"layer": layer}, cfg.n_heads
    qkv, cols = [], HeadAxis(n, cfg.d_head)  # head h of q, k, v: columns h*d_head:...
    for w in ("Q", "K", "V"):
        ins = [ln1, _flat(g, p, f"W_{w}"), _flat(g, p, f"b_{w}")]
        qkv.append(g.rule(f"{p}attn.hook_{w.lower()}", affine, ins, heads=cols, **meta))
    q, k, v = (g.names[i] for i in qkv)
    if cfg.positional_embedding_type == "rotary":
        q, k = _rotate(g, cfg, layer, q), _rotate(g, cfg, layer, k)
    scale = cfg.attn_scale if cfg.use_attn_scale else 1.0
    fn = partial(pattern, scale=scale, n_heads=n)
    rows = RowRule(full=(1,), at=lambda start: partial(fn, start=start))
    g.rule(p + "attn.hook_pattern", fn, [q, k], rows=rows, heads=HeadAxis(n), **meta)
    z = p + "attn.hook_z"
    mixed = partial(mix, n_heads=n)
    g.rule(z, mixed, [p + "attn.hook_pattern", v], rows=RowRule(full=(1,)), **meta)
    heads = []
    for h in range(n):
        name = site_name("attn.hook_z", layer, h)
        lo = h * cfg.d_head
        g.rule(name, partial(head_slice, lo=lo, hi=lo + cfg.d_head), [z], kind="site", head=h,
               **meta)  # fmt: skip
        heads.append(name)
    ins = [_flat(g, p, "W_O"), p + "attn.b_O", *heads]
    g.rule(p + "hook_attn_out", out_proj, ins, **meta)
    return p + "hook_attn_out"


def _add_layer(g: Graph, cfg: Any, layer: int, resid: str) -> str:
    p, meta = f"blocks.{layer}.", {"layer": layer}
    ln1 = _norm(g, cfg, f"{p}ln1", resid, meta)
    attn_out = _attention(g, cfg, layer, ln1)
    g.rule(p + "hook_resid_mid", torch.add, [resid, attn_out], **meta)
    ln2 = _norm(g, cfg, f"{p}ln2", p + "hook_resid_mid", meta)
    g.rule(p + "mlp.hook_pre", affine, [ln2, p + "mlp.W_in", p + "mlp.b_in"], **meta)
    g.rule(p + "mlp.hook_post", _ACTS[cfg.act_fn], [p + "mlp.hook_pre"], **meta)
    g.rule(p + "hook_mlp_out", affine, [p + "mlp.hook_post", p + "mlp.W_out", p + "mlp.b_out"],
           kind="site", **meta)  # fmt: skip
    g.rule(p + "hook_resid_post", torch.add, [p + "hook_resid_mid", p + "hook_mlp_out"], **meta)
    return p + "hook_resid_post"


BATCHED = ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_z", "attn.hook_rot_q",
           "attn.hook_rot_k")  # fmt: skip


def tl_cache(g: Graph, n_layers: int, n_heads: int) -> dict[str, torch.Tensor]:
    """Every hook's value in TransformerLens' shape, keyed by hook name (run_with_cache)."""
    g.demand("logits")
    out: dict[str, torch.Tensor] = {}
    for name in list(g._ids):  # node names and aliases (hook_resid_pre)
        if "hook" in name or name == "logits":
            out[name] = g.get(name)
    for layer in range(n_layers):
        for hook in BATCHED:  # [batch, pos, head * d_head] -> [batch, pos, head, d_head]
            name = site_name(hook, layer)
            if name in out:
                out[name] = out[name].reshape(*out[name].shape[:-1], n_heads, -1)
    return out


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
    of a batched node (no per-position nodes); ``rowsweep.sweep_hook`` recomputes its cone on
    the rows from that position on.
    """
    from ndvm.graph.rowsweep import sweep_hook

    return sweep_hook(g, hook, layers, clean, metric, heads=heads, positions=positions).values
