"""``tether retention run``, ``tether audit show`` and ``tether erase`` from the command line."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends import Backend, fresh_backend
from tests.retention.world import NOW, marker, open_world, seed
from tether.cli import main


@pytest.fixture
def seeded(tmp_path: Path) -> Iterator[Backend]:
    """A SQLite run store with an old and a young finished thread, and a tether.json."""
    with fresh_backend("sqlite", {}, tmp_path) as backend:

        async def prepare() -> None:
            async with open_world(backend, tmp_path) as world:
                await seed(world, "old", "success", days=40, owner="ann")
                await seed(world, "young", "success", days=1, owner="bob")

        asyncio.run(prepare())
        (tmp_path / "tether.json").write_text(
            json.dumps({"retention": {"rules": [{"status": "success", "max_age": "30d"}]}})
        )
        yield backend


def _raw(backend: Backend, tmp_path: Path) -> str:
    async def read() -> str:
        async with open_world(backend, tmp_path) as world:
            return await world.raw()

    return asyncio.run(read())


def test_retention_run_then_audit_show(
    seeded: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--url", seeded.url]
    policy = ["--policy", str(tmp_path / "tether.json"), "--now", NOW.isoformat()]
    assert main(["retention", "run", *base, *policy, "--dry-run"]) == 0
    dry = capsys.readouterr()
    assert "  would be deleted:              1" in dry.out
    assert marker("old") in _raw(seeded, tmp_path)

    assert main(["retention", "run", *base, *policy]) == 0
    done = capsys.readouterr()
    assert "examined 1 threads" in done.out
    assert "  deleted:              1" in done.out
    assert "batch 1: 1 examined, 1 deleted" in done.err  # the progress line
    assert marker("old") not in _raw(seeded, tmp_path)

    assert main(["audit", "show", "old", *base]) == 0
    shown = capsys.readouterr().out
    assert "summary (done)" in shown
    assert "retention: success>30d delete" in shown
    assert "tool refund done idempotency key idem-old" in shown
    assert main(["audit", "show", "young", *base]) == 1
    assert "no audit summary or erasure receipt for thread 'young'" in capsys.readouterr().out


def test_erase_prints_the_receipt(
    seeded: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["erase", "--url", seeded.url, "--user", "bob"]) == 0
    receipt = json.loads(capsys.readouterr().out)
    assert receipt["subject_kind"] == "user"
    assert receipt["counts"]["threads"] == 1
    assert marker("young") not in _raw(seeded, tmp_path)
    assert main(["audit", "show", "young", "--url", seeded.url, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [r["receipt_id"] for r in shown["receipts"]] == [receipt["receipt_id"]]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["retention", "run", "--now", "yesterday"], "--now 'yesterday' is not an ISO 8601 time"),
        (["retention", "run", "--now", "2026-11-30T12:00:00"], "needs a UTC offset"),
        (["retention", "run", "--policy", "missing.json"], "missing.json: no such retention"),
    ],
)
def test_bad_options_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert main([*argv, "--url", url]) in {1, 2}
    assert message in capsys.readouterr().err


def test_erase_needs_one_subject(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["erase", "--url", "sqlite:///x.db", "--thread", "a", "--user", "b"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_a_dry_run_progress_line_says_would_be(
    seeded: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = ["--policy", str(tmp_path / "tether.json"), "--now", NOW.isoformat()]
    assert main(["retention", "run", "--url", seeded.url, *policy, "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "batch 1: 1 examined, 1 would be deleted, 0 would be pruned, 0 kept" in err
    assert marker("old") in _raw(seeded, tmp_path)


@pytest.mark.parametrize(
    ("now", "message"),
    [
        (
            "0001-01-01T00:00:00+00:00",
            "tether: error: --now: 0001-01-01T00:00:00+00:00 is too early for rule "
            "success>30d delete: 30d before it is before year 1",
        ),
        ("9999-12-31T23:00:00-05:00", "is not a date in UTC (years 1 to 9999)"),
    ],
)
def test_a_now_the_policy_cannot_measure_from_is_refused(
    seeded: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str], now: str, message: str
) -> None:
    files = sorted(tmp_path.glob("tether.db*"))
    before = [f.read_bytes() for f in files]
    policy = ["--policy", str(tmp_path / "tether.json")]
    assert main(["retention", "run", "--url", seeded.url, *policy, "--now", now]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert sorted(tmp_path.glob("tether.db*")) == files  # nothing written
    assert [f.read_bytes() for f in files] == before


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_concurrency_below_one_is_an_argparse_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(SystemExit) as exited:
        main(["retention", "run", "--url", url, "--concurrency", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    problem = "is not an integer" if value == "two" else "is not a positive integer (at least 1)"
    assert f"error: argument --concurrency: {value!r} {problem}" in err
    assert not (tmp_path / "x.db").exists()
