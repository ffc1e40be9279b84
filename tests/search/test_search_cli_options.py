"""``ndvm search`` options a user sets: checked numbers (one line, exit status 2), success
thresholds, resumes refused on other data, and the README's quick start on the shipped data."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ndvm.cli import main
from ndvm.tasks.columns import success_rule, threshold_success

ROOT = Path(__file__).resolve().parents[2]
PRESSURE = ROOT / "examples" / "data" / "pressure.csv"
DATA = ["--data", str(PRESSURE), "--x", "temperature", "--y", "log_pressure"]


def _search(tmp_path: Path, *extra: str) -> list[str]:
    return ["search", *DATA, "--db", str(tmp_path / "s.db"), "--quiet", *extra]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--budget", "nan"), ("--budget", "inf"), ("--budget", "0"), ("--budget", "-1"),
        ("--starts", "0"), ("--seed", "-1"), ("--split-seed", "-2"),
        ("--candidate-seconds", "0"), ("--candidate-seconds", "nan"), ("--workers", "0"),
        ("--max-candidates", "0"), ("--batch-size", "0"), ("--cycles", "-1"), ("--steps", "0"),
        ("--success-r2", "nan"), ("--success-r2", "1.5"), ("--success-rmse", "0"),
        ("--success-rmse", "-0.1"), ("--split", "0.6,0.2"), ("--split", "0.6,0.2,x"),
        ("--split", "0.6,0.3,0.3"),
    ],
)  # fmt: skip
def test_a_bad_number_is_one_line_and_exit_status_2(tmp_path, capsys, option, value) -> None:
    assert main(_search(tmp_path, option, value)) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and out.err.startswith("ndvm search: ")
    assert f"{option} " in out.err and value in out.err
    assert not (tmp_path / "s.db").exists()


def test_success_thresholds_decide_what_counts() -> None:
    metrics = {"validation_r2": 0.95, "validation_mse": 0.04}
    assert not success_rule()(metrics)  # the default: R² >= 0.99
    assert success_rule(r2=0.9)(metrics) and not success_rule(r2=0.96)(metrics)
    assert success_rule(rmse=0.2)(metrics) and not success_rule(rmse=0.19)(metrics)
    assert not success_rule(r2=0.9, rmse=0.1)(metrics)  # both given: both must hold
    assert not threshold_success({"validation_mse": float("nan")}, rmse=1.0)
    assert success_rule(r2=0.95)(metrics)  # reaching the threshold is a success


def _successes(text: str) -> int:
    return int(re.search(r"(\d+) successes", text).group(1))


def test_cli_success_threshold_changes_successes_and_is_kept_on_resume(tmp_path, capsys):
    common = ["--max-candidates", "64", "--batch-size", "32"]
    assert main(_search(tmp_path, *common)) == 0
    default = _successes(capsys.readouterr().out)
    shutil.move(tmp_path / "s.db", tmp_path / "default.db")
    assert main(_search(tmp_path, *common, "--success-r2", "0.5")) == 0
    loose = _successes(capsys.readouterr().out)
    assert loose > default
    (tmp_path / "x").mkdir()
    assert main(_search(tmp_path / "x", *common, "--success-rmse", "1e-9")) == 0
    assert _successes(capsys.readouterr().out) == 0
    # the resumed task is rebuilt with its recorded threshold; a new one is refused
    db = str(tmp_path / "s.db")
    assert main(["search", "--resume", "--db", db, "--max-candidates", "96", "--quiet"]) == 0
    assert _successes(capsys.readouterr().out) >= loose
    assert main(["search", "--resume", "--db", db, "--success-r2", "0.9"]) == 2
    assert "apply to --data" in capsys.readouterr().err


def test_resume_on_changed_data_is_refused(tmp_path, capsys) -> None:
    csv = tmp_path / "p.csv"
    shutil.copy(PRESSURE, csv)
    db = str(tmp_path / "r.db")
    args = ["search", "--data", str(csv), "--x", "temperature", "--y", "log_pressure",
            "--db", db, "--max-candidates", "32", "--quiet"]  # fmt: skip
    assert main(args) == 0
    lines = csv.read_text().splitlines()
    csv.write_text("\n".join([*lines[:-1], "360,806,6.8"]) + "\n")  # one value changed
    capsys.readouterr()
    assert main(["search", "--resume", "--db", db, "--max-candidates", "64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "other data" in err and "new database" in err
    shutil.copy(PRESSURE, csv)  # the recorded rows again
    assert main([*args, "--resume", "--split-seed", "1"]) == 2  # another split of them
    assert "other data" in capsys.readouterr().err
    assert main(["search", "--resume", "--db", db, "--max-candidates", "64", "--quiet"]) == 0


def _quick_start_ndvm_command() -> list[str]:
    """The ndvm part of the README's one-command quick start."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    command = block.strip().split(" && ")
    assert 'pip install -c constraints.txt ".[dev]"' in command[1]
    ndvm_part = command[-1].split()
    assert ndvm_part[0] == ".venv/bin/ndvm"
    return ndvm_part[1:]


def test_the_readme_quick_start_discovers_on_the_shipped_data(tmp_path, capsys, monkeypatch):
    argv = _quick_start_ndvm_command()
    assert argv[:2] == ["search", "--data"] and (ROOT / argv[2]) == PRESSURE
    budget = argv.index("--budget")
    assert float(argv[budget + 1]) <= 40  # the whole command well under a minute
    argv[budget + 1] = "4"  # a small budget here
    argv[argv.index("--db") + 1] = str(tmp_path / "pressure.db")
    monkeypatch.chdir(ROOT)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "hall of fame" in out
    chosen = re.search(r"chosen law: (.+)\n  validation R² ([0-9.]+), test R² ([-0-9.]+)", out)
    assert chosen is not None and float(chosen.group(2)) > 0.99
    front = [ln for ln in out.splitlines() if re.match(r"  [* ] +\d+ ", ln)]
    assert len(front) >= 3 and sum(ln.startswith("  *") for ln in front) == 1


def test_until_success_stops_at_the_users_threshold(tmp_path, capsys) -> None:
    args = _search(tmp_path, "--success-r2", "0.5", "--until-success", "--batch-size", "16",
                   "--budget", "120")  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    done = re.search(r"(\d+) calibrated, (\d+) rejected, (\d+) successes", out)
    assert done is not None and int(done.group(3)) >= 1
    # the batch holding the first success and the one proposed while it ran, at most
    assert int(done.group(1)) + int(done.group(2)) <= 3 * 16
