"""The state a proposal sees: a snapshot shared with the driver's records, not a copy."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ndvm import tasks
from ndvm.search import Budget, run_search
from ndvm.search.candidate import Candidate, Evaluation, Record, skeleton_hash
from ndvm.search.evolve import EvolveProposer
from ndvm.search.state import RecordsView, SeenView
from ndvm.search.store import Store


def _rec(i: int) -> Record:
    return Record(i, i // 3, Candidate(f"(* a {i})"), "", 0, 0, i, None)


@given(st.integers(0, 12), st.integers(0, 5), st.integers(-15, 15), st.integers(-15, 15),
       st.sampled_from([None, 1, 2, -1]))  # fmt: skip
def test_records_view_reads_like_the_tuple_it_stands_for(k, extra, a, b, step):
    base = [_rec(i) for i in range(k + 3)]
    tail = [_rec(100 + i) for i in range(extra)]
    view, want = RecordsView(base, k, tail), tuple(base[:k] + tail)
    assert len(view) == len(want) and tuple(view) == want and view == want
    assert view == RecordsView(list(want), len(want), []) and hash(view) == hash(want)
    assert view[a:b:step] == want[a:b:step]
    for i in range(-len(want), len(want)):
        assert view[i] is want[i]
    with pytest.raises(IndexError):
        view[len(want)]
    base.append(_rec(99))  # the driver appends later: the view keeps its length
    assert tuple(view) == want


def test_seen_view_is_a_snapshot_of_hashes_first_seen_before_the_cutoff():
    first = {"a": 0, "b": 4, "c": 7}
    seen = SeenView(first, 5)
    assert "a" in seen and "b" in seen and "c" not in seen and "z" not in seen
    assert seen == {"a", "b"} and len(seen) == 2
    first["d"] = 9  # later records only add hashes at indices past the cutoff
    assert seen == frozenset({"a", "b"})


def _row(r: Record) -> tuple:
    return (r.idx, r.batch, r.status, r.skeleton, repr(r.evaluation))  # repr: NaN == NaN


class Keeping:
    """The evolve proposer; keeps every state it was given and what it read from it then."""

    def __init__(self) -> None:
        spec = tasks.get("sr-damped").search
        self.inner = EvolveProposer(spec.grammar, spec.seeds)
        self.name = "keeping"
        self.kept: list[tuple[object, list[tuple], frozenset[str], bool]] = []

    def propose(self, state, n):  # type: ignore[no-untyped-def]
        rows = [_row(r) for r in state.records]
        self.kept.append((state, rows, frozenset(state.seen), state.has_success))
        return self.inner.propose(state, n)


@pytest.mark.parametrize("workers", [1, 2])
def test_kept_states_do_not_change_and_match_the_committed_records(tmp_path, workers):
    prop = Keeping()
    run_search("sr-damped", prop, tmp_path / "k.db", budget=Budget(batches=5), batch_size=16,
               workers=workers)  # fmt: skip
    store = Store(tmp_path / "k.db")
    final = store.records(store.latest_run()["run"])
    store.close()
    assert len(prop.kept) == 5
    for state, rows, seen, success in prop.kept:
        n = state.next_batch  # the batch being proposed: n - 1 is shown as proposed
        assert [_row(r) for r in state.records] == rows
        assert frozenset(state.seen) == seen and state.has_success == success
        done = [r for r in final if r.batch < n - 1]
        assert rows[: len(done)] == [_row(r) for r in done]
        shown = state.records[len(done) :]
        assert all(r.status == "pending" or r.evaluation.reason.startswith("proposal: ")
                   for r in shown)  # fmt: skip
        calibrated = {skeleton_hash(r.skeleton, r.candidate.src) for r in done
                      if r.skeleton and r.status not in ("rejected", "pending")}  # fmt: skip
        assert seen == calibrated
        later = {skeleton_hash(r.skeleton, r.candidate.src) for r in final if r.skeleton}
        assert all((h in state.seen) == (h in calibrated) for h in later)  # membership too
        assert success == any(r.evaluation.success for r in done)
    assert any(seen for _, _, seen, _ in prop.kept)  # the check above saw calibrated hashes


def test_a_proposal_rejected_record_keeps_its_evaluation_in_the_view():
    ev = Evaluation("rejected", reason="proposal: bad")
    r = Record(0, 0, Candidate("(+"), "", 0, 0, 0, ev)
    assert RecordsView([r], 0, [r])[0].evaluation is ev


def test_the_search_leaves_the_collector_as_it_found_it(tmp_path):
    """The driver freezes what it committed (the collector stops rescanning the records) and
    unfreezes at the end; a caller's own frozen objects stay frozen."""
    import gc

    assert gc.get_freeze_count() == 0
    run_search("sr-damped", Keeping(), tmp_path / "a.db", budget=Budget(batches=2),
               batch_size=8)  # fmt: skip
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        run_search("sr-damped", Keeping(), tmp_path / "b.db", budget=Budget(batches=2),
                   batch_size=8)  # fmt: skip
        assert gc.get_freeze_count() > 0  # not unfrozen by the search
    finally:
        gc.unfreeze()
