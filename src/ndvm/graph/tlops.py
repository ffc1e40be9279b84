"""The tensor operations of ``from_transformer_lens`` graphs, one function per rule.

Every rule keeps the position axis at -2 (``rows`` restricts cones to rows ``start:``).
Values batched over heads hold the heads side by side on the last axis
([..., pos, head * width]); ``per_head`` applies a feature-wise rule to each head's block.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache, partial

import torch
import torch.nn.functional as F


def gelu_fast(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def relu2(x: torch.Tensor) -> torch.Tensor:
    r = F.relu(x)
    return r * r


def solu(x: torch.Tensor) -> torch.Tensor:
    return x * torch.softmax(x, dim=-1)


ACTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": partial(F.gelu, approximate="tanh"),
    "gelu_pytorch_tanh": partial(F.gelu, approximate="tanh"),
    "gelu_fast": gelu_fast,
    "relu": F.relu,
    "relu2": relu2,
    "silu": F.silu,
    "solu": solu,
    "solu_ln": solu,  # followed by the MLP's own layer norm (hook_mid -> mlp.ln -> hook_post)
}


def normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm without its affine part (TL's LayerNormPre)."""
    x = x - x.mean(-1, keepdim=True)
    return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()


def rms_normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm without its gain (TL's RMSNormPre)."""
    return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt()


def scale_shift(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return x * w + b


def scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w


def per_head(fn: Callable[..., torch.Tensor], n: int, x: torch.Tensor, *ws: torch.Tensor
             ) -> torch.Tensor:  # fmt: skip
    """``fn`` on each head's block of x [..., pos, n * d] (inputs repeated per head)."""
    y = fn(x.reshape(*x.shape[:-1], n, x.shape[-1] // n), *ws)
    return y.reshape(x.shape)


def affine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w.mT, b)


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w.mT)


def gated(pre: torch.Tensor, pre_linear: torch.Tensor, b: torch.Tensor, act: str) -> torch.Tensor:
    """Gated MLP's hook_post: act(x W_gate) * (x W_in) + b_in."""
    return ACTS[act](pre) * pre_linear + b


def split_affine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Head h of x [..., pos, head * d_model] times w[h] [d_model, d_head] plus b[h]."""
    n = w.shape[0]
    xh = x.reshape(*x.shape[:-1], n, w.shape[1])
    y = torch.einsum("...hm,hmd->...hd", xh, w) + b
    return y.reshape(*x.shape[:-1], -1)


def repeat_heads(x: torch.Tensor, n: int) -> torch.Tensor:
    """[..., pos, d] -> [..., pos, n * d]: the same input for each of n heads."""
    return x.repeat(*([1] * (x.ndim - 1)), n)


def embed(tokens: torch.Tensor, w_e: torch.Tensor) -> torch.Tensor:
    return w_e[tokens]


def pos_embed(tokens: torch.Tensor, w_pos: torch.Tensor) -> torch.Tensor:
    return w_pos[: tokens.shape[-1]].expand(tokens.shape[0], -1, -1)


def heads_of(x: torch.Tensor, n_heads: int, repeat: int = 1) -> torch.Tensor:
    """[..., pos, head * d_head] -> [..., head * repeat, pos, d_head] (GQA: each kv head
    repeated for the ``repeat`` query heads that share it)."""
    h = x.reshape(*x.shape[:-1], n_heads, x.shape[-1] // n_heads).transpose(-3, -2)
    return h if repeat == 1 else h.repeat_interleave(repeat, dim=-3)


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
def _causal(rows: int, cols: int, start: int, window: int, device: torch.device) -> torch.Tensor:
    """True where query ``start + r`` may not see key c: c > q, or c <= q - window (local)."""
    mask = torch.ones(rows, cols, dtype=torch.bool, device=device).triu(1 + start)
    if window:
        mask |= torch.ones(rows, cols, dtype=torch.bool, device=device).tril(start - window)
    return mask


def pattern(
    q: torch.Tensor, k: torch.Tensor, scale: float, n_heads: int, start: int = 0,
    kv_heads: int | None = None, window: int = 0,
) -> torch.Tensor:  # fmt: skip
    """Causal attention [..., head, query, key] of queries at positions ``start``, ...

    ``kv_heads`` < ``n_heads``: grouped-query keys; ``window``: local attention span.
    """
    kv = kv_heads or n_heads
    s = (heads_of(q, n_heads) @ heads_of(k, kv, n_heads // kv).transpose(-1, -2)) / scale
    mask = _causal(s.shape[-2], s.shape[-1], start, window, s.device)
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1)


def mix(pat: torch.Tensor, v: torch.Tensor, n_heads: int, kv_heads: int | None = None
        ) -> torch.Tensor:  # fmt: skip
    """hook_z of all heads, [..., pos, head * d_head]."""
    kv = kv_heads or n_heads
    z = pat @ heads_of(v, kv, n_heads // kv)
    return z.transpose(-3, -2).reshape(*z.shape[:-3], z.shape[-2], -1)


def head_slice(z: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
    return z[..., lo:hi]


def out_proj(w: torch.Tensor, b: torch.Tensor, *zs: torch.Tensor) -> torch.Tensor:
    """hook_attn_out from every head's z [..., pos, d_head] and W_O as [head * d_head, d]."""
    return F.linear(torch.cat(torch.broadcast_tensors(*zs), dim=-1), w.mT, b)


def head_results(w: torch.Tensor, *zs: torch.Tensor) -> torch.Tensor:
    """hook_result: head h's z times W_O[h], as [..., pos, head * d_model]."""
    z = torch.stack(torch.broadcast_tensors(*zs), dim=-2)  # [..., pos, head, d_head]
    r = torch.einsum("...hd,hdm->...hm", z, w)
    return r.reshape(*r.shape[:-2], -1)


def sum_heads(result: torch.Tensor, b: torch.Tensor, n_heads: int) -> torch.Tensor:
    """hook_attn_out from hook_result: the heads' sum plus b_O."""
    return result.reshape(*result.shape[:-1], n_heads, -1).sum(-2) + b


def add3(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """(a + b) + c, TL's order for a parallel block's resid_post."""
    return a + b + c
