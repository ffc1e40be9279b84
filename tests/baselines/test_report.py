"""benchmarks/report.py: the --quick smoke run, the README rendering, rows that cannot run."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "report.py"


def _report():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_report", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_report"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.sympy
@pytest.mark.data
def test_quick_measures_every_row(tmp_path: Path) -> None:
    report = _report()
    out = tmp_path / "quick.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out), "--work", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
    assert list(rows) == [r.id for r in report.ROWS]  # every row is regenerated, in order
    for row in report.ROWS:
        r = rows[row.id]
        absent = [m for m in row.needs if importlib.util.find_spec(m) is None]
        # a row whose peer or extra is absent says which, instead of failing
        assert r["figure"].startswith(f"not measured: needs {absent[0]}" if absent else ""), r
        assert absent or not r["figure"].startswith("not measured"), r["figure"]
        assert r["measured"]["cpu_count"] >= 1 and len(r["measured"]["load_average"]) == 3
        assert r["kind"] == row.kind
        if row.timed and not absent:
            assert "(1 round)" in r["figure"], r["figure"]  # --quick: --rounds 1
    assert rows["native-c"]["kind"] == report.CORE and rows["graph-rho"]["kind"] == "exact counts"
    if "data" in rows["graph-rho"]:  # the counts the figure reports are the benchmark's own
        graph = rows["graph-rho"]["data"]["rows"]
        assert all(g["recomputed"] == g["predicted"] for g in graph)
        assert "nodes recomputed = the predicted cones" in rows["graph-rho"]["figure"]
    disc = rows["discovery"]
    # the same operator set for every system; peers are optional, their absence stated
    assert disc["data"]["grammar"]["binary"] == ["+", "-", "*", "/"]
    for peer, module in (("operon", "pyoperon"), ("gplearn", "gplearn")):
        installed = importlib.util.find_spec(module) is not None
        assert (f"{peer}: not run ({module} not installed)" in disc["figure"]) != installed
        assert (peer in disc["data"]["spread"]) == installed
    assert disc["data"]["spread"]["ndvm"]["recovered"]["seeds"] == [0]
    # the README table: a header and one measured line per row, none kept from earlier runs
    lines = proc.stdout.splitlines()
    start = lines.index("| what | figure | measured |")
    body = [ln for ln in lines[start + 2 :] if ln.startswith("| ")]
    assert len(body) == len(report.ROWS)
    assert not any(report.KEPT in ln for ln in body)


def test_render_only_rewrites_the_block_and_nothing_else(tmp_path: Path) -> None:
    report = _report()
    results = tmp_path / "r.json"
    row = {"id": "discovery", "what": "W", "kind": report.PY, "figure": "F",
           "measured": {"timestamp": "2026-01-02T03:04:05", "cpu_count": 2, "cpu_model": "C",
                        "load_average": [1.0, 2.0, 3.0], "git_commit": "0123456789ab"}}  # fmt: skip
    results.write_text(json.dumps({"rows": [row]}))
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{report.BEGIN}\nold table\n{report.END}\nafter\n")
    report.main(["--render-only", "--json", str(results), "--readme", str(readme)])
    text = readme.read_text()
    assert text.startswith(f"intro\n{report.BEGIN}\n| what | figure | measured |")
    assert text.endswith(f"{report.END}\nafter\n") and "old table" not in text
    assert "| W | F | end to end, Python; 2026-01-02, 2 × C, load 1.0, 2.0, 3.0, commit " \
           "01234567 |" in text  # fmt: skip
    readme.write_text("no markers\n")
    with pytest.raises(SystemExit) as exc:
        report.main(["--render-only", "--json", str(results), "--readme", str(readme)])
    assert exc.value.code == 2


def test_a_row_whose_module_is_absent_says_so(tmp_path: Path) -> None:
    report = _report()
    row = report.Row("x", "what", report.PY, run=lambda *a: {"figure": "ran"},
                     needs=("numpy", "no_such_module_ndvm_test"))  # fmt: skip
    args = argparse.Namespace(quick=True, work=str(tmp_path), reuse=False, rounds=1)
    out = report.measure(row, args)
    assert out["figure"].startswith("not measured: needs no_such_module_ndvm_test")
    assert out["figure"].count("numpy") == 0  # present: not named


def test_unknown_row_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    report = _report()
    with pytest.raises(SystemExit) as exc:
        report.main(["--quick", "--rows", "nope", "--json", str(tmp_path / "j.json")])
    assert exc.value.code == 2
    assert capsys.readouterr().err == "error: no such row(s): nope\n"


def _discovery():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "benchmarks"))  # its discovery_laws
    spec = importlib.util.spec_from_file_location("bench_discovery", ROOT / "benchmarks" /
                                                  "bench_discovery.py")  # fmt: skip
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_discovery"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_peers_get_ndvm_operators_and_name_what_they_lack() -> None:
    disc = _discovery()
    disc.set_grammar(("+", "-", "*", "/", "^"), ("exp", "log", "sqrt", "sin", "cos", "tanh"))
    operon, lacks = disc.peer_grammar("operon")
    assert operon == ["add", "sub", "mul", "div", "pow", "exp", "log", "sqrt", "sin", "cos",
                      "tanh"] and lacks == []  # fmt: skip
    gplearn, lacks = disc.peer_grammar("gplearn")
    assert gplearn == ["add", "sub", "mul", "div", "exp", "log", "sqrt", "sin", "cos"]
    assert lacks == ["^", "tanh"]
    disc.set_grammar(("+",), ("no-such-op",))
    assert disc.peer_grammar("operon") == (["add"], ["no-such-op"])


def test_spread_counts_per_seed() -> None:
    disc = _discovery()
    rows = [{"method": m, "seed": s, "law": law, "recovered": ok}
            for m, s, law, ok in [("a", 0, "x", True), ("a", 0, "y", True), ("a", 1, "x", False),
                                  ("a", 1, "y", True), ("a", 2, "x", False),
                                  ("a", 2, "y", False), ("b", 0, "x", True)]]  # fmt: skip
    got = disc.spread(rows, "a", "recovered")
    assert got == {"seeds": [0, 1, 2], "counts": [2, 1, 0], "of": 2, "median": 1.0,
                   "min": 0, "max": 2}  # fmt: skip


# (law, model, recovered with 1 % noise, by the old rule of 2 significant digits (or 3))
NOISY = [
    ("decay", "3*exp(-0.7*t)", True, True),
    ("decay", "3*exp(-0.7056*t)", True, False),  # 0.8 % off: 0.71 against 0.70
    ("decay", "3.048*exp(-0.7*t)", True, True),  # 1.6 % off: 3.0 both
    ("decay", "2.949*exp(-0.7*t)", True, False),  # -1.7 % off: 2.9 against 3.0
    ("michaelis-menten", "2.5*S/(0.8056 + S)", True, False),  # 0.7 % off in K
    ("michaelis-menten", "-2.0*S/(-0.8*S - 0.64)", True, True),  # normalized: 2.5 S/(S + 0.8)
    ("logistic", "0.8*x*(1 - 1.016*x/7)", True, False),  # 1/7: 0.1451 is 0.15, not 0.14
    ("logistic", "0.8*x*(1 - 0.955*x/7)", False, True),  # 1/7: 4.5 % off is 0.14 again
    ("line-big", "147.5 + 0.8356*x", True, False),  # the slope 0.7 % off
    ("line-big", "154 + 0.83*x", False, True),  # the intercept 4.4 % off: 150 both
    ("decay", "3*exp(-0.75*t)", False, False),  # 7 % off
    ("decay", "3*exp(-0.7*t) + 0.01*t", False, False),  # another structure
    ("I.6.2a", "0.4*exp(-0.5*angle**2.01)", True, True),  # 1/sqrt(2 pi), the exponent 2
    ("I.12.1", "1.013*mu*Nn", True, True),  # the coefficient 1 is a constant too
    ("I.12.1", "0.994*mu*Nn", True, False),  # 0.6 % below 1: 0.99 to 2 digits
    ("I.12.1", "1.04*mu*Nn", False, True),  # 4 % above 1: 1.0 to 2 digits
]  # fmt: skip


@pytest.mark.sympy
@pytest.mark.parametrize(("name", "model", "noisy", "old"), NOISY)
def test_recovered_with_noise_is_one_relative_tolerance(
    name: str, model: str, noisy: bool, old: bool
) -> None:
    """With noise each constant is within ``NOISE_TOLERANCE`` x the noise of the law's, on
    either side, for every law alike; 2 significant digits were 0.5 % to 5 % wide and
    lopsided by where the constant sits between two roundings."""
    import sympy

    disc = _discovery()
    law = {law.name: law for law in disc.LAWS}[name]
    expr = sympy.sympify(model, locals={v: sympy.Symbol(v) for v in law.variables})
    assert disc.recovered(expr, law, 0.01) is noisy
    assert (disc.exact(expr, law, 2) or disc.exact(expr, law, 3)) is old  # the old rule


@pytest.mark.sympy
def test_recovered_without_noise_stays_three_digits() -> None:
    import sympy

    disc = _discovery()
    law = {law.name: law for law in disc.LAWS}["decay"]
    t = sympy.Symbol("t")
    assert disc.recovered(3.0004 * sympy.exp(-0.70002 * t), law)
    assert not disc.recovered(3.006 * sympy.exp(-0.7 * t), law)  # 3.01 against 3.00
    assert not disc.recovered(3 * sympy.exp(-0.7056 * t), law)


def test_fit_and_nist_figures_from_their_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows' figures, as the README shows them, from two synthetic rounds each."""
    rep = _report()
    fit_rounds = [{k: [{"ndvm_s": a, "scipy_s": 1.0, "ndvm_loss": 1.0, "scipy_loss": 1.0}]
                   for k, a in (("starts1", r), ("defaults", 2 * r), ("starts64", 3 * r))}
                  for r in (0.4, 0.5)]  # fmt: skip
    monkeypatch.setattr(rep, "rounds_of", lambda *a, **k: fit_rounds)
    assert rep.run_fit(True, Path("."), True, 2)["figure"] == (
        "time vs curve_fit from its one start: 1 start 0.45× (range 0.40–0.50, 2 rounds); "
        "defaults (16 starts) 0.90× (range 0.80–1.00, 2 rounds); 64 starts 1.35× (range "
        "1.20–1.50, 2 rounds); optimum at least as good (defaults) on 1 / 1 in every round")
    row = {"problem": "Misra1a", "ndvm": {"ms": 2.0, "rss": 0.1245513889}, "ndvm1":
           {"ms": 1.0, "rss": 1e9}, "scipy": {"ms": 4.0, "rss": 0.1245513889}}  # fmt: skip
    monkeypatch.setattr(rep, "rounds_of", lambda *a, **k: [[row], [row]])
    assert rep.run_nist(True, Path("."), True, 2)["figure"] == (
        "certified RSS reached: ndvm defaults 1 / 1 in 0.50× (range 0.50–0.50, 2 rounds) "
        "curve_fit's time; one start 0 / 1 in 0.25× (range 0.25–0.25, 2 rounds); curve_fit 1 / 1")
