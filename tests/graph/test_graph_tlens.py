"""from_transformer_lens against TransformerLens' own run_with_cache and patching (float64)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.helpers.extras import need

torch = need("torch")
tl = need("transformer_lens")

from transformer_lens import patching  # noqa: E402

from ndvm.graph import predict  # noqa: E402
from ndvm.graph.errors import GraphError  # noqa: E402
from ndvm.graph.rowsweep import sweep_hook  # noqa: E402
from ndvm.graph.sweep import grid, sweep  # noqa: E402
from ndvm.graph.tlbench import build, randomize_biases  # noqa: E402
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
    m = build(tl.HookedTransformerConfig(**{**base, **kw}))
    randomize_biases(m, 0)  # nonzero biases and LN gains so every parameter matters
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


@pytest.mark.parametrize("kind", ["learned", "rotary"])
def test_bench_rows_agree_with_tl(kind: str) -> None:
    from ndvm.graph.tlbench import compare, random_model, random_tokens

    m = random_model(2, 2, 16, n_ctx=8, kind=kind)
    rows = compare(m, *random_tokens(m, 2, 5))
    assert [r["sites"] for r in rows] == [4, 20, 10]
    assert all(r["max_rel_diff"] < 1e-9 for r in rows)
    for r in rows:  # the predicted ratio is the node-row count ratio of the sweep's cones
        assert r["rho_pred"] > 1 and r["of_pred"] == pytest.approx(r["ratio"] / r["rho_pred"])


def test_unsupported_model_is_a_typed_error() -> None:
    """The error names the feature and the nearest loading that builds."""
    m = _model(n_layers=1, n_heads=2, d_model=16, d_head=8, act_fn="gelu",
               attn_scores_soft_cap=30.0)  # fmt: skip
    with pytest.raises(UnsupportedModelError, match="attn_scores_soft_cap=30.0"):
        from_transformer_lens(m, _tokens(0))
    m = _model(n_layers=1, n_heads=2, d_model=16, d_head=8, act_fn="gelu", use_attn_in=True)
    with pytest.raises(UnsupportedModelError, match=r"load it with use_attn_in=False"):
        from_transformer_lens(m, _tokens(0))
    m = _model(n_layers=1, n_heads=2, d_model=16, d_head=8, act_fn="gelu")
    with pytest.raises(GraphError, match="positions; the model takes 1..16"):
        from_transformer_lens(m, torch.zeros(1, 17, dtype=torch.long))


def test_builder_is_exported_lazily() -> None:
    code = "import sys, ndvm.graph; print('torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"
    import ndvm.graph

    assert ndvm.graph.from_transformer_lens is from_transformer_lens
    assert ndvm.graph.sweep_hook is sweep_hook


TL_SWEEPS = {  # TL's patching function, our hook, heads?, positions?
    "heads": (patching.get_act_patch_attn_head_out_all_pos, "attn.hook_z", True, False),
    "heads x pos": (patching.get_act_patch_attn_head_out_by_pos, "attn.hook_z", True, True),
    "resid_pre": (patching.get_act_patch_resid_pre, "hook_resid_pre", False, True),
}


def _rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("chunk", [1, 3, 9])
@pytest.mark.parametrize("sweep_name", sorted(TL_SWEEPS))
@pytest.mark.parametrize("name", ["gelu_new", "rotary", "silu-nonorm"])
def test_row_sweeps_equal_tl_patching(name: str, sweep_name: str, chunk: int) -> None:
    """Row-restricted, variant-batched cones equal TL's full recompute per site."""
    m = _model(**CONFIGS[name])
    tl_fn, hook, by_head, by_pos = TL_SWEEPS[sweep_name]
    ref, g, clean = _setup(m, tl_fn)
    heads = m.cfg.n_heads if by_head else None
    positions = ref.shape[1] if by_pos else None
    res = sweep_hook(g, hook, m.cfg.n_layers, clean, _metric, heads=heads,
                     positions=positions, chunk=chunk)  # fmt: skip
    assert res.values.shape == ref.shape
    assert _rel(res.values, ref) < 1e-9
    assert res.sites == ref.numel()


