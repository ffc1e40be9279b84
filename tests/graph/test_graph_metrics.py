"""Sweep metrics against plain loops and torch's own KL divergence."""

from __future__ import annotations

import math

import pytest
from tests.helpers.extras import need

torch = need("torch")

from ndvm.graph.errors import GraphError  # noqa: E402
from ndvm.graph.metrics import answer_prob, kl_to_clean, logit_diff  # noqa: E402


def _logits(seed: int) -> torch.Tensor:
    return torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_logit_diff_and_prob_equal_loops() -> None:
    lg, ans, wrong = _logits(0), [1, 4, 6], [2, 0, 6]
    want = sum(float(lg[b, -1, ans[b]] - lg[b, -1, wrong[b]]) for b in range(3)) / 3
    assert float(logit_diff(ans, wrong)(lg)) == pytest.approx(want, rel=1e-12)
    probs = [math.exp(lg[b, -1, ans[b]]) / float(lg[b, -1].exp().sum()) for b in range(3)]
    assert float(answer_prob(ans)(lg)) == pytest.approx(sum(probs) / 3, rel=1e-12)


def test_kl_to_clean_equals_torch_kl_div() -> None:
    clean, cur = _logits(1), _logits(2)
    want = torch.nn.functional.kl_div(
        cur[:, -1].log_softmax(-1), clean[:, -1].log_softmax(-1), log_target=True,
        reduction="batchmean",
    )  # fmt: skip
    torch.testing.assert_close(kl_to_clean(clean)(cur), want, rtol=1e-12, atol=1e-14)
    assert float(kl_to_clean(clean)(clean)) == pytest.approx(0.0, abs=1e-14)


def test_answer_count_must_match_batch() -> None:
    with pytest.raises(GraphError, match="2 answer tokens for a batch of 3"):
        logit_diff([1, 2], [3, 4])(_logits(0))
