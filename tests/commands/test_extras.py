"""Optional extras: each command or import that needs one fails with one line naming it.

The subprocesses hide an installed extra by putting ``None`` in ``sys.modules`` (what
``importlib`` reports for a module that cannot be found), so these run in a full environment
as well as in a core-only one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ndvm.extras import EXTRAS, message, missing

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, hide: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in hide)
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120
    )


def _cli(argv: list[str], hide: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return _run(f"from ndvm.cli import main\nsys.exit(main({argv!r}))", hide)


def test_pyproject_declares_every_extra_and_dev_installs_them() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = meta["optional-dependencies"]
    assert set(EXTRAS) <= set(declared)
    dev = declared["dev"][0]
    assert all(extra in dev for extra in EXTRAS), dev


def test_message_names_extras_and_the_install_command() -> None:
    assert message("ndvm sweep", ["torch", "plot"]) == (
        "ndvm sweep needs the 'torch' and 'plot' extras: pip install 'ndvm[torch,plot]'"
    )


@pytest.mark.parametrize(
    ("argv", "hide", "needs"),
    [
        (["sweep"], ("torch", "matplotlib"), ("torch",)),  # plots are optional: tensors kept
        (["bench", "decompose", "--quick"], ("torch",), ("torch", "plot")),
        (["bench", "crossover", "--quick"], ("jax",), ("jax", "plot")),
    ],
)
def test_cli_missing_extra_is_one_line_exit_2(
    argv: list[str], hide: tuple[str, ...], needs: tuple[str, ...]
) -> None:
    hidden = {e for e in needs if set(EXTRAS[e]) & set(hide)}
    absent = [e for e in needs if e in hidden or missing(e)]  # in this environment, too
    line = message(f"ndvm {' '.join(argv[:2]) if argv[0] == 'bench' else argv[0]}", absent)
    proc = _cli(argv, hide)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"ndvm: error: {line}\n"
    assert "Traceback" not in proc.stderr


def test_fit_plot_without_matplotlib_fails_before_fitting(tmp_path: Path) -> None:
    prog = tmp_path / "line.scm"
    prog.write_text("(* a x)\n")
    data = tmp_path / "d.csv"
    data.write_text("x,y\n1,2\n2,4\n3,6\n")
    argv = ["fit", str(prog), "--data", str(data), "--x", "x", "--y", "y", "--plot", "p.png"]
    proc = _cli(argv, ("matplotlib",))
    assert proc.returncode == 2
    assert proc.stderr == f"ndvm: error: {message('ndvm fit --plot', ['plot'])}\n"
    assert proc.stdout == ""


@pytest.mark.plot
def test_fit_prints_its_result_before_plotting(tmp_path: Path) -> None:
    prog = tmp_path / "line.scm"
    prog.write_text("(* a x)\n")
    data = tmp_path / "d.csv"
    data.write_text("x,y\n1,2\n2,4\n3,6\n")
    out = tmp_path / "no-such-dir" / "p.png"  # saving fails after the fit
    argv = ["fit", str(prog), "--data", str(data), "--x", "x", "--y", "y", "--plot", str(out)]
    argv += ["--json", "--steps", "300", "--lr", "0.2"]
    proc = _cli(argv, ())
    assert proc.returncode != 0
    first = proc.stdout.splitlines()[0]
    assert '"params"' in first and '"a"' in first


@pytest.mark.parametrize(
    ("code", "line"),
    [
        ("from ndvm.torch import op", message("ndvm.torch", ["torch"])),
        ("from ndvm.jax import op", message("ndvm.jax", ["jax"])),
    ],
)
def test_boundary_import_without_framework(code: str, line: str) -> None:
    proc = _run(f"try:\n    {code}\nexcept ImportError as e:\n    print(e)\n", ("torch", "jax"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == line


def test_callable_loss_without_torch() -> None:
    code = (
        "import numpy as np, ndvm\n"
        "p = ndvm.compile('(* a x)', inputs=['x'])\n"
        "try:\n"
        "    ndvm.calibrate(p, {'x': np.ones(3)}, np.ones(3), loss=lambda v, t: (v - t) ** 2)\n"
        "except ndvm.MissingExtra as e:\n"
        "    print(e)\n"
    )
    proc = _run(code, ("torch",))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == message("ndvm.calibrate(loss=<callable>)", ["torch"])


def test_version() -> None:
    proc = _cli(["--version"], ())
    assert proc.returncode == 0
    import ndvm

    assert proc.stdout.strip() == f"ndvm {ndvm.__version__}"


@pytest.mark.parametrize(("module", "extra"), [("sympy", "sympy"), ("torch", "torch"),
                                               ("jax", "jax")])  # fmt: skip
def test_export_names_the_extra_pyproject_declares(
    monkeypatch: pytest.MonkeyPatch, module: str, extra: str
) -> None:
    """``ndvm.export``'s missing-module error names the extra of ``ndvm.extras`` (sympy comes
    with ``ndvm[sympy]``), one that pyproject.toml declares."""
    from ndvm.errors import MissingExtra, NdvmError
    from ndvm.export import namespaces

    monkeypatch.setitem(sys.modules, module, None)  # its import fails: "not found"
    with pytest.raises(MissingExtra) as info:
        namespaces.require(module)
    assert isinstance(info.value, NdvmError) and extra in EXTRAS
    assert str(info.value) == f"ndvm.export needs the '{extra}' extra: pip install 'ndvm[{extra}]'"
