"""Policies in code and in tether.json: which rule wins, and clear errors naming the field."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tether.retention import (
    RetentionPolicy,
    RetentionPolicyError,
    Rule,
    load_policy,
    policy_from_dict,
    project_policy,
)

DAY = timedelta(days=1)


def test_a_tether_json_section_becomes_a_policy(tmp_path: Path) -> None:
    (tmp_path / "langgraph.json").write_text("{}")
    (tmp_path / "tether.json").write_text(
        json.dumps(
            {
                "retention": {
                    "rules": [
                        {"status": ["success", "cancelled"], "max_age": "30d"},
                        {"status": "error", "max_age": "12h", "action": "keep_latest"},
                        {"status": "success", "max_age": 3600, "tenant": "acme"},
                    ],
                    "audit_max_age": "2w",
                    "every": "15m",
                    "batch_size": 100,
                }
            }
        )
    )
    policy = project_policy(tmp_path / "langgraph.json")
    assert policy == RetentionPolicy(
        rules=(
            Rule("success", 30 * DAY),
            Rule("cancelled", 30 * DAY),
            Rule("error", timedelta(hours=12), "keep_latest"),
            Rule("success", timedelta(hours=1), tenant="acme"),
        ),
        audit_max_age=14 * DAY,
        every=timedelta(minutes=15),
        batch_size=100,
    )


def test_no_tether_json_or_no_section_is_no_policy(tmp_path: Path) -> None:
    assert project_policy(tmp_path / "langgraph.json") is None
    (tmp_path / "tether.json").write_text('{"other": 1}')
    assert project_policy(tmp_path / "langgraph.json") is None


def test_the_most_specific_rule_wins() -> None:
    policy = RetentionPolicy(
        rules=(
            Rule("success", 30 * DAY),
            Rule("success", 7 * DAY, assistant="refund"),
            Rule("success", 2 * DAY, tenant="acme"),
            Rule("success", 1 * DAY, tenant="acme", assistant="refund"),
        )
    )

    def age(tenant: str, assistant: str | None, graph: str | None) -> timedelta | None:
        rule = policy.rule_for("success", tenant, assistant, graph)
        return None if rule is None else rule.max_age

    assert age("", "a1", "other") == 30 * DAY
    assert age("", "a1", "refund") == 7 * DAY  # by graph id
    assert age("", "refund", None) == 7 * DAY  # by assistant id
    assert age("acme", "a1", "other") == 2 * DAY
    assert age("acme", "a1", "refund") == 1 * DAY
    assert policy.rule_for("error", "", None, None) is None
    assert policy.youngest == DAY


GOOD_RULE = {"status": "success", "max_age": "30d"}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ([], "retention: expected an object, got list"),
        ({}, "retention.rules: expected a non-empty list of rules"),
        ({"rules": [GOOD_RULE], "keep": 1}, "retention: unknown field 'keep'; expected"),
        ({"rules": ["x"]}, "retention.rules[0]: expected an object, got str"),
        ({"rules": [{"max_age": "1d"}]}, "retention.rules[0].status: missing"),
        ({"rules": [{"status": "success"}]}, "retention.rules[0].max_age: missing"),
        (
            {"rules": [GOOD_RULE, {"status": "done", "max_age": "1d"}]},
            "retention.rules[1].status: 'done' is not a run status; use one of success, error, "
            "cancelled, timeout, interrupted",
        ),
        (
            {"rules": [{**GOOD_RULE, "action": "archive"}]},
            "retention.rules[0].action: 'archive' is not one of delete, keep_latest",
        ),
        (
            {"rules": [{**GOOD_RULE, "max_age": "30 days"}]},
            "retention.rules[0].max_age: '30 days' is not a duration; use a positive number of "
            'seconds or a number with s, m, h, d or w, e.g. "30d"',
        ),
        ({"rules": [{**GOOD_RULE, "max_age": 0}]}, "retention.rules[0].max_age: 0 is not a"),
        ({"rules": [{**GOOD_RULE, "max_age": True}]}, "retention.rules[0].max_age: True is not"),
        ({"rules": [{**GOOD_RULE, "tenant": ""}]}, "retention.rules[0].tenant: expected a non-"),
        ({"rules": [{**GOOD_RULE, "assistant": 3}]}, "retention.rules[0].assistant: expected a"),
        ({"rules": [GOOD_RULE], "every": "-1h"}, "retention.every: '-1h' is not a duration"),
        ({"rules": [GOOD_RULE], "audit_max_age": "x"}, "retention.audit_max_age: 'x' is not a"),
        (
            {"rules": [GOOD_RULE], "batch_size": 0},
            "retention.batch_size: 0 is outside 1..10000",
        ),
        (
            {"rules": [GOOD_RULE], "batch_size": "5"},
            "retention.batch_size: expected an integer, got '5'",
        ),
        (
            {"rules": [GOOD_RULE, {**GOOD_RULE, "max_age": "1d"}]},
            "retention.rules[1]: a second rule for status 'success', tenant None, assistant None "
            "(rules[0] has the same scope); keep one",
        ),
    ],
)
def test_a_bad_section_names_the_field(section: Any, message: str) -> None:
    with pytest.raises(RetentionPolicyError) as caught:
        policy_from_dict(section)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "no such retention policy file"),
        ("{not json", "not a readable JSON file"),
        ('{"rules": []}', 'no "retention" section; expected {"retention": {"rules": [...]}}'),
        ('{"retention": {"rules": [{"status": "x", "max_age": 1}]}}', "retention.rules[0].status"),
    ],
)
def test_a_bad_file_is_named_with_its_problem(
    tmp_path: Path, text: str | None, message: str
) -> None:
    path = tmp_path / "tether.json"
    if text is not None:
        path.write_text(text)
    with pytest.raises(RetentionPolicyError) as caught:
        load_policy(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_rules_in_code_are_checked_too() -> None:
    with pytest.raises(RetentionPolicyError, match="status: 'ok' is not a run status"):
        Rule("ok", DAY)
    with pytest.raises(RetentionPolicyError, match="max_age must be a positive timedelta"):
        Rule("success", timedelta(0))
    with pytest.raises(RetentionPolicyError, match="action 'drop' is not one of delete"):
        Rule("success", DAY, "drop")


def _refused(section: dict[str, Any]) -> str:
    with pytest.raises(RetentionPolicyError) as caught:
        policy_from_dict(section)
    return str(caught.value)


TOO_LONG = "is longer than 100 years (36500d), the longest duration a policy takes"


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("max_age", "99999999999d", "'99999999999d'"),
        ("max_age", 1e13, "10000000000000.0"),
        ("max_age", 10**400, "1000000000000000000000000000000000000..."),
        ("audit_max_age", "99999999999d", "'99999999999d'"),
        ("receipt_max_age", 1e300, "1e+300"),
    ],
)
def test_an_age_too_long_for_a_date_is_refused_not_overflowed(
    field: str, value: Any, shown: str
) -> None:
    if field == "max_age":
        section, where = {"rules": [{**GOOD_RULE, "max_age": value}]}, "rules[0].max_age"
    else:
        section, where = {"rules": [GOOD_RULE], field: value}, field
    assert _refused(section) == f"retention.{where}: {shown} {TOO_LONG}"


def test_ages_are_at_most_100_years(tmp_path: Path) -> None:
    def rule(age: str) -> dict[str, Any]:
        return {"rules": [{**GOOD_RULE, "max_age": age}]}

    assert policy_from_dict(rule("36500d")).youngest == timedelta(days=36500)
    assert _refused(rule("36501d")) == f"retention.rules[0].max_age: '36501d' {TOO_LONG}"
    assert _refused(rule("1000000w")) == f"retention.rules[0].max_age: '1000000w' {TOO_LONG}"
    path = tmp_path / "tether.json"
    path.write_text(json.dumps({"retention": rule("1000000w")}))
    with pytest.raises(RetentionPolicyError, match=r"rules\[0\]\.max_age: '1000000w' is longer"):
        load_policy(path)
    with pytest.raises(RetentionPolicyError, match=r"max_age: 1000000w is longer than 100 years"):
        Rule("success", timedelta(weeks=1_000_000))
    with pytest.raises(RetentionPolicyError, match=r"audit_max_age: 36501d is longer than 100"):
        RetentionPolicy(rules=(Rule("success", DAY),), audit_max_age=timedelta(days=36501))


@pytest.mark.parametrize("value", ["١٠d", "30 d", " 5d", "5d ", "5d\n", "\t5d", "٣", "1 0d"])
def test_durations_take_ascii_digits_without_spaces(value: str) -> None:
    assert _refused({"rules": [{**GOOD_RULE, "max_age": value}]}) == (
        f"retention.rules[0].max_age: {value!r} is not a duration; use a positive number of "
        'seconds or a number with s, m, h, d or w, e.g. "30d" (ASCII digits, no spaces)'
    )


def test_a_duration_under_a_microsecond_is_refused() -> None:
    assert _refused({"rules": [{**GOOD_RULE, "max_age": 1e-9}]}) == (
        "retention.rules[0].max_age: 1e-09 is shorter than a microsecond"
    )


def test_every_is_at_least_one_second() -> None:
    assert _refused({"rules": [GOOD_RULE], "every": "0.001s"}) == (
        "retention.every: '0.001s' is shorter than 1s, the shortest interval (the scheduler "
        "ticks about once a second)"
    )
    assert policy_from_dict({"rules": [GOOD_RULE], "every": "1s"}).every == timedelta(seconds=1)
    with pytest.raises(RetentionPolicyError, match=r"^every: 0\.5s is shorter than 1s"):
        RetentionPolicy(rules=(Rule("success", DAY),), every=timedelta(milliseconds=500))


def test_an_empty_status_list_is_refused() -> None:
    assert _refused({"rules": [{**GOOD_RULE, "status": []}]}) == (
        "retention.rules[0].status: an empty list matches no thread; name at least one of "
        "success, error, cancelled, timeout, interrupted"
    )


def test_a_duplicate_rule_is_named_by_its_entry_in_the_file() -> None:
    twice = {**GOOD_RULE, "status": ["success", "error", "success"]}
    assert _refused({"rules": [twice]}) == "retention.rules[0].status: 'success' is listed twice"
    both = {**GOOD_RULE, "status": ["success", "error"]}
    assert _refused({"rules": [both, {**GOOD_RULE, "status": "error"}]}) == (
        "retention.rules[1]: a second rule for status 'error', tenant None, assistant None "
        "(rules[0] has the same scope); keep one"
    )
