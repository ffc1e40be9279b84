"""Sweep metrics on logits [batch, pos, vocab], read at the last position and averaged over the
batch: logit difference of answer tokens, probability of the answer, KL divergence to clean."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Metric = Callable[[Any], Any]


def _last(logits: Any, tokens: Sequence[int]) -> Any:
    import torch

    idx = torch.as_tensor(list(tokens), device=logits.device).reshape(-1, 1)
    if idx.shape[0] != logits.shape[0]:
        from ndvm.graph.errors import GraphError

        raise GraphError(f"{idx.shape[0]} answer tokens for a batch of {logits.shape[0]}")
    return logits[:, -1].gather(1, idx)[:, 0]


def logit_diff(answer: Sequence[int], wrong: Sequence[int]) -> Metric:
    """mean_b logits[b, -1, answer[b]] - logits[b, -1, wrong[b]]."""
    return lambda logits: (_last(logits, answer) - _last(logits, wrong)).mean()


def answer_prob(answer: Sequence[int]) -> Metric:
    """mean_b softmax(logits[b, -1])[answer[b]]."""
    return lambda logits: _last(logits.softmax(-1), answer).mean()


def kl_to_clean(clean_logits: Any) -> Metric:
    """mean_b KL(clean || patched) of the last position's next-token distributions."""
    ref = clean_logits[:, -1].log_softmax(-1)

    def metric(logits: Any) -> Any:
        cur = logits[:, -1].log_softmax(-1)
        return (ref.exp() * (ref - cur)).sum(-1).mean()

    return metric
