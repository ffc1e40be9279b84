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

from functools import partial
from typing import Any

import torch

from ndvm.graph import tlops as op
from ndvm.graph.dag import Graph
from ndvm.graph.errors import GraphError
from ndvm.graph.rows import HeadAxis, RowRule
from ndvm.graph.sweep import site_name

NORMS = ("LN", "LNPre", "RMS", "RMSPre", None)
REFUSED = {  # config field -> (value that we build, the nearest supported loading)
    "use_attn_in": (False, "load it with use_attn_in=False (model.set_use_attn_in(False))"),
    "use_qk_norm": (False, "no TransformerLens loading removes q/k norms"),
    "clip_qkv": (None, "no TransformerLens loading removes the q/k/v clip"),
    "use_logn_attn": (False, "set cfg.use_logn_attn=False (same results up to train_seq_length)"),
    "use_attention_sinks": (False, "no TransformerLens loading removes attention sinks"),
    "use_normalization_before_and_after": (False, "no loading removes the extra norms"),
    "post_embedding_ln": (False, "no TransformerLens loading removes the embedding norm"),
    "use_dynamic_ntk_rope": (False, "set cfg.use_dynamic_ntk_rope=False within n_ctx"),
    "num_experts": (None, "mixture-of-experts MLPs are not built; use a dense model"),
    "load_in_4bit": (False, "load it without load_in_4bit"),
    "attention_dir": ("causal", "only causal (decoder) models are built"),
}


class UnsupportedModelError(GraphError):
    """The model uses a feature ``from_transformer_lens`` does not build."""


def _check(cfg: Any) -> None:
    bad = []
    if cfg.positional_embedding_type not in ("standard", "rotary", "shortformer"):
        bad.append(f"positional_embedding_type={cfg.positional_embedding_type!r} (built: "
                   "standard, rotary, shortformer)")  # fmt: skip
    if cfg.normalization_type not in NORMS:
        bad.append(f"normalization_type={cfg.normalization_type!r} (built: {NORMS})")
    if not cfg.attn_only and cfg.act_fn not in op.ACTS:
        bad.append(f"act_fn={cfg.act_fn!r} (built: {', '.join(op.ACTS)})")
    if getattr(cfg, "gated_mlp", False) and cfg.act_fn == "solu_ln" and not cfg.attn_only:
        bad.append("gated_mlp with act_fn='solu_ln' (gated MLPs are built with the other "
                   "activations)")  # fmt: skip
    for field, (ok, hint) in REFUSED.items():
        if getattr(cfg, field, ok) not in (ok, 0):
            bad.append(f"{field}={getattr(cfg, field)!r}: {hint}")
    for field in ("attn_scores_soft_cap", "output_logits_soft_cap"):
        if getattr(cfg, field, -1.0) > 0:
            bad.append(f"{field}={getattr(cfg, field)}: no TransformerLens loading removes it")
    if cfg.original_architecture in _post_norm():
        bad.append(f"post-norm architecture {cfg.original_architecture}: not built")
    if bad:
        raise UnsupportedModelError("from_transformer_lens does not build: " + "; ".join(bad))


def _post_norm() -> tuple[str, ...]:
    try:
        from transformer_lens.utilities.architectures import POST_NORM_ARCHITECTURES
    except ImportError:  # older TransformerLens: no post-norm architectures
        return ()
    return tuple(POST_NORM_ARCHITECTURES)


def from_transformer_lens(model: Any, tokens: torch.Tensor) -> Graph:
    """The engine graph of a HookedTransformer on ``tokens`` [batch, pos]; output ``logits``."""
    cfg = model.cfg
    _check(cfg)
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2:
        raise GraphError(f"tokens must be [batch, pos], got {getattr(tokens, 'shape', tokens)!r}")
    if not 0 < tokens.shape[1] <= cfg.n_ctx:
        raise GraphError(f"tokens have {tokens.shape[1]} positions; the model takes 1..{cfg.n_ctx}")
    g = Graph()
    g.leaf("tokens", tokens)
    for name, p in model.named_parameters():
        g.leaf(name, p.detach(), kind="param")
    for name, buf in model.named_buffers():  # the model's own RoPE tables
        if name.endswith(("rotary_sin", "rotary_cos")):
            g.leaf(name, buf.detach(), kind="param")
    g.rule("hook_embed", op.embed, ["tokens", "embed.W_E"], kind="embed")
    resid, kind = "blocks.0.hook_resid_pre", cfg.positional_embedding_type
    if kind in ("rotary", "shortformer"):  # shortformer: positions enter q and k only
        g.alias(resid, "hook_embed")
    if kind in ("standard", "shortformer"):
        g.rule("hook_pos_embed", op.pos_embed, ["tokens", "pos_embed.W_pos"], kind="embed")
    if kind == "standard":
        g.rule(resid, torch.add, ["hook_embed", "hook_pos_embed"], kind="embed")
    for layer in range(cfg.n_layers):
        if layer > 0:
            g.alias(f"blocks.{layer}.hook_resid_pre", resid)
        resid = _add_layer(g, model, layer, resid)
    final = _norm(g, _final_norm(cfg), cfg.eps, "ln_final", resid, {"kind": "final"})
    g.rule("logits", op.affine, [final, "unembed.W_U", "unembed.b_U"], kind="final")
    return g


