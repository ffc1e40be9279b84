"""from_transformer_lens against TransformerLens' own run_with_cache and patching (float64)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from tests.helpers.extras import need

torch = need("torch")
tl = need("transformer_lens")

from transformer_lens import patching  # noqa: E402

from ndvm.graph.sweep import grid, sweep  # noqa: E402
from ndvm.graph.tlens import (  # noqa: E402
    UnsupportedModelError,
    from_transformer_lens,
    sweep_positions,
    tl_cache,
)

ROPE = dict(n_layers=2, n_heads=2, d_model=16, d_head=8, positional_embedding_type="rotary")
CONFIGS = {
    "gelu_new": dict(n_layers=2, n_heads=4, d_model=32, d_head=8, act_fn="gelu_new"),
    "relu": dict(n_layers=3, n_heads=2, d_model=24, d_head=12, act_fn="relu"),
    "silu-nonorm": dict(
        n_layers=2, n_heads=3, d_model=18, d_head=6, act_fn="silu", normalization_type=None
    ),  # fmt: skip
    "rotary": dict(ROPE, act_fn="gelu", rotary_dim=6),
    "rotary-adjacent": dict(ROPE, act_fn="silu", rotary_dim=8, rotary_adjacent_pairs=True),
}


def _model(**kw: object) -> object:
    base = dict(d_mlp=48, n_ctx=16, d_vocab=40, normalization_type="LN", dtype=torch.float64,
                seed=0)  # fmt: skip
    cfg = tl.HookedTransformerConfig(**{**base, **kw})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        m = tl.HookedTransformer(cfg)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():  # nonzero biases and LN gains so every parameter matters
        for name, p in m.named_parameters():
            leaf = name.split(".")[-1]
            if leaf.startswith("b") or leaf == "w":
                p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.1 + (leaf == "w"))
    return m


def _tokens(seed: int) -> torch.Tensor:
    return torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(seed))


def _tl_float64(fn, *args):  # TL's patching stores results in the default dtype
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return fn(*args)
    finally:
        torch.set_default_dtype(old)


def _metric(logits: torch.Tensor) -> torch.Tensor:
    return (logits[:, -1, 3] - logits[:, -1, 7]).mean()


def _setup(m: object, tl_patch: object) -> tuple[object, object, object]:
    """TL's float64 patching result, our graph on the corrupted prompt, and the clean cache."""
    clean_tok, corr_tok = _tokens(0), _tokens(1)
    _, cache = m.run_with_cache(clean_tok)
    ref = _tl_float64(tl_patch, m, corr_tok, cache, _metric)
    clean = from_transformer_lens(m, clean_tok).capture()
    g = from_transformer_lens(m, clean_tok)
    g.leaf("tokens", corr_tok)
    return ref, g, clean


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cache_equals_run_with_cache(name: str) -> None:
    m = _model(**CONFIGS[name])
    tok = _tokens(0)
    logits, cache = m.run_with_cache(tok)
    ours = tl_cache(from_transformer_lens(m, tok), m.cfg.n_layers, m.cfg.n_heads)
    torch.testing.assert_close(ours["logits"], logits, rtol=1e-10, atol=1e-12)
    compared = [k for k in cache.keys() if k in ours]
    assert len(compared) >= 10 * m.cfg.n_layers
    for k in compared:
        torch.testing.assert_close(ours[k], cache[k], rtol=1e-10, atol=1e-12, msg=k)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_head_sweep_equals_tl_patching(name: str) -> None:
    m = _model(**CONFIGS[name])
    ref, g, clean = _setup(m, patching.get_act_patch_attn_head_out_all_pos)
    res = sweep(g, grid("attn.hook_z", m.cfg.n_layers, m.cfg.n_heads), clean, _metric, "logits")
    assert res.values.shape == ref.shape
    torch.testing.assert_close(res.values, ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["gelu_new", "rotary"])
def test_resid_pre_layer_by_position_equals_tl(name: str) -> None:
    m = _model(**CONFIGS[name])
    ref, g, clean = _setup(m, patching.get_act_patch_resid_pre)
    got = sweep_positions(g, "hook_resid_pre", m.cfg.n_layers, ref.shape[1], clean, _metric)
    assert got.shape == ref.shape  # (layer, pos), TL's order
    torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["relu", "rotary-adjacent"])
def test_heads_by_position_equals_tl(name: str) -> None:
    m = _model(**CONFIGS[name])
    ref, g, clean = _setup(m, patching.get_act_patch_attn_head_out_by_pos)
    n = m.cfg.n_layers
    got = sweep_positions(g, "attn.hook_z", n, ref.shape[1], clean, _metric, m.cfg.n_heads)
    assert got.shape == ref.shape  # (layer, pos, head), TL's order
    torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-12)


def test_bench_rows_agree_with_tl() -> None:
    from ndvm.graph.tlbench import compare, random_model, random_tokens

    m = random_model(2, 2, 16, n_ctx=8)
    rows = compare(m, *random_tokens(m, 2, 5))
    assert [r["sites"] for r in rows] == [4, 20, 10]
    assert all(r["max_abs_diff"] < 1e-9 for r in rows)


def test_unsupported_model_is_a_typed_error() -> None:
    m = _model(n_layers=1, n_heads=2, d_model=16, d_head=8, act_fn="gelu", gated_mlp=True)
    with pytest.raises(UnsupportedModelError, match="gated_mlp"):
        from_transformer_lens(m, _tokens(0))


def test_builder_is_exported_lazily() -> None:
    code = "import sys, ndvm.graph; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"
    import ndvm.graph

    assert ndvm.graph.from_transformer_lens is from_transformer_lens
