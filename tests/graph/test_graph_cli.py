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


@pytest.mark.parametrize(
    ("argv", "expected"),
    [(["--layers", "0"], "--layers must be in 1..64, got 0"),
     (["--heads", "0"], "--heads must be in 1..64, got 0"),
     (["--seq-len", "0"], "--seq-len must be in 1..512, got 0"),
     (["--repeats", "0"], "--repeats must be in 1..100, got 0"),
     (["--d-model", "1000000"], "--d-model must be in 1..4096, got 1000000"),
     (["--layers", "100000"], "--layers must be in 1..64, got 100000"),
     (["--heads", "3"], "--d-model (64) must be a multiple of --heads (3)"),
     (["--layers", "64", "--d-model", "4096"], "parameters (limit 2e+08)"),
     (["--layers", "32", "--d-model", "512", "--seq-len", "512", "--batch", "64"], "GFLOP")],
)  # fmt: skip
def test_cli_sweep_hostile_sizes_exit_2_with_one_line(argv, expected, tmp_path):
    """Checked before torch is imported or anything allocated: fast, one line, status 2."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-m", "ndvm", "sweep", *argv, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and expected in proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.torch
@pytest.mark.parametrize("fmt", ["npz", "pt"])
def test_cli_sweep_writes_tensors_without_the_plot_extra(tmp_path, capsys, monkeypatch, fmt):
    import json

    import numpy as np
    import torch
    from tests.helpers.extras import need

    need("transformer_lens")
    import ndvm.extras
    from ndvm import cli

    monkeypatch.setattr(ndvm.extras, "missing", lambda *e: [x for x in e if x == "plot"])
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({**_TL_CFG, "normalization_type": "RMS", "n_key_value_heads": 1}))
    argv = ["sweep", "--tl-config", str(cfg), "--clean-tokens", "1,2,3,4;5,6,7,8"]
    argv += ["--corrupt-tokens", "1,2,9,4;5,6,10,8", "--format", fmt, "--out", str(tmp_path)]
    assert cli.main(argv) == 0  # 0: every sweep equals TL's
    assert "no plots" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.png"))
    meta = json.loads((tmp_path / "sweep.json").read_text())
    want = {"heads": ["layer", "head"], "heads_x_positions": ["layer", "pos", "head"],
            "resid_pre": ["layer", "pos"]}  # fmt: skip
    assert {k: v["axes"] for k, v in meta["arrays"].items()} == want
    path = tmp_path / f"sweep.{fmt}"
    data = torch.load(path) if fmt == "pt" else dict(np.load(path))
    for k, v in meta["arrays"].items():
        assert list(data[k].shape) == v["shape"] and len(v["shape"]) == len(v["axes"])
    assert meta["tl_config"]["n_key_value_heads"] == 1 and meta["clean_tokens"][1][3] == 8


@pytest.mark.torch
def test_cli_sweep_bad_tl_configs_exit_2(tmp_path, capsys):
    import json

    from tests.helpers.extras import need

    need("transformer_lens")
    from ndvm import cli

    cfg = tmp_path / "cfg.json"
    base = ["sweep", "--tl-config", str(cfg), "--clean-tokens", "1,2", "--corrupt-tokens", "1,3"]
    for fields, expected in [
        ({**_TL_CFG, "n_layers": 0}, "n_layers must be a positive integer"),
        ({**_TL_CFG, "d_model": 10**6, "d_head": 10**6, "n_heads": 1}, "config d_model must"),
        ({**_TL_CFG, "n_layers": 60, "d_model": 4096, "d_head": 64}, "parameters"),
        ({**_TL_CFG, "n_ctx": 1}, "prompts have 2 tokens but n_ctx is 1"),
        ({**_TL_CFG, "attn_scores_soft_cap": 30.0}, "does not build: attn_scores_soft_cap"),
    ]:
        cfg.write_text(json.dumps(fields))
        assert cli.main([*base, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, err
