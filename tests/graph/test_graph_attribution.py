"""Attribution patching against gradients taken through TransformerLens itself and against the
exact sweep (float64, random-weight models)."""

from __future__ import annotations

import pytest
from tests.helpers.extras import need

torch = need("torch")
tl = need("transformer_lens")

from tests.graph.test_graph_tlens import CONFIGS, TL_SWEEPS, _metric, _model, _tokens  # noqa: E402

from ndvm.graph.attribution import agreement, attribution_sweep  # noqa: E402
from ndvm.graph.errors import GraphError  # noqa: E402
from ndvm.graph.patching import Cache  # noqa: E402
from ndvm.graph.rowsweep import sweep_hook  # noqa: E402
from ndvm.graph.tlens import from_transformer_lens  # noqa: E402

T = 9


def _graphs(m: object) -> tuple[object, object]:
    clean = from_transformer_lens(m, _tokens(0)).capture()
    g = from_transformer_lens(m, _tokens(0))
    g.leaf("tokens", _tokens(1))
    return g, clean


def _tl_estimate(m: object, hook: str, by_head: bool, by_pos: bool) -> torch.Tensor:
    """(clean - corrupt) * d metric / d activation through TL's own hooks and autograd."""
    _, cache = m.run_with_cache(_tokens(0))
    acts: dict[str, torch.Tensor] = {}

    def keep(x: torch.Tensor, hook: object) -> torch.Tensor:
        x.retain_grad()
        acts[hook.name] = x
        return x

    logits = m.run_with_hooks(_tokens(1), fwd_hooks=[(lambda n: n.endswith(hook), keep)])
    _metric(logits).backward()
    rows = []
    for layer in range(m.cfg.n_layers):
        name = f"blocks.{layer}.{hook}"
        c = (cache[name] - acts[name].detach()) * acts[name].grad  # [b, pos, (head,) d]
        c = c.sum(0)  # [pos, (head,) d], or [head, q, k] for the pattern
        if hook.endswith("pattern"):
            c = c.sum(-1).T  # [q, head]
        else:
            c = c.sum(-1) if by_head else c.sum(-1, keepdim=True)  # [pos, head or 1]
        rows.append(c if by_pos else c.sum(0, keepdim=True))
    out = torch.stack(rows)  # [layer, pos or 1, head or 1]
    return out.squeeze(2) if not by_head else (out if by_pos else out.squeeze(1))


