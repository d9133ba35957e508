"""A process killed in the middle of compensating: the next one finishes, undoing nothing twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends import Backend
from tests.compensation.saga import ALL_UNDONE, CONFIG, World, saga_graph
from tether._crashpoints import CRASH_AT_ENV
from tether.compensation import compensate
from tether.steps import read_steps

REPO = Path(__file__).resolve().parents[2]


def _child(backend: Backend, workdir: Path, crash_at: str) -> int:
    env = {**os.environ, CRASH_AT_ENV: crash_at}
    args = [backend.url, json.dumps(backend.options), str(workdir)]
    return subprocess.run(
        [sys.executable, "-m", "tests.compensation.crash_child", *args],
        cwd=REPO,
        env=env,
        check=False,
        timeout=120,
    ).returncode


@pytest.mark.parametrize(
    ("crash_at", "undone_before"),
    [
        ("compensation.before:1", []),  # the email's undo claimed, not run
        ("compensation.after:1", ["undo-email ada@example.com"]),  # recorded, charge not yet
        ("compensation.before:2", ["undo-email ada@example.com"]),  # the charge's undo claimed
        ("compensation.after:2", ["undo-email ada@example.com", "undo-charge 4200"]),
    ],
)
async def test_a_compensation_killed_mid_way_resumes_and_undoes_each_effect_once(
    durable_backend: Backend, tmp_path: Path, crash_at: str, undone_before: list[str]
) -> None:
    assert _child(durable_backend, tmp_path, crash_at) == -9
    world = World(tmp_path / "world.db")
    assert world.kinds() == ["charge", "email", "ship", *undone_before]
    async with durable_backend.open() as saver:
        report = await compensate(saga_graph(saver, world), CONFIG)
        steps = await read_steps(saver, "saga")
    assert world.kinds() == ALL_UNDONE
    assert report.complete
    assert report.reason == "the carrier refused the parcel"
    assert [e.tool for e in report.undone] == ["email", "charge"]
    assert [s.name for s in steps if s.kind == "compensation"] == [
        "email:undone",
        "charge:undone",
    ]