def _final_norm(cfg: Any) -> str | None:
    if cfg.final_rms and cfg.normalization_type in ("LN", "LNPre"):
        return "RMS" if cfg.normalization_type == "LN" else "RMSPre"
    return cfg.normalization_type


def _norm(
    g: Graph, kind: str | None, eps: float, prefix: str, x: str, meta: dict[str, Any],
    heads: int = 0, width: int = 0, params: str = "",
) -> str:  # fmt: skip
    """TL's LayerNorm / LayerNormPre / RMSNorm / RMSNormPre (or none) of ``x``; the output name.

    ``heads``: x holds that many copies side by side (split q/k/v inputs), normed each.
    """
    if kind is None:
        return x
    name = f"{prefix}.hook_normalized"
    fn = partial(op.rms_normalize if kind.startswith("RMS") else op.normalize, eps=eps)
    if heads:
        fn, meta = partial(op.per_head, fn, heads), {**meta, "heads": HeadAxis(heads, width)}
    g.rule(name, fn, [x], **meta)
    if kind in ("LNPre", "RMSPre"):
        return name
    params = params or prefix  # split q/k inputs: ln1.q, ln1.k with ln1's weights
    ins, aff = [name, f"{params}.w"], op.scale
    if kind == "LN":
        ins, aff = [*ins, f"{params}.b"], op.scale_shift
    g.rule(f"{prefix}.out", partial(op.per_head, aff, heads) if heads else aff, ins, **meta)
    return f"{prefix}.out"


def _flat(g: Graph, p: str, name: str, repeat: int = 1) -> str:
    """Leaf ``{p}attn.{name}.flat``: a per-head weight with its heads merged into one axis.

    Grouped-query K, V weights are TL's ``_W_K``, ``_b_K`` ...; ``repeat`` > 1 expands them
    to every query head (``ungroup_grouped_query_attention``).
    """
    key = f"{p}attn.{name}"
    w = g.value(key if key in g else f"{p}attn._{name}")
    if repeat > 1:
        w = w.repeat_interleave(repeat, dim=0)
    if name == "W_O":  # [head, d_head, d_model] -> [head * d_head, d_model]
        flat = w.reshape(-1, w.shape[-1])
    elif name.startswith("W_"):  # [head, d_model, d_head] -> [d_model, head * d_head]
        flat = w.permute(1, 0, 2).reshape(w.shape[1], -1)
    else:  # b_Q, b_K, b_V: [head, d_head] -> [head * d_head]
        flat = w.reshape(-1)
    g.leaf(f"{key}.flat", flat.contiguous(), kind="param")
    return f"{key}.flat"


def _kv_heads(cfg: Any) -> int:
    n_kv = getattr(cfg, "n_key_value_heads", None)
    if n_kv is None or getattr(cfg, "ungroup_grouped_query_attention", False):
        return cfg.n_heads
    return n_kv


def _rotate(g: Graph, cfg: Any, layer: int, x: str, n: int) -> str:
    """``blocks.{l}.attn.hook_rot_q`` (or ``_k``) from the unrotated ``x`` of ``n`` heads."""
    p = f"blocks.{layer}.attn."
    name = x.replace("hook_", "hook_rot_")
    fn = partial(op.rotary, dim=cfg.rotary_dim, adjacent=bool(cfg.rotary_adjacent_pairs),
                 n_heads=n)  # fmt: skip
    rows = RowRule(at=lambda start: partial(fn, start=start))
    g.rule(name, fn, [x, p + "rotary_cos", p + "rotary_sin"], layer=layer, rows=rows,
           heads=HeadAxis(n, cfg.d_head))  # fmt: skip
    return name


