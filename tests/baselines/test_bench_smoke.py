"""CI smoke form of ``ndvm bench``: every subcommand with --quick into a temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ENV = dict(os.environ)  # the installed package (the artifact under test)


def _marked(name: str) -> object:
    """A bench subcommand as a test case carrying the markers of the extras it needs."""
    from ndvm.commands.bench import _EXTRAS

    return pytest.param(name, marks=[getattr(pytest.mark, e) for e in _EXTRAS[name]], id=name)


@pytest.mark.parametrize(
    "name", [_marked(n) for n in ("decompose", "amortize", "crossover", "throughput", "meta")]
)
def test_bench_quick_writes_results(name: str, tmp_path: Path) -> None:
    # A subprocess, as a user runs it (and so an editable native rebuild can use real fds).
    proc = subprocess.run(
        [sys.executable, "-m", "ndvm", "bench", name, "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = tmp_path / name
    for f in ("results.csv", "results.json", "manifest.json", "plot.png"):
        assert (folder / f).stat().st_size > 0, f
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["command"] == name and manifest["cpu_count"] >= 1
    assert "git_commit" in manifest and "torch" in manifest["versions"]
    assert json.loads((folder / "results.json").read_text())["rows"]
    assert "native" in proc.stdout  # native columns, or "native: not built"


def test_import_ndvm_does_not_import_torch_or_jax() -> None:
    code = (
        "import sys, ndvm, ndvm.baselines, ndvm.baselines.programs, ndvm.bench.suites, "
        "ndvm.commands.bench, ndvm.cli; ndvm.cli.build_parser(); "
        "bad = [m for m in ('torch', 'jax') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV, timeout=120)


@pytest.mark.torch
@pytest.mark.plot
def test_throughput_tiers_choose_what_is_measured_beside_tagged(tmp_path: Path) -> None:
    from ndvm.backends.registry import available

    cmd = [sys.executable, "-m", "ndvm", "bench", "throughput", "--quick", "--out", str(tmp_path)]
    proc = subprocess.run([*cmd, "--tiers", "native"], capture_output=True, text=True,
                          timeout=120, env=ENV)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads((tmp_path / "throughput" / "results.json").read_text())["rows"]
    built = "native" in available()
    assert [(r["tier"], r["B"]) for r in rows] == [("tagged", 1)] + built * [("native", 1),
                                                                             ("native", 4)]
    assert rows[0]["vs_tagged"] == 1.0
    bad = subprocess.run([*cmd, "--tiers", "native,nope"], capture_output=True, text=True,
                         timeout=120, env=ENV)  # fmt: skip
    assert bad.returncode == 2 and "unknown tier(s) nope" in bad.stderr
