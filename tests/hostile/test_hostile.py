"""The hostile corpus on every backend, under the supervisor: each case ends (no crash, no
hang past its deadline plus a margin) with the outcome the corpus gives it: a value with the
per-lane statuses and lane errors it lists, or the typed, positioned error it names."""

from __future__ import annotations

from typing import Any

import pytest
from tests.hostile.corpus import CASES, Case
from tests.hostile.supervisor import run_corpus

from ndvm.backends import registry

_RESULTS: dict[str, list[dict[str, Any]]] = {}


def _results(backend: str) -> list[dict[str, Any]]:
    if backend not in _RESULTS:
        _RESULTS[backend] = run_corpus(backend)
    return _RESULTS[backend]


def check(case: Case, got: dict[str, Any]) -> None:
    what = f"{case.name}: {got}"
    assert got["outcome"] not in ("crash", "hang", "untyped"), what
    allowed = case.expect.split("|")
    if got["outcome"] == "value":
        assert "value" in allowed, what
        if case.status is not None:
            assert tuple(got["status"]) == case.status, what
        if case.lane_errors is not None:
            assert tuple(got["lane_errors"]) == case.lane_errors, what
        if case.positioned:
            assert got["lane_lines"] and None not in got["lane_lines"], what
        return
    assert any(name in got["cls"] for name in allowed), what
    if case.positioned:
        assert got["line"] is not None, what


@pytest.mark.parametrize("backend", registry.available())
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_case(backend: str, case: Case) -> None:
    got = _results(backend)[CASES.index(case)]
    assert got["name"] == case.name
    check(case, got)


def test_corpus_covers_every_category() -> None:
    categories = {c.category for c in CASES}
    assert categories == {
        "sharing",
        "bulk",
        "size",
        "index",
        "runaway",
        "payload",
        "files",
        "covered",
    }
    assert len({c.name for c in CASES}) == len(CASES)
