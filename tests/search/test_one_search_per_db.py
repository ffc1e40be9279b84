"""Two ``ndvm search --resume`` on one database (issue 48): the second is refused with a
one-line message (exit 1, as any database error) while the first runs, instead of both
running and one's results being discarded with exit 0; once the first ends, a resume runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ndvm.cli import main

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX advisory locks (fcntl)")


def _search(db: Path, *extra: str) -> list[str]:
    return ["search", "--task", "sr-damped", "--db", str(db), "--quiet", "--seed", "1", *extra]


def _held(db: Path) -> bool:
    """Whether another process holds ``<db>.lock`` (probing it with the same ``flock``)."""
    import fcntl

    lock = Path(f"{db}.lock")
    if not lock.exists():
        return False
    with open(lock, "a+b") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False


def test_a_second_search_on_a_database_in_use_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    assert main(_search(db, "--budget", "1", "--max-candidates", "8")) == 0
    # the child imports the ndvm this process runs (installed, or PYTHONPATH's: the native core
    # is beside the installed package, not in the source tree)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    argv = [sys.executable, "-m", "ndvm", *_search(db, "--resume", "--budget", "60")]
    first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        stop = time.monotonic() + 60
        while time.monotonic() < stop and first.poll() is None and not _held(db):
            time.sleep(0.05)  # until the first search holds the database
        assert first.poll() is None, first.stderr.read() if first.stderr else ""
        capsys.readouterr()
        code = main(_search(db, "--resume", "--budget", "1"))
        err = capsys.readouterr().err.strip()
        assert code == 1 and "another ndvm search is using this database" in err
        assert "\n" not in err and "Traceback" not in err
        assert first.poll() is None  # the first one runs on
    finally:
        first.kill()
        first.wait()
    assert main(_search(db, "--resume", "--budget", "1")) == 0  # the lock died with it
