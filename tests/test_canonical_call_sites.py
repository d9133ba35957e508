"""Approval, step and scripted-model hashes all refuse what canonical JSON cannot write.

Each used to have an encoder of its own; the steps and the scripted model fell
back to ``repr``/``str`` (whose text may differ between processes), so a value
holding an object was hashed, differently in each process. Now the one
encoder refuses it everywhere, with the same error naming the type and where
it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tether._canonical import CanonicalJSONError
from tether.approvals import ApprovalConfigError, args_sha256, canonical_json
from tether.approvals.hashing import to_json_value
from tether.graphs import ScriptedChatModel, ScriptRule
from tether.graphs._scripted import _input_hash
from tether.steps._codec import canonical_hash
from tether.steps._hashing import dumps


class Customer:
    def __init__(self, name: str) -> None:
        self.name = name


CUSTOMER = f"{__name__}.Customer"


def refund_args() -> dict[str, Any]:
    return {"order": "A-1", "lines": [{"sku": "x", "for": Customer("bob")}]}


def asked_with(args: dict[str, Any]) -> list[Any]:
    call = {"name": "refund", "args": args, "id": "c1", "type": "tool_call"}
    return [HumanMessage("refund A-1"), AIMessage("", tool_calls=[call])]


def test_approval_hashing_refuses_it() -> None:
    for hashing in (args_sha256, canonical_json, to_json_value):
        with pytest.raises(CanonicalJSONError) as info:
            hashing(refund_args())
        assert isinstance(info.value, ApprovalConfigError)  # as approvals always raised
        assert (info.value.type_name, info.value.path) == (CUSTOMER, "$.lines[0].for")


def test_step_hashing_refuses_it() -> None:
    for value in (refund_args(), {"input": HumanMessage("hi"), "args": refund_args()}):
        with pytest.raises(CanonicalJSONError) as info:
            canonical_hash(value)
        assert info.value.type_name == CUSTOMER
        assert info.value.path.endswith("lines[0].for")


def test_conversation_hashing_refuses_it_and_names_the_message() -> None:
    with pytest.raises(CanonicalJSONError, match=r"^message 1 of the hashed conversation") as info:
        canonical_hash(asked_with(refund_args()))
    assert (info.value.type_name, info.value.path) == (
        CUSTOMER,
        "$.tool_calls[0].args.lines[0].for",
    )


def test_scripted_model_refuses_it(tmp_path: Path) -> None:
    with pytest.raises(CanonicalJSONError) as info:
        _input_hash(asked_with(refund_args()))
    assert (info.value.type_name, info.value.path) == (
        CUSTOMER,
        "$[1].tool_calls[0].args.lines[0].for",
    )
    model = ScriptedChatModel(
        rules=[ScriptRule("any", lambda ms: True, lambda ms: AIMessage("ok"))],
        calls_file=str(tmp_path / "calls.log"),
    )
    with pytest.raises(CanonicalJSONError, match=r"^the scripted model's input holds"):
        model.invoke(asked_with(refund_args()))
    assert not (tmp_path / "calls.log").exists()  # refused before the call was made


@pytest.mark.parametrize("bad", [{"b", "a"}, b"raw", 3 + 4j])
def test_former_repr_fallbacks_are_refused_by_all_three(bad: Any) -> None:
    args = {"x": bad}
    hashes = (
        args_sha256,
        canonical_hash,
        dumps,
        lambda a: canonical_hash([ToolMessage("r", tool_call_id="c"), *asked_with(a)]),
        lambda a: _input_hash(asked_with(a)),
    )
    for hashing in hashes:
        with pytest.raises(CanonicalJSONError) as info:
            hashing(args)
        assert info.value.type_name == type(bad).__name__
        assert info.value.path.endswith(".x")
