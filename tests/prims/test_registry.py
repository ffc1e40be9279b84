"""Meta-tests on the one primitive table: completeness, stable opcodes, generated files fresh."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from ndvm.prims import PRIMS, Kind, Shape
from ndvm.prims.registry import opcode_identifier

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = Path(__file__).with_name("prims_snapshot.json")

# Every primitive name (and alias) that docs/language.md, section "Primitives", requires.
LANGUAGE_PRIMITIVES = """
+ - * / abs min max exp log log1p expm1 sqrt cbrt square expt pow
sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh sigmoid softplus erf hypot clamp
floor ceiling round truncate sign quotient remainder modulo
= < > <= >= zero? positive? negative? finite? nan? not eq? eqv? equal?
number? boolean? symbol? string? pair? null? list? procedure? vector? matrix?
cons car cdr caar cadr cdar cddr caaar caadr cadar caddr cdaar cdadr cddar cdddr
list length append reverse list-ref list-tail iota
map for-each filter reduce fold-left fold-right apply assoc assq assv member memq memv
vec vector mat make-vector zeros ones eye ref vector-ref vlen vector-length rows cols
vector-map vector->list list->vector
dot vsum vmean norm normalize cross scale outer matvec matmul transpose trace det logdet inv
solve cholesky
error void
""".split()

# Opcode ranges per family (docs: numeric 1-99, predicates 100-149, linalg 150-199).
NUMERIC_RANGE = range(1, 100)
PREDICATE_RANGE = range(100, 150)
LINALG_RANGE = range(150, 200)


def _load_gen_prims() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_prims", ROOT / "tools" / "gen_prims.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_registry_lane_wise_prims_have_a_ref_and_structural_ones_none() -> None:
    """The table's ``ref`` is the pure NumPy rule; structural primitives are declarations whose
    implementations belong to each evaluator (tests/eval/test_impls.py)."""
    for p in PRIMS:
        if p.kind in (Kind.NUMERIC, Kind.PREDICATE):
            assert p.ref is not None, f"{p.name} has no ref"
        else:
            assert p.ref is None, f"{p.name}: a {p.kind.name} primitive carries an evaluator's code"


def test_registry_every_numeric_prim_has_vjp_and_others_none() -> None:
    for p in PRIMS:
        if p.kind is Kind.NUMERIC:
            assert p.vjp is not None, f"{p.name} has no vjp"
        elif p.kind is Kind.PREDICATE:
            assert p.vjp is None, f"predicate {p.name} must not have a vjp"


def test_registry_opcodes_and_names_unique() -> None:
    codes = [p.code for p in PRIMS]
    assert len(codes) == len(set(codes))
    assert all(c > 0 for c in codes), "opcode 0 is reserved"
    names = [n for p in PRIMS for n in p.names]
    assert len(names) == len(set(names))
    uppers = [p.upper for p in PRIMS]
    assert len(uppers) == len(set(uppers)), "two primitives map to one C identifier"
    assert all(u.isidentifier() for u in uppers)
    assert opcode_identifier("vector->list") == "VECTOR_TO_LIST"


def test_registry_numeric_opcode_ranges() -> None:
    for p in PRIMS:
        if p.kind is Kind.NUMERIC and p.shape is Shape.CUSTOM:
            assert p.code in LINALG_RANGE, p.name
            assert p.shape_rule is not None and p.in_ranks is not None, p.name
        elif p.kind is Kind.NUMERIC:  # scale: the linalg family's one elementwise member
            assert p.code in (LINALG_RANGE if p.family == "linalg" else NUMERIC_RANGE), p.name
        elif p.kind is Kind.PREDICATE and p.family == "comparison":
            assert p.code in PREDICATE_RANGE, p.name


def test_registry_every_prim_is_documented() -> None:
    for p in PRIMS:
        assert p.doc and "\n" not in p.doc, f"{p.name} needs a one-line doc"
        assert p.family != "misc", f"{p.name} needs a family"


def test_registry_opcodes_match_snapshot() -> None:
    """Opcodes are stable: regenerate with ``tools/gen_prims.py --update-snapshot`` only when
    adding primitives, never to renumber one."""
    snap = {name: code for name, code in json.loads(SNAPSHOT.read_text(encoding="utf-8"))}
    now = {p.name: p.code for p in PRIMS}
    changed = {n: (snap[n], now[n]) for n in snap.keys() & now.keys() if snap[n] != now[n]}
    assert not changed, f"opcodes changed (old, new): {changed}"
    assert not snap.keys() - now.keys(), f"primitives removed: {sorted(snap.keys() - now.keys())}"
    assert not now.keys() - snap.keys(), (
        f"new primitives not in the snapshot (run tools/gen_prims.py --update-snapshot): "
        f"{sorted(now.keys() - snap.keys())}"
    )


def test_registry_generated_files_are_fresh() -> None:
    gen = _load_gen_prims()
    assert gen.stale() == [], "run: PYTHONPATH=src python tools/gen_prims.py"
    assert gen.main(["--check"]) == 0


def test_registry_gen_prims_check_detects_staleness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gen = _load_gen_prims()
    inc = tmp_path / "prims.inc"
    inc.write_text(gen.render_inc(PRIMS) + "// edited\n", encoding="utf-8")
    monkeypatch.setattr(gen, "INC", inc)
    monkeypatch.setattr(gen, "DOC", tmp_path / "missing.md")
    assert gen.main(["--check"]) == 1
    assert set(gen.stale()) == {inc, tmp_path / "missing.md"}
    text = gen.render_inc(PRIMS)
    assert "GENERATED by tools/gen_prims.py; do not edit" in text
    assert 'NDVM_PRIM(SQRT, 12, "sqrt", 1, 1, NUMERIC, ELEMENTWISE, POSITIVE)' in text
    assert 'NDVM_PRIM(ADD, 1, "+", 0, -1, NUMERIC, ELEMENTWISE, ALL)' in text
    assert text.count("\nNDVM_PRIM(") == len(PRIMS)


@pytest.mark.parametrize("name", LANGUAGE_PRIMITIVES)
def test_registry_language_primitive_is_registered(name: str) -> None:
    assert name in PRIMS, f"docs/language.md primitive {name!r} is not registered"