@pytest.mark.parametrize("sweep_name", sorted(TL_SWEEPS))
@pytest.mark.parametrize("name", ["gelu_new", "rotary-adjacent"])
def test_estimate_equals_tl_gradients(name: str, sweep_name: str) -> None:
    m = _model(**CONFIGS[name])
    _, hook, by_head, by_pos = TL_SWEEPS[sweep_name]
    ref = _tl_estimate(m, hook, by_head, by_pos)
    g, clean = _graphs(m)
    res = attribution_sweep(g, hook, m.cfg.n_layers, clean, _metric,
                            heads=m.cfg.n_heads if by_head else None,
                            positions=T if by_pos else None, top_k=0)  # fmt: skip
    assert res.estimate.shape == ref.shape
    torch.testing.assert_close(res.estimate, ref, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("sweep_name", sorted(TL_SWEEPS))
def test_top_k_are_exact_and_ranked(sweep_name: str) -> None:
    m = _model(**CONFIGS["rotary"])
    _, hook, by_head, by_pos = TL_SWEEPS[sweep_name]
    g, clean = _graphs(m)
    kw = {"heads": m.cfg.n_heads if by_head else None, "positions": T if by_pos else None}
    res = attribution_sweep(g, hook, m.cfg.n_layers, clean, _metric, top_k=5, **kw)
    full = sweep_hook(g, hook, m.cfg.n_layers, clean, _metric, **kw).values - res.baseline
    assert len(res.top) == min(5, full.numel())
    for idx, val in zip(res.top, res.exact):
        assert abs(float(full[idx]) - float(val)) <= 1e-10 * float(full.abs().max())
    mags = [abs(float(res.estimate[idx])) for idx in res.top]
    assert mags == sorted(mags, reverse=True)
    ranked = res.estimate.abs().flatten().sort(descending=True).values
    assert mags[-1] == float(ranked[len(mags) - 1])


@pytest.mark.parametrize("sweep_name", sorted(TL_SWEEPS))
def test_estimate_is_the_first_order_term_of_the_exact_sweep(sweep_name: str) -> None:
    """Patching baseline + eps (clean - baseline): exact effect / estimate -> 1 as eps -> 0."""
    m = _model(**CONFIGS["gelu_new"])
    _, hook, by_head, by_pos = TL_SWEEPS[sweep_name]
    g, clean = _graphs(m)
    g.demand("logits")
    eps = 1e-5
    near = Cache({i: g.value(i) + eps * (v - g.value(i)) if torch.is_tensor(v) else v
                  for i, v in clean.values.items()}, clean.revision, {})  # fmt: skip
    kw = {"heads": m.cfg.n_heads if by_head else None, "positions": T if by_pos else None}
    res = attribution_sweep(g, hook, m.cfg.n_layers, near, _metric, top_k=3, **kw)
    exact = sweep_hook(g, hook, m.cfg.n_layers, near, _metric, **kw).values - res.baseline
    scale = float(res.estimate.abs().max())
    assert float((exact - res.estimate).abs().max()) < 1e-3 * scale
    assert agreement(res.estimate, exact, k=5)["spearman"] > 0.99


HEAD_HOOKS = ["attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_k", "attn.hook_pattern"]


@pytest.mark.parametrize("by_pos", [False, True])
@pytest.mark.parametrize("hook", HEAD_HOOKS)
def test_head_slice_estimates_equal_tl_gradients(hook: str, by_pos: bool) -> None:
    """Heads of the batched q, k, v, rot_k and pattern nodes: the estimate over the head's
    slice equals TL's, and the top k are exact."""
    m = _model(**CONFIGS["rotary"])
    ref = _tl_estimate(m, hook, True, by_pos)
    g, clean = _graphs(m)
    kw = {"heads": m.cfg.n_heads, "positions": T if by_pos else None}
    res = attribution_sweep(g, hook, m.cfg.n_layers, clean, _metric, top_k=4, **kw)
    assert res.estimate.shape == ref.shape
    torch.testing.assert_close(res.estimate, ref, rtol=1e-9, atol=1e-12)
    full = sweep_hook(g, hook, m.cfg.n_layers, clean, _metric, **kw).values - res.baseline
    for idx, val in zip(res.top, res.exact):
        assert abs(float(full[idx]) - float(val)) <= 1e-10 * float(full.abs().max())


def test_agreement_measures() -> None:
    x = torch.tensor([0.3, -2.0, 1.0, 0.1, 5.0])
    same = agreement(x, x.exp(), k=2)  # a monotone map keeps every rank
    assert same["spearman"] == pytest.approx(1.0)
    assert agreement(x, -x, k=2)["spearman"] == pytest.approx(-1.0)
    assert agreement(x, -x, k=2)["top_k_overlap"] == 1.0  # top k is by magnitude
    assert agreement(x, torch.tensor([5.0, 0.0, 0.0, 0.0, 0.1]), k=1)["top_k_overlap"] == 0.0
    with pytest.raises(GraphError, match="one shape"):
        agreement(x, x[:3])


def test_attribution_refuses_a_patched_graph() -> None:
    m = _model(**CONFIGS["relu"])
    g, clean = _graphs(m)
    g.patch("blocks.0.attn.hook_z.0", clean.values[g.id("blocks.0.attn.hook_z.0")])
    with pytest.raises(GraphError, match="unpatched"):
        attribution_sweep(g, "attn.hook_z", 3, clean, _metric, heads=2)
