"""Every TransformerLens architecture family: ndvm's sweeps against TL's patching functions,
called with TL's own arguments (model, corrupted_tokens, clean_cache, patching_metric)."""

from __future__ import annotations

import pytest
from tests.helpers.extras import need

torch = need("torch")
tl = need("transformer_lens")

from transformer_lens import patching  # noqa: E402

from ndvm.graph import tlpatch  # noqa: E402
from ndvm.graph.errors import UnknownNodeError  # noqa: E402
from ndvm.graph.rowsweep import sweep_hook  # noqa: E402
from ndvm.graph.tlbench import build, randomize_biases  # noqa: E402
from ndvm.graph.tlens import from_transformer_lens, tl_cache  # noqa: E402

ROT = dict(positional_embedding_type="rotary", rotary_dim=8)
FAMILIES = {  # GPT-2 small's ratios (d_head = d_model / heads, d_mlp = 4 d_model), shrunk
    "LNPre (fold_ln=True)": dict(normalization_type="LNPre"),
    "RMS (Llama)": dict(normalization_type="RMS", act_fn="silu", **ROT),
    "RMSPre": dict(normalization_type="RMSPre", act_fn="silu", **ROT),
    "no norm": dict(normalization_type=None),
    "final_rms": dict(final_rms=True),
    "attn-only": dict(attn_only=True),
    "SoLU (LN)": dict(act_fn="solu_ln"),
    "SoLU (LNPre)": dict(act_fn="solu_ln", normalization_type="LNPre"),
    "gated (SwiGLU)": dict(gated_mlp=True, act_fn="silu", normalization_type="RMS", **ROT),
    "parallel (GPT-J/NeoX)": dict(parallel_attn_mlp=True, **ROT),
    "GQA": dict(
        n_key_value_heads=2, normalization_type="RMS", gated_mlp=True, act_fn="silu", **ROT
    ),  # fmt: skip
    "GQA ungrouped": dict(n_key_value_heads=2, ungroup_grouped_query_attention=True),
    "shortformer": dict(positional_embedding_type="shortformer"),
    "local windows": dict(use_local_attn=True, attn_types=["global", "local"], window_size=3),
    "use_attn_result": dict(use_attn_result=True),
    "use_split_qkv_input": dict(use_split_qkv_input=True),
    "split q/k/v + GQA": dict(use_split_qkv_input=True, n_key_value_heads=2, **ROT),
    "1/layer attn scale": dict(scale_attn_by_inverse_layer_idx=True),
}
SWEEPS = ("attn_head_out_all_pos", "attn_head_out_by_pos", "resid_pre", "mlp_out")


def model(family: str, dtype: torch.dtype = torch.float64) -> object:
    base = dict(n_layers=2, n_heads=4, d_model=32, d_head=8, d_mlp=128, n_ctx=16, d_vocab=40,
                act_fn="gelu_new", normalization_type="LN", dtype=dtype, seed=0)  # fmt: skip
    m = build(tl.HookedTransformerConfig(**{**base, **FAMILIES[family]}))
    randomize_biases(m, 0)  # nonzero biases and gains: every parameter enters the results
    return m


def tokens(seed: int, length: int = 9) -> torch.Tensor:
    return torch.randint(0, 40, (2, length), generator=torch.Generator().manual_seed(seed))


def metric(logits: torch.Tensor) -> torch.Tensor:
    return (logits[:, -1, 3] - logits[:, -1, 7]).mean()


def tl_call(fn: object, *args: object, dtype: torch.dtype) -> torch.Tensor:
    old = torch.get_default_dtype()  # TL's patching allocates its result in the default dtype
    torch.set_default_dtype(dtype)
    try:
        return fn(*args)
    finally:
        torch.set_default_dtype(old)


def rel(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_cache_equals_run_with_cache(family: str) -> None:
    m = model(family)
    logits, cache = m.run_with_cache(tokens(0))
    ours = tl_cache(from_transformer_lens(m, tokens(0)))
    names = [k for k in cache.keys() if k in ours]
    assert len(names) >= 8 * m.cfg.n_layers
    for k in names:
        torch.testing.assert_close(ours[k], cache[k], rtol=1e-10, atol=1e-12, msg=k)
    torch.testing.assert_close(ours["logits"], logits, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-10), (torch.float32, 1e-5)])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sweeps_equal_tl_patching_in_tl_calling_convention(family: str, dtype, tol) -> None:
    m = model(family, dtype)
    corrupted = tokens(1, 6)
    _, cache = m.run_with_cache(tokens(0, 6))
    for sweep in SWEEPS:
        if sweep == "mlp_out" and m.cfg.attn_only:
            continue
        name = f"get_act_patch_{sweep}"
        with torch.no_grad():
            ref = tl_call(getattr(patching, name), m, corrupted, cache, metric, dtype=dtype)
        got = getattr(tlpatch, name)(m, corrupted, cache, metric)  # TL's own call
        assert got.shape == ref.shape, sweep
        assert rel(got, ref) < tol, (sweep, rel(got, ref))
        assert got.std() > 1e-3 * got.abs().max()  # not a constant grid


