"""The front end's ``CompiledProgram`` (built with ``front`` passed positionally) is what the
keyword form builds, and each program keeps its own derived forms."""

from __future__ import annotations

from ndvm.lang import ir
from ndvm.lang.front import compile_source

SLOTS = ir.CompiledProgram.__slots__


def test_the_front_ends_program_sets_every_slot_as_the_keyword_form() -> None:
    made = compile_source("(params (a 1.0) (k 0.5 positive))\n(+ (* a x) k y)", None, ("x", "y"))
    assert made.front is not None and made.derived == {} and made.has_header
    init = ir.CompiledProgram(
        None, made.params, made.inputs, made.source, made.has_header, made.prelude,
        made.input_positions, made.dialect, front=made.front,
    )  # fmt: skip
    for name in SLOTS:
        assert getattr(made, name) == getattr(init, name), name
    assert made == init and hash(made) == hash(init)
    assert made.body == init.body  # the IR records, built from the same tables
    assert [s.name for s in made.params] == ["a", "k"] and made.inputs == ("x", "y")


def test_programs_of_one_source_keep_their_own_derived() -> None:
    a = compile_source("(+ a x)", None, ("x",))
    b = compile_source("(+ a x)", None, ("x",))
    a.derived["k"] = 1
    assert b.derived == {} and a.derived is not b.derived