def _qkv_inputs(g: Graph, model: Any, layer: int, resid: str) -> tuple[str, str, str]:
    """The normalised inputs of q, k and v (``use_split_qkv_input``: one copy per head,
    sites ``blocks.{l}.hook_{q,k,v}_input``; shortformer: positions added to q and k)."""
    cfg, p, meta = model.cfg, f"blocks.{layer}.", {"layer": layer}
    if not cfg.use_split_qkv_input:
        ln1 = _norm(g, cfg.normalization_type, cfg.eps, p + "ln1", resid, meta)
        ins = [ln1, ln1, ln1]
    else:
        ins = []
        for w, n in zip("qkv", (cfg.n_heads, _kv_heads(cfg), _kv_heads(cfg))):
            name = f"{p}hook_{w}_input"
            g.rule(name, partial(op.repeat_heads, n=n), [resid],
                   heads=HeadAxis(n, cfg.d_model), **meta)  # fmt: skip
            ln = p + ("ln1" if w == "v" else f"ln1.{w}")  # TL's ln1 hooks: its last (v) call
            ins.append(_norm(g, cfg.normalization_type, cfg.eps, ln, name, meta, n, cfg.d_model,
                             p + "ln1"))  # fmt: skip
    if cfg.positional_embedding_type == "shortformer":
        for k, w in enumerate("qk"):
            name = f"{p}attn.{w}_input_pos"
            n = (cfg.n_heads, _kv_heads(cfg))[k] if cfg.use_split_qkv_input else 1
            add = partial(op.per_head, torch.add, n) if n > 1 else torch.add
            g.rule(name, add, [ins[k], "hook_pos_embed"], **meta)
            ins[k] = name
    return ins[0], ins[1], ins[2]


def _attention(g: Graph, model: Any, layer: int, resid: str) -> str:
    """q, k, v, pattern and z of all heads as batched nodes; z per head as slices."""
    cfg, p, meta, n = model.cfg, f"blocks.{layer}.", {"layer": layer}, model.cfg.n_heads
    kv, attn = _kv_heads(cfg), model.blocks[layer].attn
    lin = op.split_affine if cfg.use_split_qkv_input else op.affine
    qkv = []
    for w, x in zip("QKV", _qkv_inputs(g, model, layer, resid)):
        heads = n if w == "Q" else kv
        rep = heads // (cfg.n_key_value_heads or heads) if w != "Q" else 1  # ungrouped GQA
        if cfg.use_split_qkv_input:  # [head, d_model, d_head] weights, one per input copy
            key = f"{p}attn.W_{w}" if f"{p}attn.W_{w}" in g else f"{p}attn._W_{w}"
            bkey = key.replace("W_", "b_")
            ins = [x, key, bkey]
            if rep > 1:
                ins = [x, *_expanded(g, key, bkey, rep)]
        else:
            ins = [x, _flat(g, p, f"W_{w}", rep), _flat(g, p, f"b_{w}", rep)]
        g.rule(f"{p}attn.hook_{w.lower()}", lin, ins, heads=HeadAxis(heads, cfg.d_head), **meta)
        qkv.append(f"{p}attn.hook_{w.lower()}")
    q, k, v = qkv
    if cfg.positional_embedding_type == "rotary":
        q, k = _rotate(g, cfg, layer, q, n), _rotate(g, cfg, layer, k, kv)
    window = cfg.window_size if getattr(attn, "attn_type", "global") == "local" else 0
    fn = partial(op.pattern, scale=float(attn.attn_scale), n_heads=n, kv_heads=kv,
                 window=window or 0)  # fmt: skip
    rows = RowRule(full=(1,), at=lambda start: partial(fn, start=start))
    g.rule(p + "attn.hook_pattern", fn, [q, k], rows=rows, heads=HeadAxis(n), **meta)
    z = p + "attn.hook_z"
    mixed = partial(op.mix, n_heads=n, kv_heads=kv)
    g.rule(z, mixed, [p + "attn.hook_pattern", v], rows=RowRule(full=(1,)),
           heads=HeadAxis(n, cfg.d_head), **meta)  # fmt: skip
    heads = []
    for h in range(n):
        name = site_name("attn.hook_z", layer, h)
        lo = h * cfg.d_head
        g.rule(name, partial(op.head_slice, lo=lo, hi=lo + cfg.d_head), [z], kind="site", head=h,
               **meta)  # fmt: skip
        heads.append(name)
    if cfg.use_attn_result:  # hook_result [..., pos, head * d_model], then the heads' sum
        res = p + "attn.hook_result"
        g.rule(res, op.head_results, [p + "attn.W_O", *heads], heads=HeadAxis(n, cfg.d_model),
               **meta)  # fmt: skip
        g.rule(p + "hook_attn_out", partial(op.sum_heads, n_heads=n), [res, p + "attn.b_O"],
               **meta)  # fmt: skip
    else:
        ins = [_flat(g, p, "W_O"), p + "attn.b_O", *heads]
        g.rule(p + "hook_attn_out", op.out_proj, ins, **meta)
    return p + "hook_attn_out"