@pytest.mark.parametrize(("family", "hook"), [
    ("use_attn_result", "attn.hook_result"), ("use_split_qkv_input", "hook_q_input"),
    ("use_split_qkv_input", "hook_k_input"), ("split q/k/v + GQA", "hook_q_input"),
    ("GQA", "attn.hook_k"), ("SoLU (LN)", "mlp.hook_mid"),
])  # fmt: skip
def test_family_hook_points_per_head_equal_tl_generic_patch(family: str, hook: str) -> None:
    """TL's own hook points of a family, per head (or per position) as TL patches them."""
    from functools import partial

    m = model(family)
    corrupted = tokens(1)
    _, cache = m.run_with_cache(tokens(0))
    g = from_transformer_lens(m, corrupted)
    axis = g.meta[g.id(f"blocks.0.{hook}")].get("heads")
    setter = (patching.layer_pos_head_vector_patch_setter if axis else
              patching.layer_pos_patch_setter)  # fmt: skip
    names = ("layer", "pos", "head") if axis else ("layer", "pos")
    fn = partial(patching.generic_activation_patch, activation_name=hook.split(".")[-1][5:],
                 patch_setter=setter, index_axis_names=names)  # fmt: skip
    with torch.no_grad():
        ref = tl_call(fn, m, corrupted, cache, metric, dtype=torch.float64)
    clean = tlpatch.from_activation_cache(g, cache)
    res = sweep_hook(g, hook, 2, clean, metric, heads=axis.n if axis else None, positions=9,
                     chunk=3)  # fmt: skip
    assert res.values.shape == ref.shape
    assert rel(res.values, ref) < 1e-10


TL_FUNCTIONS = sorted(n for n in dir(patching) if n.startswith("get_act_patch_"))


@pytest.mark.parametrize("name", TL_FUNCTIONS)
def test_every_tl_patching_function_works_with_tl_example_call(name: str) -> None:
    """TL's documented call ``f(model, corrupted_tokens, clean_cache, metric)``, unchanged."""
    m = model("RMS (Llama)")
    corrupted_tokens = tokens(1, 5)
    _, clean_cache = m.run_with_cache(tokens(0, 5))
    with torch.no_grad():
        ref = tl_call(getattr(patching, name), m, corrupted_tokens, clean_cache, metric,
                      dtype=torch.float64)  # fmt: skip
    got = getattr(tlpatch, name)(m, corrupted_tokens, clean_cache, metric)
    assert got.shape == ref.shape
    assert rel(got, ref) < 1e-10


def test_mismatched_prompts_and_unknown_hooks_are_typed_errors() -> None:
    m = model("LNPre (fold_ln=True)")
    _, cache = m.run_with_cache(tokens(0))
    with pytest.raises(tlpatch.ShapeMismatchError, match=r"\(2, 9, 32\).*\(2, 7, 32\)"):
        tlpatch.get_act_patch_resid_pre(m, tokens(1, 7), cache, metric)
    g = from_transformer_lens(m, tokens(1))
    with pytest.raises(UnknownNodeError, match="unknown hook 'hook_resid_mdi'.*hook_resid_mid"):
        tlpatch.act_patch(g, "hook_resid_mdi", tlpatch.from_activation_cache(g, cache), metric)
    with pytest.raises(tlpatch.GraphError, match="missing \\['patching_metric'\\]"):
        tlpatch.get_act_patch_resid_pre(m, tokens(1), cache)


@pytest.mark.parametrize("hook", ["hook_k_input", "hook_v_input", "attn.hook_v"])
def test_grouped_kv_heads_patch_as_tl_hooks_do(hook: str) -> None:
    """Per kv head of a grouped-query model (TL's generic patch indexes query heads there):
    against TL's forward with a hook that copies the clean kv head, all positions."""
    m = model("split q/k/v + GQA")
    corrupted = tokens(1)
    _, cache = m.run_with_cache(tokens(0))
    g = from_transformer_lens(m, corrupted)
    res = sweep_hook(g, hook, 2, tlpatch.from_activation_cache(g, cache), metric, heads=2)
    ref = torch.zeros(2, 2, dtype=torch.float64)
    for layer in range(2):
        name = f"blocks.{layer}.{hook}"
        for h in range(2):

            def patch(act, hook, h=h, name=name):  # noqa: ANN001, ARG001
                act[:, :, h] = cache[name][:, :, h]
                return act

            with torch.no_grad():
                ref[layer, h] = metric(m.run_with_hooks(corrupted, fwd_hooks=[(name, patch)]))
    assert res.values.shape == (2, 2)
    assert rel(res.values, ref) < 1e-10
    assert res.values.std() > 1e-6
