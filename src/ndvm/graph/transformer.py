"""Toy causal transformer as an eager ``nn.Module`` and as a reactive graph, same weights.

Both call the same op functions in the same order, so on CPU they agree bitwise. Attention
heads are separate nodes; with ``position_resolved`` every (layer, position) has its own
nodes and attention at position t reads keys/values of positions <= t.
Per layer and position there are M = 6H + 8 rule nodes (ln1; q, k, v, pattern, z, result per
head; attn_out, resid_mid, ln2, mlp pre, mlp post, mlp_out, resid_post).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.fx
from torch import nn

from ndvm.graph.dag import Graph
from ndvm.graph.sweep import site_name

Hooks = dict[str, Callable[[torch.Tensor], torch.Tensor]]


@dataclass(frozen=True, slots=True)
class TransformerConfig:
    layers: int = 4
    heads: int = 4
    d_model: int = 64
    seq_len: int = 16
    vocab: int = 50
    d_mlp: int | None = None  # default 4 * d_model
    position_resolved: bool = False
    dtype: torch.dtype = torch.float64

    @property
    def d_head(self) -> int:
        return self.d_model // self.heads

    @property
    def mlp_width(self) -> int:
        return self.d_mlp or 4 * self.d_model

    @property
    def nodes_per_layer(self) -> int:
        """M = 6H + 8 rule nodes per layer (per position when position-resolved)."""
        return 6 * self.heads + 8


# ---------------------------------------------------------------------- ops (shared)
def layer_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    mu = x.mean(-1, keepdim=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdim=True)
    return xc / torch.sqrt(var + 1e-5) * w


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


def affine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x @ w + b


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


def sum_in_order(*xs: torch.Tensor) -> torch.Tensor:
    acc = xs[0]
    for x in xs[1:]:
        acc = acc + x
    return acc


def gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x)


def embed(tokens: torch.Tensor, w_e: torch.Tensor, w_pos: torch.Tensor) -> torch.Tensor:
    return w_e[tokens] + w_pos[: tokens.shape[1]]


def embed_at(tokens: torch.Tensor, w_e: torch.Tensor, w_pos: torch.Tensor, t: int) -> torch.Tensor:
    return w_e[tokens[:, t]] + w_pos[t]


def causal_pattern(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    scores = (q @ k.transpose(-1, -2)) * scale
    n = scores.shape[-1]
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)


def pattern_at(q: torch.Tensor, *ks: torch.Tensor, scale: float) -> torch.Tensor:
    """Attention weights of one query position over keys 0..t (causal by construction)."""
    keys = torch.stack(ks, dim=1)
    return torch.softmax((keys @ q.unsqueeze(-1)).squeeze(-1) * scale, dim=-1)


def mix_at(p: torch.Tensor, *vs: torch.Tensor) -> torch.Tensor:
    return (p.unsqueeze(1) @ torch.stack(vs, dim=1)).squeeze(1)


def stack_positions(*xs: torch.Tensor) -> torch.Tensor:
    return torch.stack(xs, dim=1)


# torch.fx keeps these as single call nodes, so a traced model has the engine's granularity.
for _op in ("layer_norm", "matmul", "affine", "add", "sum_in_order", "gelu", "embed"):
    torch.fx.wrap(_op)
torch.fx.wrap("causal_pattern")


# ---------------------------------------------------------------------- eager module
class Block(nn.Module):
    def __init__(self, cfg: TransformerConfig, gen: torch.Generator) -> None:
        super().__init__()
        d, h, dh, m = cfg.d_model, cfg.heads, cfg.d_head, cfg.mlp_width

        def rand(*shape: int, fan_in: int) -> nn.Parameter:
            w = torch.randn(*shape, generator=gen, dtype=cfg.dtype) / math.sqrt(fan_in)
            return nn.Parameter(w, requires_grad=False)

        self.ln1_w = nn.Parameter(1 + 0.1 * torch.randn(d, generator=gen, dtype=cfg.dtype))
        self.W_Q, self.W_K, self.W_V = (rand(h, d, dh, fan_in=d) for _ in range(3))
        self.W_O = rand(h, dh, d, fan_in=d)
        self.ln2_w = nn.Parameter(1 + 0.1 * torch.randn(d, generator=gen, dtype=cfg.dtype))
        self.W_in, self.b_in = rand(d, m, fan_in=d), rand(m, fan_in=m)
        self.W_out, self.b_out = rand(m, d, fan_in=m), rand(d, fan_in=d)


class ToyTransformer(nn.Module):
    """Eager baseline; ``forward(tokens, hooks)`` calls ``hooks[name](x)`` at hook points."""

    def __init__(self, cfg: TransformerConfig, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg
        gen = torch.Generator().manual_seed(seed)
        d = cfg.d_model
        self.W_E = nn.Parameter(torch.randn(cfg.vocab, d, generator=gen, dtype=cfg.dtype))
        self.W_pos = nn.Parameter(0.1 * torch.randn(cfg.seq_len, d, generator=gen, dtype=cfg.dtype))
        self.blocks = nn.ModuleList(Block(cfg, gen) for _ in range(cfg.layers))
        self.ln_f_w = nn.Parameter(1 + 0.1 * torch.randn(d, generator=gen, dtype=cfg.dtype))
        self.W_U = nn.Parameter(torch.randn(d, cfg.vocab, generator=gen, dtype=cfg.dtype))
        self.requires_grad_(False)
        self.scale = 1.0 / math.sqrt(cfg.d_head)

    def forward(self, tokens: torch.Tensor, hooks: Hooks | None = None) -> torch.Tensor:
        hk = hooks or {}
        if self.cfg.position_resolved:
            return self._forward_positions(tokens, hk)
        resid = embed(tokens, self.W_E, self.W_pos)
        for layer, blk in enumerate(self.blocks):
            resid = _hook(hk, site_name("hook_resid_pre", layer), resid)
            n1 = layer_norm(resid, blk.ln1_w)
            results = []
            for h in range(self.cfg.heads):
                q, k, v = matmul(n1, blk.W_Q[h]), matmul(n1, blk.W_K[h]), matmul(n1, blk.W_V[h])
                z = matmul(causal_pattern(q, k, self.scale), v)
                z = _hook(hk, site_name("attn.hook_z", layer, h), z)
                results.append(matmul(z, blk.W_O[h]))
            mid = add(resid, sum_in_order(*results))
            post = gelu(affine(layer_norm(mid, blk.ln2_w), blk.W_in, blk.b_in))
            mlp_out = _hook(
                hk, site_name("hook_mlp_out", layer), affine(post, blk.W_out, blk.b_out)
            )
            resid = add(mid, mlp_out)
        return matmul(layer_norm(resid, self.ln_f_w), self.W_U)

    def _forward_positions(self, tokens: torch.Tensor, hk: Hooks) -> torch.Tensor:
        T, H = tokens.shape[1], self.cfg.heads
        pattern = partial(pattern_at, scale=self.scale)
        xs = [embed_at(tokens, self.W_E, self.W_pos, t) for t in range(T)]
        for layer, blk in enumerate(self.blocks):
            xs = [_hook(hk, site_name("hook_resid_pre", layer, None, t), xs[t]) for t in range(T)]
            n1 = [layer_norm(x, blk.ln1_w) for x in xs]
            results: list[list[torch.Tensor]] = [[] for _ in range(T)]
            for h in range(H):
                qs = [matmul(n, blk.W_Q[h]) for n in n1]
                ks = [matmul(n, blk.W_K[h]) for n in n1]
                vs = [matmul(n, blk.W_V[h]) for n in n1]
                for t in range(T):
                    z = mix_at(pattern(qs[t], *ks[: t + 1]), *vs[: t + 1])
                    z = _hook(hk, site_name("attn.hook_z", layer, h, t), z)
                    results[t].append(matmul(z, blk.W_O[h]))
            new = []
            for t in range(T):
                mid = add(xs[t], sum_in_order(*results[t]))
                post = gelu(affine(layer_norm(mid, blk.ln2_w), blk.W_in, blk.b_in))
                out = affine(post, blk.W_out, blk.b_out)
                out = _hook(hk, site_name("hook_mlp_out", layer, None, t), out)
                new.append(add(mid, out))
            xs = new
        return stack_positions(*(matmul(layer_norm(x, self.ln_f_w), self.W_U) for x in xs))


def _hook(hooks: Hooks, name: str, x: torch.Tensor) -> torch.Tensor:
    f = hooks.get(name)
    return x if f is None else f(x)


def record_hooks(names: list[str]) -> tuple[Hooks, dict[str, torch.Tensor]]:
    """Hooks that record (without changing) the activations at ``names`` (run-with-cache)."""
    store: dict[str, torch.Tensor] = {}

    def make(n: str) -> Callable[[torch.Tensor], torch.Tensor]:
        def rec(x: torch.Tensor) -> torch.Tensor:
            store[n] = x
            return x

        return rec

    return {n: make(n) for n in names}, store


# ---------------------------------------------------------------------- engine graph
def _n(hook: str, layer: int, head: int | None = None, pos: int | None = None) -> str:
    return site_name(hook, layer, head, pos)


def _at(name: str, pos: int | None) -> str:
    return name if pos is None else f"{name}@{pos}"


def to_graph(model: ToyTransformer, tokens: torch.Tensor) -> Graph:
    """The engine graph of ``model`` (same parameter tensors); output node ``logits``."""
    cfg = model.cfg
    g = Graph()
    g.leaf("tokens", tokens)
    g.leaf("W_E", model.W_E.detach(), kind="param")
    g.leaf("W_pos", model.W_pos.detach(), kind="param")
    g.leaf("ln_final.w", model.ln_f_w.detach(), kind="param")
    g.leaf("W_U", model.W_U.detach(), kind="param")
    positions: list[int | None] = list(range(cfg.seq_len)) if cfg.position_resolved else [None]
    resid: dict[int | None, str] = {}
    for t in positions:
        resid[t] = _at("hook_embed", t)
        if t is None:
            g.rule(resid[t], embed, ["tokens", "W_E", "W_pos"], kind="embed")
        else:
            g.rule(resid[t], partial(embed_at, t=t), ["tokens", "W_E", "W_pos"], kind="embed")
    for layer, blk in enumerate(model.blocks):
        _add_params(g, layer, blk, cfg.heads)
        for t in positions:
            g.alias(_n("hook_resid_pre", layer, None, t), resid[t])
        resid = _add_layer(g, cfg, layer, positions, resid, model.scale)
    finals = []
    for t in positions:
        ln = _at("ln_final.hook_normalized", t)
        g.rule(ln, layer_norm, [resid[t], "ln_final.w"], kind="final")
        finals.append(_at("hook_logits", t) if t is not None else "logits")
        g.rule(finals[-1], matmul, [ln, "W_U"], kind="final")
    if cfg.position_resolved:
        g.rule("logits", stack_positions, finals, kind="final")
    return g


def _add_params(g: Graph, layer: int, blk: Block, heads: int) -> None:
    p = f"blocks.{layer}."
    for name in ("ln1_w", "ln2_w", "W_in", "b_in", "W_out", "b_out"):
        g.leaf(p + name, getattr(blk, name).detach(), kind="param")
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        for h in range(heads):
            g.leaf(f"{p}attn.{name}.{h}", getattr(blk, name)[h].detach(), kind="param")


def _add_layer(
    g: Graph,
    cfg: TransformerConfig,
    layer: int,
    positions: list[int | None],
    resid: dict[int | None, str],
    scale: float,
) -> dict[int | None, str]:
    p = f"blocks.{layer}."
    meta = {"layer": layer}
    for t in positions:
        g.rule(
            _n("ln1.hook_normalized", layer, None, t), layer_norm, [resid[t], p + "ln1_w"], **meta
        )
    results: dict[int | None, list[str]] = {t: [] for t in positions}
    for h in range(cfg.heads):
        for t in positions:
            n1 = _n("ln1.hook_normalized", layer, None, t)
            for w in ("Q", "K", "V"):
                name = _n(f"attn.hook_{w.lower()}", layer, h, t)
                g.rule(name, matmul, [n1, f"{p}attn.W_{w}.{h}"], head=h, **meta)
        for t in positions:
            q, pat, z = (_n(f"attn.hook_{k}", layer, h, t) for k in ("q", "pattern", "z"))
            if t is None:
                k, v = _n("attn.hook_k", layer, h), _n("attn.hook_v", layer, h)
                g.rule(pat, partial(causal_pattern, scale=scale), [q, k], head=h, **meta)
                g.rule(z, matmul, [pat, v], head=h, kind="site", **meta)
            else:
                ks = [_n("attn.hook_k", layer, h, s) for s in range(t + 1)]
                vs = [_n("attn.hook_v", layer, h, s) for s in range(t + 1)]
                g.rule(pat, partial(pattern_at, scale=scale), [q, *ks], head=h, **meta)
                g.rule(z, mix_at, [pat, *vs], head=h, kind="site", **meta)
            res = _n("attn.hook_result", layer, h, t)
            g.rule(res, matmul, [z, f"{p}attn.W_O.{h}"], head=h, **meta)
            results[t].append(res)
    out: dict[int | None, str] = {}
    for t in positions:
        names = {k: _n(k, layer, None, t) for k in _TAIL}
        g.rule(names["hook_attn_out"], sum_in_order, results[t], **meta)
        g.rule(names["hook_resid_mid"], add, [resid[t], names["hook_attn_out"]], **meta)
        g.rule(names["ln2.hook_normalized"], layer_norm, [names["hook_resid_mid"], p + "ln2_w"])
        g.rule(
            names["mlp.hook_pre"], affine, [names["ln2.hook_normalized"], p + "W_in", p + "b_in"]
        )
        g.rule(names["mlp.hook_post"], gelu, [names["mlp.hook_pre"]], **meta)
        g.rule(
            names["hook_mlp_out"],
            affine,
            [names["mlp.hook_post"], p + "W_out", p + "b_out"],
            **meta,
        )
        g.rule(names["hook_resid_post"], add, [names["hook_resid_mid"], names["hook_mlp_out"]])
        out[t] = names["hook_resid_post"]
    return out


_TAIL = (
    "hook_attn_out",
    "hook_resid_mid",
    "ln2.hook_normalized",
    "mlp.hook_pre",
    "mlp.hook_post",
    "hook_mlp_out",
    "hook_resid_post",
)


# ---------------------------------------------------------------------- closed forms
def _resid_post_cone(cfg: TransformerConfig, layer: int, pos: int | None) -> int:
    """|V+(resid_post)| of ``layer`` at ``pos`` (the next layer's resid_pre)."""
    if layer == cfg.layers - 1:
        return 3 if cfg.position_resolved else 2
    return _resid_pre_cone(cfg, layer + 1, pos)


def _resid_pre_cone(cfg: TransformerConfig, layer: int, pos: int | None) -> int:
    m, rest = cfg.nodes_per_layer, cfg.layers - 1 - layer
    if not cfg.position_resolved:
        return (rest + 1) * m + 2
    after = cfg.seq_len - pos  # positions t' >= pos
    return m + (after - 1) * (3 * cfg.heads + 7) + rest * after * m + 2 * after + 1


def closed_form_cone(
    cfg: TransformerConfig, hook: str, layer: int, head: int | None = None, pos: int | None = None
) -> int:
    """|V+(site)| in rule nodes for ``attn.hook_z``, ``hook_mlp_out`` and ``hook_resid_pre``.

    Not position-resolved: z -> 10 + (L-1-l)M, mlp_out -> 3 + (L-1-l)M,
    resid_pre -> (L-l)M + 2. Position-resolved: z -> 8 + C_post(l,t), mlp -> 1 + C_post(l,t),
    resid_pre -> M + (T-1-t)(3H+7) + (L-1-l)(T-t)M + 2(T-t) + 1, C_post(L-1,t) = 3.
    """
    if hook == "attn.hook_z":
        return 8 + _resid_post_cone(cfg, layer, pos)
    if hook == "hook_mlp_out":
        return 1 + _resid_post_cone(cfg, layer, pos)
    if hook == "hook_resid_pre":
        return _resid_pre_cone(cfg, layer, pos)
    raise ValueError(f"no closed form for hook {hook!r}")


def full_cost(cfg: TransformerConfig) -> int:
    """Rule nodes of one forward: embed + L*M + final (per position, + one stack)."""
    m = cfg.nodes_per_layer
    if not cfg.position_resolved:
        return 1 + cfg.layers * m + 2
    return cfg.seq_len * (1 + cfg.layers * m + 2) + 1


def predicted_rho(cfg: TransformerConfig) -> float:
    """Head + MLP sweep, not position-resolved: (H+1) N L / ((H+1) M L(L-1)/2 + L(10H+3))."""
    L, H, M = cfg.layers, cfg.heads, cfg.nodes_per_layer
    return (H + 1) * full_cost(cfg) * L / ((H + 1) * M * L * (L - 1) / 2 + L * (10 * H + 3))
