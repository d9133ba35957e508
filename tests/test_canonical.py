"""``tether._canonical``: one canonical JSON, and a located error for what it cannot write."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel

import tether
from tests.test_canonical_stored import Color, Level
from tether._canonical import CanonicalJSONError, canonical_json, to_plain


def steps_text(value: Any, **kw: Any) -> str:
    return canonical_json(value, ensure_ascii=True, allow_nan=True, **kw)


def approval_text(value: Any) -> str:
    return canonical_json(value, ensure_ascii=False, allow_nan=False)


class Opaque:
    pass


@dataclasses.dataclass
class Point:
    x: int


class Plain(Enum):
    A = 1


class Stamp(BaseModel):
    at: datetime
    ref: UUID
    amount: Decimal


def test_keys_sorted_no_spaces_and_the_two_spellings_of_text() -> None:
    value = {"b": [1, 2.5, None, True], "a": "é"}
    assert approval_text(value) == '{"a":"é","b":[1,2.5,null,true]}'
    assert steps_text(value) == '{"a":"\\u00e9","b":[1,2.5,null,true]}'


def test_numbers_are_written_exactly() -> None:
    numbers = [2**64, -(10**30), 1, 1.0, -0.0, 1e16, 0.1]
    assert (
        steps_text(numbers)
        == "[18446744073709551616,-1000000000000000000000000000000,1,1.0,-0.0,1e+16,0.1]"
    )


def test_nan_is_written_for_steps_and_refused_for_approvals() -> None:
    assert steps_text([float("nan"), float("inf"), -float("inf")]) == "[NaN,Infinity,-Infinity]"
    with pytest.raises(CanonicalJSONError, match=r"a float nan at \$\.x\[1\]") as info:
        approval_text({"x": [1.0, float("nan")]})
    assert info.value.type_name == "float"
    assert info.value.path == "$.x[1]"


def test_mappings_sequences_enums_and_models_are_plain_data() -> None:
    stamp = Stamp(
        at=datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
        ref=UUID("12345678-1234-5678-1234-567812345678"),
        amount=Decimal("1.50"),
    )
    value = {
        "proxy": MappingProxyType({"k": (1, range(2))}),
        "enums": [Level.HIGH, Color.RED],
        Color.RED: "a StrEnum key is its text",
        "stamp": stamp,
    }
    assert to_plain(value, allow_nan=False) == {
        "proxy": {"k": [1, [0, 1]]},
        "enums": [Level.HIGH, Color.RED],
        "red": "a StrEnum key is its text",
        "stamp": {"at": "2024-01-02T03:04:05Z", "ref": str(stamp.ref), "amount": "1.50"},
    }
    assert steps_text({"enums": [Level.HIGH, Color.RED]}) == '{"enums":[2,"red"]}'


UNENCODABLE: list[tuple[Any, str, str]] = [
    # (value inside {"a": [_]}, type named, words of the hint)
    (Opaque(), "tests.test_canonical.Opaque", "canonical JSON holds only str"),
    (object(), "object", "canonical JSON holds only str"),
    ({"x", "y"}, "set", "pass a sorted list"),
    (frozenset({1}), "frozenset", "pass a sorted list"),
    (b"raw", "bytes", "base64"),
    (bytearray(b"raw"), "bytearray", "base64"),
    (memoryview(b"raw"), "memoryview", "base64"),
    (datetime(2024, 1, 1), "datetime.datetime", "isoformat"),
    (date(2024, 1, 1), "datetime.date", "isoformat"),
    (UUID(int=1), "uuid.UUID", "str(value)"),
    (Decimal("1.10"), "decimal.Decimal", "smallest unit"),
    (Point(1), "tests.test_canonical.Point", "dataclasses.asdict"),
    (Plain.A, "tests.test_canonical.Plain", "canonical JSON holds only str"),
    (len, "builtin_function_or_method", "canonical JSON holds only str"),
]


@pytest.mark.parametrize(("bad", "type_name", "hint"), UNENCODABLE)
def test_what_it_cannot_write_is_an_error_naming_type_and_path(
    bad: Any, type_name: str, hint: str
) -> None:
    for encode in (steps_text, approval_text):
        with pytest.raises(CanonicalJSONError) as info:
            encode({"outer": {"a": [0, bad]}})
        assert info.value.type_name == type_name
        assert info.value.path == "$.outer.a[1]"
        message = str(info.value)
        assert (
            f"holds a{'n' if type_name[0] in 'aeiou' else ''} {type_name} at $.outer.a[1]"
            in message
        )
        assert hint in message


def test_keys_must_be_strings() -> None:
    for key in (1, 1.5, None, True, (1, 2)):
        with pytest.raises(CanonicalJSONError, match=r"a key of type \w+ .* at \$\.x") as info:
            steps_text({"x": {"ok": 1, key: 2}})
        assert info.value.type_name == type(key).__name__


def test_paths_quote_keys_that_are_not_names() -> None:
    with pytest.raises(CanonicalJSONError) as info:
        steps_text({"a b": [{"ü": {"0": object()}}]})
    assert info.value.path == '$["a b"][0].ü["0"]'


def test_a_container_that_holds_itself_is_an_error() -> None:
    loop: list[Any] = [1]
    loop.append({"again": loop})
    with pytest.raises(CanonicalJSONError, match=r"a list at \$\[1\]\.again, .* holds itself"):
        steps_text(loop)
    shared = [1]
    assert steps_text([shared, shared]) == "[[1],[1]]"  # seen twice is not a cycle


def test_utf8_text_refuses_lone_surrogates_ascii_text_escapes_them() -> None:
    assert steps_text({"s": "a\ud800"}) == '{"s":"a\\ud800"}'
    with pytest.raises(CanonicalJSONError, match=r"a str at \$\.s, .* lone surrogate at index 1"):
        approval_text({"s": "a\ud800"})


def test_an_int_too_long_for_python_to_write_is_an_error() -> None:
    with pytest.raises(CanonicalJSONError, match=r"an int at \$\[0\], .* more digits"):
        steps_text([10**5000])


def test_reducers_run_first_and_their_result_is_encoded_by_the_rules() -> None:
    reducers: list[tuple[type, Callable[[Any], Any]]] = [(Stamp, lambda s: {"when": s.at})]
    stamp = Stamp(at=datetime(2024, 1, 1), ref=UUID(int=0), amount=Decimal(0))
    with pytest.raises(CanonicalJSONError) as info:
        steps_text({"s": stamp}, reducers=reducers)
    assert (info.value.type_name, info.value.path) == ("datetime.datetime", "$.s.when")
    reducers = [(Opaque, lambda o: ["opaque"])]
    assert steps_text({"o": Opaque()}, reducers=reducers) == '{"o":["opaque"]}'


def test_the_error_says_what_the_value_is_and_takes_the_callers_class() -> None:
    class Custom(CanonicalJSONError):
        pass

    with pytest.raises(Custom, match=r"^the arguments of 'refund' holds a set at \$\.tags"):
        to_plain({"tags": {"a"}}, allow_nan=False, what="the arguments of 'refund'", error=Custom)


def test_accepted_values_hash_the_same_under_any_hash_seed() -> None:
    code = (
        "from tether._canonical import canonical_json\n"
        "value = {'k%d' % i: ['v%d' % i, {'n': i}] for i in range(50)}\n"
        "print(canonical_json(value, ensure_ascii=True, allow_nan=True))\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(digests) == 1


def test_the_module_imports_nothing_from_tether_but_its_errors() -> None:
    source = Path(tether.__file__).parent / "_canonical.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names)
    assert {m for m in imported if m.split(".")[0] == "tether"} == {"tether.errors"}
