"""Input hashes: incremental hashing of a growing conversation equals hashing it whole."""

from __future__ import annotations

import hashlib

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tether.steps._codec import canonical_hash
from tether.steps._hashing import dumps, message_fields


def from_scratch(messages: list[BaseMessage]) -> str:
    text = "[" + ",".join(dumps(message_fields(m)) for m in messages) + "]"
    return hashlib.sha256(text.encode()).hexdigest()


def test_growing_conversation_hashes_like_a_fresh_one() -> None:
    messages: list[BaseMessage] = [HumanMessage("hi")]
    for i in range(12):
        assert canonical_hash(messages) == from_scratch(messages)
        messages = [
            *messages,
            AIMessage(
                "", tool_calls=[{"name": "t", "args": {"i": i}, "id": f"c{i}", "type": "tool_call"}]
            ),
        ]
        messages = [*messages, ToolMessage(f"result {i}", tool_call_id=f"c{i}")]
    assert canonical_hash(messages) == from_scratch(messages)


def test_ids_do_not_matter_but_content_does() -> None:
    first = [HumanMessage("hi", id="a"), AIMessage("yes", id="b")]
    same = [HumanMessage("hi", id="x"), AIMessage("yes", id="y")]
    assert canonical_hash(first) == canonical_hash(same)
    before = canonical_hash(first)
    first[1].content = "no"  # replaced content is noticed, not served from the cache
    assert canonical_hash(first) != before
    assert canonical_hash(first) == from_scratch(first)


def test_other_inputs_hash_canonically() -> None:
    assert canonical_hash({"b": 1, "a": [1, 2]}) == canonical_hash({"a": [1, 2], "b": 1})
    assert canonical_hash("text") != canonical_hash("other")
    assert canonical_hash([]) == canonical_hash(())


def test_a_conversation_that_shares_a_prefix_only_in_part_hashes_like_a_fresh_one() -> None:
    base: list[BaseMessage] = [HumanMessage(f"m{i}") for i in range(6)]
    canonical_hash(base)  # cached
    swapped = [*base[:2], HumanMessage("m2"), *base[3:], AIMessage("more")]  # equal, not the same
    assert canonical_hash(swapped) == from_scratch(swapped)
    edited = [*base[:3], HumanMessage("other"), *base[4:], AIMessage("more")]
    assert canonical_hash(edited) == from_scratch(edited)
    assert canonical_hash(edited) != canonical_hash(swapped)
    base[4].content = "changed in place"  # a cached prefix's message, its content replaced
    grown = [*base, AIMessage("more")]
    assert canonical_hash(grown) == from_scratch(grown)
    assert canonical_hash(base[:3]) == from_scratch(base[:3])  # shorter than any cached one
