"""The proposal grammar of a search task (docs/tasks.md): what `evolve` builds, `llm` is told."""

from __future__ import annotations

from dataclasses import dataclass

PARAM_POOL = "abcdfghkmnpqrsuvw"  # parameter names of a data task: the first four not inputs


def param_names(inputs: tuple[str, ...], n: int = 4) -> tuple[str, ...]:
    """``n`` parameter names for a grammar over ``inputs``, none of them an input (a column
    may be called ``a`` or ``c``)."""
    return tuple(p for p in PARAM_POOL if p not in inputs)[:n]


@dataclass(frozen=True)
class Grammar:
    """Expressions in ``inputs`` with parameters from ``params``.

    binary/unary: operator names; literals: numeric constants mutation may insert;
    allow_let: optional ``let*``; loop: whether a bounded iterated map
    ``(loop ((s INIT) (k 0)) (if (= k N) s (recur NEW-S (+ k 1))))`` may appear, with N in
    ``loop_depth`` (inclusive); require_loop: every candidate must be such a map.
    """

    inputs: tuple[str, ...] = ("x",)
    params: tuple[str, ...] = ("a", "b", "c", "d")
    binary: tuple[str, ...] = ("+", "-", "*", "/")
    unary: tuple[str, ...] = ("exp", "log", "sqrt", "sin", "cos", "abs")
    literals: tuple[float, ...] = (0.5, 1.0, 2.0)
    allow_let: bool = True
    loop: bool = True
    loop_depth: tuple[int, int] = (2, 16)
    require_loop: bool = False
    max_size: int = 40

    def describe(self) -> str:
        """The grammar in words, as given to an LLM proposer."""
        lines = [
            f"One expression in {' '.join(self.inputs)}; parameters from {' '.join(self.params)}.",
            f"Binary operators: {' '.join(self.binary)}. Unary: {' '.join(self.unary)}.",
            "Numeric literals are allowed.",
        ]
        if self.allow_let:
            lines.append("Optional let* bindings.")
        if self.loop:
            lo, hi = self.loop_depth
            what = "Every candidate must be" if self.require_loop else "Optionally, one"
            lines.append(
                f"{what} a bounded iterated map (loop ((s INIT) (k 0)) (if (= k N) s "
                f"(recur NEW-S (+ k 1)))) with N between {lo} and {hi}."
            )
        lines.append(f"At most {self.max_size} symbols and numbers in total.")
        return "\n".join(lines)
