"""Canonical JSON and its SHA-256: equal data hash equal, anything else differs."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import BaseModel

from tether.approvals import ApprovalConfigError, args_sha256, canonical_json


class Refund(BaseModel):
    order_id: str
    amount_cents: int


def test_key_order_and_spacing_do_not_matter() -> None:
    assert args_sha256({"b": 1, "a": [1, 2]}) == args_sha256({"a": [1, 2], "b": 1})
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    expected = hashlib.sha256(b'{"a":"\xc3\xa9","b":1}').hexdigest()
    assert args_sha256({"b": 1, "a": "é"}) == expected


def test_values_and_types_matter() -> None:
    assert args_sha256({"amount": 1}) != args_sha256({"amount": 2})
    assert args_sha256({"amount": 1}) != args_sha256({"amount": "1"})
    assert args_sha256({"amount": [1, 2]}) != args_sha256({"amount": [2, 1]})


def test_models_and_tuples_hash_as_their_json() -> None:
    model = Refund(order_id="A-1", amount_cents=5)
    assert args_sha256(model) == args_sha256({"order_id": "A-1", "amount_cents": 5})
    assert args_sha256({"x": (1, 2)}) == args_sha256({"x": [1, 2]})


@pytest.mark.parametrize("bad", [{"x": {1, 2}}, {1: "int key"}, {"x": float("inf")}, {"x": b"raw"}])
def test_non_json_values_are_refused(bad: object) -> None:
    with pytest.raises(ApprovalConfigError):
        args_sha256(bad)
