"""Helpers for running ``tether crashtest`` as a user would: a separate process."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(
    r"^crashtest: boundaries=(?P<boundaries>\d+) kills=(?P<kills>\d+) "
    r"completed=(?P<completed>\d+) state_mismatches=(?P<state_mismatches>\d+) "
    r"duplicate_effects=(?P<duplicate_effects>\d+) "
    r"missing_compensations=(?P<missing_compensations>\d+) "
    r"reasked_model_calls=(?P<reasked_model_calls>\d+)$",
    re.MULTILINE,
)


@dataclass
class CrashRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def summary(self) -> dict[str, int]:
        found = SUMMARY.findall(self.stdout)
        assert len(found) == 1, f"no single summary line in:\n{self.stdout}\n{self.stderr}"
        match = SUMMARY.search(self.stdout)
        assert match is not None
        return {k: int(v) for k, v in match.groupdict().items()}


@pytest.fixture
def crashtest(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Run ``tether crashtest TARGET --url URL`` in a subprocess from the repository root."""

    def run(target: str, url: str) -> CrashRun:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "tether",
                "crashtest",
                target,
                "--url",
                url,
                "--scratch",
                str(tmp_path / "scratch"),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        return CrashRun(proc.returncode, proc.stdout, proc.stderr)

    return run
