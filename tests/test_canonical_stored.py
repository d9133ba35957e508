"""Stored hashes keep their bytes: digests pinned from the encoders before ``tether._canonical``.

Approval requests store ``args_sha256``; step records store the input hash a
replay compares; the scripted model's ids and calls file carry its input hash.
Each digest below was computed by the code these hashes were first written
with, so a change to the canonical form that alters any of them fails here.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from datetime import UTC, datetime
from decimal import Decimal
from types import MappingProxyType
from typing import Any
from uuid import UUID

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompt_values import ChatPromptValue
from pydantic import BaseModel

from tether.approvals import args_sha256, canonical_json
from tether.graphs._scripted import _input_hash
from tether.steps._codec import canonical_hash


class Level(enum.IntEnum):
    HIGH = 2


class Color(enum.StrEnum):
    RED = "red"


class Address(BaseModel):
    street: str
    zip_code: str | None = None


class Order(BaseModel):
    order_id: str
    amount: Decimal
    placed: datetime
    ref: UUID
    ship_to: Address
    tags: tuple[str, ...] = ()


ORDER = Order(
    order_id="A-1",
    amount=Decimal("12.50"),
    placed=datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC),
    ref=UUID("12345678-1234-5678-1234-567812345678"),
    ship_to=Address(street="Königstraße 1"),
    tags=("gift", "fragile"),
)
TEXT = 'é 日本語 🙂 \u2028 \x00 \x1f " \\ / \t\n'
FLOATS = [0.1, 1.0, -0.0, 1e16, 1e-7, 123456789.123, 5e-324, 1.7976931348623157e308, 2.5]
INTS = [0, -1, 2**53 + 1, 2**64, -(10**30), True, False, None]


def tool_call(name: str, args: dict[str, Any], call_id: str) -> Any:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage("Be brief.", id="s"),
        HumanMessage("Refund order A-1 to bøb 🙂", id="h"),
        AIMessage(
            "",
            tool_calls=[tool_call("refund", {"to": "bøb", "amount": 500, "ratio": 0.5}, "c1")],
            id="a1",
        ),
        ToolMessage("refunded ✓", tool_call_id="c1", name="refund"),
        AIMessage([{"type": "text", "text": "Done — refunded."}], id="a2"),
    ]


# name -> (args, args_sha256 of the old approvals encoder)
APPROVAL_ARGS: dict[str, tuple[Any, str]] = {
    "transfer": (
        {"to": "bob", "amount": 500},
        "744d9488eacfdc80fab739b4b8d31dc76b15e8ac0e11ace236a09a31516d43ff",
    ),
    "text": (
        {"note": TEXT, "b": 1, "a": "é"},
        "0314d9988c03eb3b632a9c87f79dd379b355ae1f29bca6ac9b1b3c3470743648",
    ),
    "floats": (
        {"floats": FLOATS},
        "1646df1b940537f39915ed27b39e4288850096b5e92362b0bdde7e92c6127222",
    ),
    "ints": ({"ints": INTS}, "68bfbc906cfa88e073b226e7459579dce7342e5f5d215de4265e4766ef64a296"),
    "model": (ORDER, "ea1b7fff195860299f6153cd16077bd5438a6c98a9abc694e6da77fe5100a9a9"),
    "nested model": (
        {"order": ORDER, "qty": 2},
        "0aa30e8f2ad574a1cad068ae132ebfa062fd1e5abb0a8a60ec121690d6fc22b8",
    ),
    "tuples": (
        {"x": (1, (2, "3")), "nested": {"z": [], "y": {}}},
        "c483076d85871db4a020b8f5d3cec61eddf0b6fc9f8637318689775e1b1f9adb",
    ),
    "enums": (
        {"level": Level.HIGH, "color": Color.RED},
        "5d3ef32f5e5b046c706bdb9abb1be6ed133665995515d9b3e255043e07013f4d",
    ),
    "dict subclass": (
        OrderedDict([("b", 2), ("a", 1)]),
        "43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777",
    ),
    "top-level scalars": (
        ["", 0, None, "x"],
        "70c70e9dac1cd06f836b1f6635149edcf360ea3f1a579bfd84ce24582ea030c3",
    ),
    "empty": ({}, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"),
}

# name -> (model input or tool arguments, canonical_hash of the old steps encoder)
STEP_INPUTS: dict[str, tuple[Any, str]] = {
    "conversation": (
        conversation(),
        "febe3656e012991bbfdc76d78956b01afdf2a632828b3298d10cabfc3a088fdb",
    ),
    "conversation tuple": (
        tuple(conversation()),
        "febe3656e012991bbfdc76d78956b01afdf2a632828b3298d10cabfc3a088fdb",
    ),
    "non-finite args": (
        [
            AIMessage(
                "",
                tool_calls=[tool_call("t", {"x": float("nan"), "y": float("-inf")}, "c")],
            )
        ],
        "151a6703f67e654e1b0f567e9f938b3bda9cc33b38970a41d500a1006b01f648",
    ),
    "prompt value": (
        ChatPromptValue(messages=conversation()),
        "febe3656e012991bbfdc76d78956b01afdf2a632828b3298d10cabfc3a088fdb",
    ),
    "mixed list": (
        [HumanMessage("a"), "b", ("human", "c")],
        "919ffa4ec3882934e7027b52fbc4202ccfb30d6c28aa0585b18ddb0d13185e9e",
    ),
    "nested messages": (
        {"messages": conversation(), "k": 1},
        "97d8e8359c8d52f54bded955af3c7452f39ab3545c264e35b113b0acc2968e44",
    ),
    "tool args": (
        {"amount": 500, "to": "bob"},
        "744d9488eacfdc80fab739b4b8d31dc76b15e8ac0e11ace236a09a31516d43ff",
    ),
    "text": (TEXT, "c2468b68e2c3665723c12981a562592cb473a67d7b45f6b1f3f2fe629f6b0448"),
    "floats": (
        {"floats": FLOATS, "nan": float("nan"), "inf": float("inf")},
        "4cb1c94462eae3743db165a45179dd04a0e4a030e98baab5b478be8e15e9c787",
    ),
    "ints": ({"ints": INTS}, "68bfbc906cfa88e073b226e7459579dce7342e5f5d215de4265e4766ef64a296"),
    "model": ({"order": ORDER}, "ba82d1cfe9f6728d0bf59aa123389712e051fe8649bf7e3fa135776eebdeb13e"),
    "tuples and ranges": (
        {"x": (1, (2, "3")), "r": range(3)},
        "f6bc6bc5f19a108d6e1c1643b017f1672bb1c6152a4b1de276990d33572067a9",
    ),
    "mapping proxy": (
        MappingProxyType({"b": [1], "a": "é"}),
        "080db8b6e1401db291aec690a7578f12e73286d0b2450841c891bf1e976aa628",
    ),
    "enums": (
        {"level": Level.HIGH, "color": Color.RED},
        "5d3ef32f5e5b046c706bdb9abb1be6ed133665995515d9b3e255043e07013f4d",
    ),
    "empty list": ([], "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"),
    "none": (None, "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"),
}

# name -> (conversation, input hash of the old scripted model)
SCRIPTED_INPUTS: dict[str, tuple[list[BaseMessage], str]] = {
    "conversation": (
        conversation(),
        "4429621e0cf9b2970c5ed0e074d1629cf4bf55f977b7a936ef99186f7c4f597d",
    ),
    "first turn": (
        [HumanMessage("Refund order A-1")],
        "1ae81c96963c399b24da9184e055efa9dc2e453ed067147381dc5f89df6962aa",
    ),
    "tool without name": (
        [
            HumanMessage("go"),
            AIMessage(
                "",
                tool_calls=[tool_call("lookup", {"q": "ü", "n": 1.5}, "c9")],
            ),
            ToolMessage("found", tool_call_id="c9"),
        ],
        "e818b353a4a8108c054bd88f34b56783fed9137a2a3b590c2f313115019f173c",
    ),
}


@pytest.mark.parametrize("name", sorted(APPROVAL_ARGS))
def test_approval_args_hash_as_stored(name: str) -> None:
    args, digest = APPROVAL_ARGS[name]
    assert args_sha256(args) == digest


def test_approval_canonical_text_is_unchanged() -> None:
    assert canonical_json({"b": 1, "a": "é", "c": [1.5, None, True]}) == (
        '{"a":"é","b":1,"c":[1.5,null,true]}'
    )


@pytest.mark.parametrize("name", sorted(STEP_INPUTS))
def test_step_input_hash_as_stored(name: str) -> None:
    value, digest = STEP_INPUTS[name]
    assert canonical_hash(value) == digest


@pytest.mark.parametrize("name", sorted(SCRIPTED_INPUTS))
def test_scripted_input_hash_as_stored(name: str) -> None:
    messages, digest = SCRIPTED_INPUTS[name]
    assert _input_hash(messages) == digest