def _expanded(g: Graph, key: str, bkey: str, rep: int) -> list[str]:
    """Leaves of grouped K/V weights repeated for every query head (ungrouped GQA)."""
    for k in (key, bkey):
        g.leaf(k + ".all", g.value(k).repeat_interleave(rep, dim=0), kind="param")
    return [key + ".all", bkey + ".all"]


def _mlp(g: Graph, cfg: Any, layer: int, x: str) -> str:
    """hook_mlp_out of the (gated, SoLU) MLP on the normalised input ``x``."""
    p, meta = f"blocks.{layer}.mlp.", {"layer": layer}
    if cfg.gated_mlp:
        g.rule(p + "hook_pre", op.linear, [x, p + "W_gate"], **meta)
        g.rule(p + "hook_pre_linear", op.linear, [x, p + "W_in"], **meta)
        g.rule(p + "hook_post", partial(op.gated, act=cfg.act_fn),
               [p + "hook_pre", p + "hook_pre_linear", p + "b_in"], **meta)  # fmt: skip
    else:
        g.rule(p + "hook_pre", op.affine, [x, p + "W_in", p + "b_in"], **meta)
        if cfg.act_fn == "solu_ln":  # SoLU, then the MLP's own LN (LNPre unless LN)
            g.rule(p + "hook_mid", op.solu, [p + "hook_pre"], **meta)
            kind = "LN" if cfg.normalization_type == "LN" else "LNPre"
            g.alias(p + "hook_post", _norm(g, kind, cfg.eps, p + "ln", p + "hook_mid", meta))
        else:
            g.rule(p + "hook_post", op.ACTS[cfg.act_fn], [p + "hook_pre"], **meta)
    out = f"blocks.{layer}.hook_mlp_out"
    g.rule(out, op.affine, [p + "hook_post", p + "W_out", p + "b_out"], kind="site", **meta)
    return out


def _add_layer(g: Graph, model: Any, layer: int, resid: str) -> str:
    cfg, p, meta = model.cfg, f"blocks.{layer}.", {"layer": layer}
    attn_out = _attention(g, model, layer, resid)
    post = p + "hook_resid_post"
    if cfg.attn_only:
        g.rule(post, torch.add, [resid, attn_out], **meta)
    elif cfg.parallel_attn_mlp:  # attention and MLP both read resid_pre (GPT-J, NeoX)
        mlp = _mlp(g, cfg, layer, _norm(g, cfg.normalization_type, cfg.eps, p + "ln2", resid,
                                        meta))  # fmt: skip
        g.rule(post, op.add3, [resid, attn_out, mlp], **meta)
    else:
        g.rule(p + "hook_resid_mid", torch.add, [resid, attn_out], **meta)
        ln2 = _norm(g, cfg.normalization_type, cfg.eps, p + "ln2", p + "hook_resid_mid", meta)
        mlp = _mlp(g, cfg, layer, ln2)
        g.rule(post, torch.add, [p + "hook_resid_mid", mlp], **meta)
    return post


def tl_cache(g: Graph, n_layers: int = 0, n_heads: int = 0) -> dict[str, torch.Tensor]:
    """Every hook's value in TransformerLens' shape, keyed by hook name (run_with_cache).

    Nodes batched over heads ([batch, pos, head * width]) come back as [batch, pos, head,
    width]; ``n_layers`` and ``n_heads`` are read from the graph (kept for old callers).
    """
    g.demand("logits")
    out: dict[str, torch.Tensor] = {}
    for name in list(g._ids):  # node names and aliases (hook_resid_pre)
        if "hook" in name or name == "logits":
            out[name] = g.get(name)
            axis = g.meta[g.id(name)].get("heads")
            if axis is not None and axis.width:
                out[name] = out[name].reshape(*out[name].shape[:-1], axis.n, axis.width)
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
