"""``tether serve`` refuses bad options with one clear line, before serving anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.server.conftest import PROJECT


def _serve(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--config", str(PROJECT), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_an_unknown_store_scheme_is_named(tmp_path: Path) -> None:
    done = _serve("--url", "mysql://db/app", cwd=tmp_path)
    assert done.returncode == 1
    assert "scheme 'mysql'" in done.stderr
    assert "postgresql://" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_project_is_named(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--config", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "nope.json" in done.stderr


def test_negative_workers_are_refused(tmp_path: Path) -> None:
    done = _serve("--workers", "-1", cwd=tmp_path)
    assert done.returncode == 2
    assert "--workers must be 0 or more" in done.stderr
