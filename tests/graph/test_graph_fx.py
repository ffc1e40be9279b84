"""from_fx on torch's own transformer block, against the module's output (float64)."""

from __future__ import annotations

import pytest
from tests.helpers.extras import need

torch = need("torch")

from ndvm.graph.errors import GraphError  # noqa: E402
from ndvm.graph.fx import from_fx  # noqa: E402


def _layer(norm_first: bool, activation: str) -> object:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        16, 4, 32, dropout=0.0, activation=activation, batch_first=True, norm_first=norm_first
    )
    return layer.double().eval()


def _x() -> torch.Tensor:
    return torch.randn(3, 5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_graph_equals_module(norm_first: bool, activation: str) -> None:
    layer, x = _layer(norm_first, activation), _x()
    g = from_fx(layer, x)
    with torch.no_grad():
        want = layer(x)
    for site in ("norm1", "norm2", "self_attn", "linear1", "linear2"):
        assert site in g
    torch.testing.assert_close(g.get("output"), want, rtol=1e-12, atol=1e-12)
    y = _x() * 0.5  # a new input leaf invalidates the whole graph
    g.leaf("src", y)
    with torch.no_grad():
        torch.testing.assert_close(g.get("output"), layer(y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("norm_first", [False, True])
def test_patching_a_block_site_equals_a_module_hook(norm_first: bool) -> None:
    """Patching the feed-forward output in the graph equals replacing it with a forward hook."""
    layer, x = _layer(norm_first, "relu"), _x()
    g = from_fx(layer, x)
    g.demand("output")
    new = torch.randn(3, 5, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    cone = g.patch("linear2", new)
    assert g.id("output") in cone and g.id("self_attn") not in cone
    handle = layer.linear2.register_forward_hook(lambda mod, inp, out: new)
    try:
        with torch.no_grad():
            want = layer(x)
    finally:
        handle.remove()
    torch.testing.assert_close(g.get("output"), want, rtol=1e-12, atol=1e-12)


def test_untraceable_module_is_a_typed_error() -> None:
    enc = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2,
        enable_nested_tensor=False,
    )  # fmt: skip
    with pytest.raises(GraphError, match="cannot trace TransformerEncoder"):
        from_fx(enc.double().eval(), _x())
