"""``ndvm sweep``: parser registration without torch, and a tiny end-to-end run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def test_cli_parser_and_graph_package_do_not_import_torch():
    code = (
        "import sys; import ndvm.graph, ndvm.graph.predict, ndvm.graph.builders; "
        "from ndvm import cli; p = cli.build_parser(); "
        "a = p.parse_args(['sweep', '--layers', '2']); "
        "assert a.layers == 2 and callable(a.func); "
        "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules"
    )
    env = dict(os.environ)  # the installed package (the artifact under test)
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


@pytest.mark.torch
@pytest.mark.plot
def test_cli_sweep_writes_plots_and_reports_exact_counts(tmp_path, capsys):
    from ndvm import cli

    argv = ["sweep", "--layers", "2", "--heads", "2", "--d-model", "8", "--seq-len", "4"]
    argv += ["--batch", "2", "--repeats", "1", "--positions", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "metric == baseline bitwise: True" in out
    for name in ("heatmap.png", "rho.png", "heatmap_positions.png"):
        assert (tmp_path / name).stat().st_size > 0
