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


_TL_CFG = {"n_layers": 2, "n_heads": 2, "d_model": 16, "d_head": 8, "d_mlp": 32, "n_ctx": 8,
           "d_vocab": 20, "act_fn": "gelu", "normalization_type": "LN"}  # fmt: skip


@pytest.mark.torch
@pytest.mark.plot
def test_cli_sweep_on_a_transformer_lens_config_matches_tl(tmp_path, capsys):
    import json

    from tests.helpers.extras import need

    need("transformer_lens")
    from ndvm import cli

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps(_TL_CFG))
    argv = ["sweep", "--tl-config", str(cfg), "--clean-tokens", "1,2,3,4;5,6,7,8"]
    argv += ["--corrupt-tokens", "1,2,9,4;5,6,10,8", "--answer", "3,4", "--wrong", "5,6"]
    assert cli.main([*argv, "--out", str(tmp_path)]) == 0  # 0: every sweep equals TL's
    out = capsys.readouterr().out
    assert "| heads x positions | 16 |" in out
    for name in ("tl_heads.png", "tl_resid_pre.png"):
        assert (tmp_path / name).stat().st_size > 0


@pytest.mark.torch
def test_cli_sweep_rejects_malformed_tokens(tmp_path, capsys):
    from tests.helpers.extras import need

    need("transformer_lens")
    from ndvm import cli

    cfg = tmp_path / "cfg.json"
    cfg.write_text("{}")
    argv = ["sweep", "--tl-config", str(cfg), "--clean-tokens", "1,x", "--corrupt-tokens", "1"]
    assert cli.main(argv) != 0
    assert "--clean-tokens takes token ids" in capsys.readouterr().err