@pytest.mark.parametrize("name", ["gelu_new", "rotary"])
def test_row_counts_equal_closed_forms(name: str) -> None:
    """With one position per pass the evaluated node-rows equal the sum of the exact cones,
    and each resid_pre cone is (L - l) M + 3 with M = 15 + H (+2 rotary) nodes per layer."""
    m = _model(**CONFIGS[name])
    _, g, clean = _setup(m, patching.get_act_patch_resid_pre)
    L, H, T = m.cfg.n_layers, m.cfg.n_heads, 9
    per_layer = 15 + H + 2 * (name == "rotary")
    for layer in range(L):
        cone = predict.patch_cost(g, f"blocks.{layer}.hook_resid_pre", "logits")
        assert cone == (L - layer) * per_layer + 3
    full = predict.full_cost(g, "logits")
    res = sweep_hook(g, "hook_resid_pre", L, clean, _metric, positions=T, chunk=1)
    assert res.node_rows == res.cone_rows
    assert res.cone_rows == sum(((L - l) * per_layer + 3) * (T - t) for l in range(L)
                                for t in range(T))  # fmt: skip
    assert res.full_rows == full * T
    chunked = sweep_hook(g, "hook_resid_pre", L, clean, _metric, positions=T, chunk=3)
    # a pass of 3 positions from t0 evaluates rows t0: for each: (0 + 1 + 2) extra rows
    extra = sum(((L - l) * per_layer + 3) * 3 for l in range(L)) * (T // 3)
    assert chunked.node_rows == chunked.cone_rows + extra
    assert chunked.rho_counts == res.rho_counts


def test_row_sweep_bad_arguments_are_typed_errors() -> None:
    m = _model(**CONFIGS["gelu_new"])
    _, g, clean = _setup(m, patching.get_act_patch_resid_pre)
    with pytest.raises(GraphError, match="chunk"):
        sweep_hook(g, "hook_resid_pre", 2, clean, _metric, positions=9, chunk=0)
    with pytest.raises(GraphError, match="positions"):
        sweep_hook(g, "hook_resid_pre", 2, clean, _metric, positions=10)
    from ndvm.graph.rows import batched_cone

    a, b = g.id("blocks.0.hook_resid_pre"), g.id("blocks.1.hook_resid_pre")
    with pytest.raises(GraphError, match="another site's cone"):
        batched_cone(g, [(a, g.value(a)), (b, g.value(b))], 0, g.id("logits"))


@pytest.mark.parametrize(
    ("tl_fn", "hook"),
    [(patching.get_act_patch_resid_mid, "hook_resid_mid"),
     (patching.get_act_patch_attn_out, "hook_attn_out"),
     (patching.get_act_patch_mlp_out, "hook_mlp_out")],
)  # fmt: skip
def test_other_layer_by_position_hooks_equal_tl(tl_fn: object, hook: str) -> None:
    m = _model(**CONFIGS["rotary-adjacent"])
    ref, g, clean = _setup(m, tl_fn)
    res = sweep_hook(g, hook, m.cfg.n_layers, clean, _metric, positions=ref.shape[1], chunk=2)
    assert res.values.shape == ref.shape
    assert _rel(res.values, ref) < 1e-9


HEAD_SWEEPS = [  # TL's per-head q/k/v/pattern sweeps and the position ones, by TL's name
    f"get_act_patch_attn_head_{act}_{by}" for act in "qkv" for by in ("all_pos", "by_pos")
] + [f"get_act_patch_attn_head_pattern_{by}" for by in ("all_pos", "by_pos", "dest_src_pos")]


@pytest.mark.parametrize("fn_name", HEAD_SWEEPS)
@pytest.mark.parametrize(("name", "chunk"), [("gelu_new", 4), ("rotary", 1), ("rotary", 3)])
def test_q_k_v_pattern_head_sweeps_equal_tl(name: str, chunk: int, fn_name: str) -> None:
    """Head slices of the batched q, k, v and pattern nodes, patched as TL patches them
    (learned positions; rotary with biases), one position per pass and several."""
    from ndvm.graph import tlpatch

    m = _model(**CONFIGS[name])
    ref, g, clean = _setup(m, getattr(patching, fn_name))
    got = getattr(tlpatch, fn_name)(g, clean, _metric, chunk=chunk)
    assert got.shape == ref.shape  # TL's axis order
    assert _rel(got, ref) < 1e-9
    assert got.std() > 1e-3 * got.abs().max()  # the sites matter: not a constant grid


def test_head_slice_sites_bad_arguments_are_typed_errors() -> None:
    from ndvm.graph import tlpatch
    from ndvm.graph.errors import UnknownNodeError

    m = _model(**CONFIGS["gelu_new"])
    _, g, clean = _setup(m, patching.get_act_patch_resid_pre)
    assert tlpatch.dims(g) == (2, 4, 9)
    with pytest.raises(UnknownNodeError, match="head slice named 'blocks.0.hook_mlp_out.0'"):
        sweep_hook(g, "hook_mlp_out", 2, clean, _metric, heads=2)
    with pytest.raises(GraphError, match="head 4 out of range"):
        sweep_hook(g, "attn.hook_q", 2, clean, _metric, heads=5)
    with pytest.raises(GraphError, match="sources"):
        sweep_hook(g, "attn.hook_pattern", 2, clean, _metric, heads=4, sources=9)
    with pytest.raises(GraphError, match="not a from_transformer_lens graph"):
        tlpatch.dims(_plain_graph())


def _plain_graph() -> object:
    from ndvm.graph import Graph

    g = Graph()
    g.leaf("x", 1.0)
    return g


@pytest.mark.parametrize("act", ["rot_q", "rot_k"])
def test_rotated_q_k_head_sites_equal_tl_generic_patch(act: str) -> None:
    """Heads of hook_rot_q / hook_rot_k (after RoPE) against TL's generic_activation_patch."""
    from functools import partial

    m = _model(**CONFIGS["rotary"])
    tl_fn = partial(patching.generic_activation_patch, activation_name=act,
                    patch_setter=patching.layer_pos_head_vector_patch_setter,
                    index_axis_names=("layer", "pos", "head"))  # fmt: skip
    ref, g, clean = _setup(m, tl_fn)
    res = sweep_hook(g, f"attn.hook_{act}", m.cfg.n_layers, clean, _metric,
                     heads=m.cfg.n_heads, positions=ref.shape[1], chunk=2)  # fmt: skip
    assert res.values.shape == ref.shape
    assert _rel(res.values, ref) < 1e-9


@pytest.mark.parametrize(
    "fn_name",
    ["get_act_patch_attn_head_all_pos_every", "get_act_patch_attn_head_by_pos_every",
     "get_act_patch_block_every"],
)  # fmt: skip
def test_every_helpers_equal_tl(fn_name: str) -> None:
    from ndvm.graph import tlpatch

    m = _model(**CONFIGS["rotary"])
    ref, g, clean = _setup(m, getattr(patching, fn_name))
    got = getattr(tlpatch, fn_name)(g, clean, _metric)
    assert got.shape == ref.shape
    assert _rel(got, ref) < 1e-9
    assert getattr(tlpatch, fn_name).__name__ == fn_name
