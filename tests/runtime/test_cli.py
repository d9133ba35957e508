"""``tether runs`` and ``tether approvals … --runtime``, as a person at a terminal uses them.

Every command is a real ``python -m tether`` process against the run store that
real ``tether worker`` processes execute.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.extras import DATABASES, run_without
from tests.runtime.workers import PROJECT, Workers
from tether.runtime import Runtime

ENV_WITHOUT_URL = {k: v for k, v in os.environ.items() if k != "TETHER_URL"}


def tether(*args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(ENV_WITHOUT_URL)
    if url is not None:
        env["TETHER_URL"] = url
    return subprocess.run(
        [sys.executable, "-m", "tether", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def ok(*args: str, url: str) -> str:
    done = tether(*args, url=url)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def test_a_run_is_created_answered_approved_and_followed_from_the_command_line(
    runtime: Runtime, runtime_url: str, workers: Workers
) -> None:
    workers.start(1)
    out = ok(
        "runs", "create", "pause", "--thread", "cli-1", "--input", "{}", "--wait", url=runtime_url
    )
    run_id, status = out.split()
    assert status == "interrupted"
    assert run_id in ok("runs", "list", url=runtime_url)
    shown = ok("runs", "show", run_id, url=runtime_url)
    assert "status     interrupted" in shown
    assert "waiting on" in shown

    # The plain interrupt takes a value; the run then waits on a tether approval.
    out = ok("runs", "resume", run_id, "--value", '"yes"', "--wait", url=runtime_url)
    assert out.split() == [run_id, "interrupted"]
    refused = tether(
        "runs", "resume", run_id, "--value", '{"decision": "approve"}', url=runtime_url
    )
    assert refused.returncode == 1
    assert "waits on approval" in refused.stderr

    listed = json.loads(ok("approvals", "list", "--url", runtime_url, "--json", url=runtime_url))
    assert [a["action"] for a in listed] == ["ship"]
    approval = listed[0]
    wrong = tether(
        "approvals", "approve", approval["approval_id"], "--url", runtime_url, "--runtime",
        "--by", "dana", "--args-sha256", "0" * 64,
    )  # fmt: skip
    assert wrong.returncode == 1
    assert "sha256" in wrong.stderr
    decided = ok(
        "approvals", "approve", approval["approval_id"], "--url", runtime_url, "--runtime",
        "--by", "dana", "--args-sha256", approval["args_sha256"], url=runtime_url,
    )  # fmt: skip
    # A worker resumes the run, not the deciding process.
    assert f"approve recorded for {approval['approval_id']} by dana" in decided
    assert f"a worker resumes run {run_id}" in decided
    assert "resumed in process" not in decided

    followed = tether("runs", "events", run_id, "--follow", url=runtime_url)
    assert followed.returncode == 0, followed.stderr
    lines = followed.stdout.splitlines()
    assert "run.resumed" in followed.stdout
    assert "approval.decided" in followed.stdout
    assert "run.finished" in lines[-1]
    assert "status=success" in lines[-1]


def test_a_waiting_run_is_cancelled_from_the_command_line(
    runtime: Runtime, runtime_url: str, workers: Workers
) -> None:
    workers.start(1)
    out = ok("runs", "create", "pause", "--input", "{}", "--wait", url=runtime_url)
    run_id, status = out.split()
    assert status == "interrupted"
    out = ok("runs", "cancel", run_id, "--reason", "not needed", "--wait", url=runtime_url)
    assert out.split() == [run_id, "cancelled"]
    assert "reason     not needed" in ok("runs", "show", run_id, url=runtime_url)
    assert tether("runs", "events", run_id, "--follow", url=runtime_url).returncode == 2
    again = tether("runs", "cancel", run_id, url=runtime_url)
    assert again.returncode == 1
    assert "has already ended (cancelled)" in again.stderr
    # A reader that goes away early (`| head -1`) ends the command quietly.
    env = dict(ENV_WITHOUT_URL, TETHER_URL=runtime_url)
    piped = subprocess.Popen(
        [sys.executable, "-m", "tether", "runs", "events", run_id],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    assert piped.stdout is not None
    assert piped.stderr is not None
    piped.stdout.close()
    assert piped.wait(timeout=120) == 141
    assert piped.stderr.read() == b""
    piped.stderr.close()


def test_bad_command_lines_are_refused_with_what_is_wrong(
    runtime: Runtime, runtime_url: str
) -> None:
    no_url = tether("runs", "list")
    assert no_url.returncode == 2
    assert "--url (or $TETHER_URL) is required" in no_url.stderr

    bad_input = tether("runs", "create", "three_node", "--input", "{oops", url=runtime_url)
    assert bad_input.returncode == 2
    assert "--input is not valid JSON" in bad_input.stderr

    bad_value = tether("runs", "resume", "some-run", "--value", "{oops", url=runtime_url)
    assert bad_value.returncode == 2
    assert "--value is not valid JSON" in bad_value.stderr

    missing = tether("runs", "show", "no-such-run", url=runtime_url)
    assert missing.returncode == 1
    assert "no run 'no-such-run'" in missing.stderr

    unknown = tether("runs", "create", "no_such_graph", url=runtime_url)
    assert unknown.returncode == 1
    assert "no assistant 'no_such_graph'" in unknown.stderr


@pytest.mark.parametrize(
    "command",
    [("worker", "--config", str(PROJECT)), ("runs", "list"), ("crons", "list")],
)
def test_a_postgres_url_without_the_postgres_extra_names_the_extra(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    url = "postgresql://app@127.0.0.1:1/app"
    done = run_without(DATABASES, tmp_path, "-m", "tether", *command, "--url", url)
    assert done.returncode == 1, done.stderr
    assert (
        "tether: error: a PostgreSQL run store needs the 'postgres' extra, which is not "
        "installed: pip install 'tether[postgres]'"
    ) in done.stderr
    assert "Traceback" not in done.stderr
