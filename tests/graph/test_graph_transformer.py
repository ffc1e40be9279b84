"""Toy transformer: graph == eager bitwise, closed-form cones, sweep == full-recompute baseline."""

from __future__ import annotations

import pytest
from tests.helpers.extras import need

torch = need("torch")
from ndvm.graph import predict  # noqa: E402
from ndvm.graph import transformer as tr  # noqa: E402
from ndvm.graph.baseline import full_recompute_sweep  # noqa: E402
from ndvm.graph.fx import from_fx  # noqa: E402
from ndvm.graph.sweep import grid, sweep  # noqa: E402

pytestmark = pytest.mark.torch

SIZES = [
    dict(layers=1, heads=1, d_model=8, seq_len=3),
    dict(layers=3, heads=2, d_model=16, seq_len=5),
    dict(layers=4, heads=4, d_model=16, seq_len=4),
]


def _setup(position_resolved: bool, **size):
    cfg = tr.TransformerConfig(vocab=13, position_resolved=position_resolved, **size)
    model = tr.ToyTransformer(cfg, seed=3)
    gen = torch.Generator().manual_seed(1)
    clean = torch.randint(0, cfg.vocab, (2, cfg.seq_len), generator=gen)
    corrupt = torch.randint(0, cfg.vocab, (2, cfg.seq_len), generator=gen)
    g = tr.to_graph(model, clean)
    return cfg, model, g, clean, corrupt


def _metric(logits: torch.Tensor) -> torch.Tensor:
    return logits[:, -1, 1] - logits[:, -1, 2]


def _grids(cfg):
    pos = cfg.seq_len if cfg.position_resolved else None
    return [
        grid("attn.hook_z", cfg.layers, cfg.heads, pos),
        grid("hook_mlp_out", cfg.layers, None, pos),
        grid("hook_resid_pre", cfg.layers, None, pos),
    ]


@pytest.mark.parametrize("position_resolved", [False, True])
@pytest.mark.parametrize("size", SIZES)
def test_transformer_graph_equals_eager_bitwise(position_resolved, size):
    cfg, model, g, clean, corrupt = _setup(position_resolved, **size)
    with torch.no_grad():
        assert torch.equal(g.get("logits"), model(clean))
        g.leaf("tokens", corrupt)
        assert torch.equal(g.get("logits"), model(corrupt))
    assert len(g.rule_nodes()) == tr.full_cost(cfg)


@pytest.mark.parametrize("position_resolved", [False, True])
@pytest.mark.parametrize("size", SIZES)
def test_transformer_closed_form_cones_have_zero_residual(position_resolved, size):
    cfg, _, g, _, _ = _setup(position_resolved, **size)
    for gr in _grids(cfg):
        for s in gr.sites:
            measured = predict.patch_cost(g, s.name, "logits")
            assert measured == len(g.cone(s.name))
            assert measured == tr.closed_form_cone(cfg, s.hook, s.layer, s.head, s.pos), s.name


@pytest.mark.parametrize("size", SIZES)
def test_transformer_predicted_rho_equals_measured_counts(size):
    cfg, model, g, clean, corrupt = _setup(False, **size)
    cache = g.capture()
    g.leaf("tokens", corrupt)
    sites = list(grid("attn.hook_z", cfg.layers, cfg.heads).sites)
    sites += grid("hook_mlp_out", cfg.layers).sites
    res = sweep(g, sites, cache, _metric, "logits")
    assert res.full_cost == tr.full_cost(cfg)
    assert [r.recomputed for r in res.records] == [
        tr.closed_form_cone(cfg, s.hook, s.layer, s.head) for s in sites
    ]
    assert res.rho_counts == pytest.approx(tr.predicted_rho(cfg), rel=1e-12)
    assert res.rho_counts == predict.sweep(g, [s.name for s in sites], "logits").rho


@pytest.mark.parametrize("position_resolved", [False, True])
def test_sweep_equals_full_recompute_baseline_bitwise(position_resolved):
    cfg, model, g, clean, corrupt = _setup(position_resolved, **SIZES[1])
    cache = g.capture()
    g.leaf("tokens", corrupt)
    for gr in _grids(cfg):
        res = sweep(g, gr, cache, _metric, "logits")
        clean_acts = {s.name: cache.values[g.id(s.name)] for s in gr.sites}
        base, _ = full_recompute_sweep(model, corrupt, gr, clean_acts, _metric)
        assert res.values.shape == (*gr.shape, 2)
        assert torch.equal(res.values, base)
        assert g.invalid_nodes() == set() and not any(g.is_pinned(s.name) for s in gr.sites)
    with torch.no_grad():
        assert torch.equal(g.value("logits"), model(corrupt))


def test_sweep_ablation_and_recompute_restore_match_baseline():
    cfg, model, g, _, corrupt = _setup(False, **SIZES[2])
    g.leaf("tokens", corrupt)
    gr = grid("attn.hook_z", cfg.layers, cfg.heads)

    def zero(cur, _clean):
        return torch.zeros_like(cur)

    copy = sweep(g, gr, None, _metric, "logits", setter=zero)
    again = sweep(g, gr, None, _metric, "logits", setter=zero, restore="recompute")
    base, _ = full_recompute_sweep(model, corrupt, gr, None, _metric, setter=zero)
    assert torch.equal(copy.values, base) and torch.equal(again.values, base)
    # recompute-restore pays each cone twice plus the site itself
    assert again.recomputed == 2 * copy.recomputed + len(gr.sites)


def test_from_fx_matches_eager_bitwise():
    cfg = tr.TransformerConfig(layers=2, heads=2, d_model=8, seq_len=4, vocab=7)
    model = tr.ToyTransformer(cfg, seed=0)
    tokens = torch.randint(0, 7, (2, 4), generator=torch.Generator().manual_seed(0))
    g = from_fx(model, tokens, concrete_args={"hooks": None})
    with torch.no_grad():
        assert torch.equal(g.get("output"), model(tokens))
    mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    g2 = from_fx(mlp.double(), x.double())
    assert g2.names == ["input_1", "0", "1", "2", "output"]
    with torch.no_grad():
        assert torch.equal(g2.get("output"), mlp(x.double()))
        g2.patch("1", torch.zeros(3, 8, dtype=torch.float64))
        assert g2.demand("output").count == 2
        assert torch.equal(g2.value("output"), mlp[2].bias.expand(3, 2))
