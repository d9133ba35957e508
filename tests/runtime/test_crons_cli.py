"""``tether crons``, as a person at a terminal uses it (real ``python -m tether`` processes)."""

from __future__ import annotations

import json

from tests.runtime.test_cli import ok, tether
from tether.runtime import Runtime


def test_crons_are_created_listed_switched_off_and_deleted_from_the_command_line(
    runtime: Runtime, runtime_url: str
) -> None:
    out = ok(
        "crons", "create", "three_node", "*/15 * * * *", "--input", '{"trace": []}',
        "--timezone", "Europe/Paris", "--metadata", '{"team": "ops"}', "--json",
        url=runtime_url,
    )  # fmt: skip
    (created,) = json.loads(out)
    cron_id = created["cron_id"]
    assert created["payload"] == {"input": {"trace": []}}
    assert created["timezone"] == "Europe/Paris"
    listed = ok("crons", "list", url=runtime_url)
    header, row = listed.splitlines()
    assert header.split() == [
        "CRON_ID", "ASSISTANT", "THREAD", "SCHEDULE", "TIMEZONE", "ENABLED", "NEXT_RUN",
    ]  # fmt: skip
    assert row.startswith(cron_id)
    assert "*/15 * * * *" in row
    assert "Europe/Paris" in row
    off = ok("crons", "update", cron_id, "--disable", url=runtime_url)
    assert " no " in off.splitlines()[1]
    assert ok("crons", "delete", cron_id, url=runtime_url).strip() == f"deleted {cron_id}"
    assert ok("crons", "list", url=runtime_url).splitlines()[1:] == []


def test_a_bad_schedule_or_a_missing_cron_is_a_clear_error(
    runtime: Runtime, runtime_url: str
) -> None:
    bad = tether("crons", "create", "three_node", "61 * * * *", url=runtime_url)
    assert bad.returncode == 1
    assert "schedule '61 * * * *' is not a valid cron expression" in bad.stderr
    missing = tether("crons", "delete", "nope", url=runtime_url)
    assert missing.returncode == 1
    assert "no cron 'nope'" in missing.stderr
    bad_json = tether("crons", "create", "three_node", "* * * * *", "--input", "{", url=runtime_url)
    assert bad_json.returncode == 2
    assert "--input is not valid JSON" in bad_json.stderr
