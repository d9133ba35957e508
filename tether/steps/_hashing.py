"""Input hashes of conversations, computed incrementally.

A recorded model call hashes its whole input. In an agent loop the input is the
previous call's input plus a few new messages, so hashing it from scratch each
time costs O(n) per call, O(n^2) per run. Here the hash state after a
conversation is kept, so the next call encodes and hashes only what was
appended (after checking the rest is the same objects with the same
contents). The result is exactly the SHA-256 of the conversation's canonical
JSON; caching never changes it.

Canonical JSON is :mod:`tether._canonical`'s, in the spelling step hashes have
always been stored with: ASCII text (``ensure_ascii=True``), NaN and infinity
written as ``NaN`` and ``Infinity``, and messages (wherever they are in the
value) reduced to :func:`message_fields`, what a model was asked.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, is_
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue

from tether._canonical import Reducers, canonical_json

__all__ = ["REDUCERS", "conversation_hash", "dumps", "message_fields"]

# The parts of a message that make up what a model was asked; ids and provider
# metadata are left out because they may differ between equal conversations.
_MESSAGE_KEYS = ("content", "tool_calls", "tool_call_id", "name")
_LOOKBACK = 8  # how many trailing messages may be new since a cached prefix
_MAX_PREFIXES = 16  # each holds its messages alive


def message_fields(message: BaseMessage) -> dict[str, Any]:
    """The content-bearing fields of ``message``, for hashing."""
    fields: dict[str, Any] = {"type": message.type}
    for key in _MESSAGE_KEYS:
        value = getattr(message, key, None)
        if value:
            if key == "tool_calls":
                value = [{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in value]
            fields[key] = value
    return fields


def _prompt_fields(prompt: PromptValue) -> list[dict[str, Any]]:
    return [message_fields(m) for m in prompt.to_messages()]


REDUCERS: Reducers = ((BaseMessage, message_fields), (PromptValue, _prompt_fields))
"""Messages and prompt values count by their content, wherever they are in a hashed value."""


def dumps(value: Any, *, what: str = "the hashed step input") -> str:
    """Canonical JSON in the steps' spelling: sorted keys, no spaces, ASCII only.

    Raises:
        CanonicalJSONError: ``value`` holds something canonical JSON cannot encode
            (the error names its type and where it is).
    """
    return canonical_json(value, ensure_ascii=True, allow_nan=True, reducers=REDUCERS, what=what)


@dataclass
class _Prefix:
    """A hashed conversation and the hash state after it.

    It holds its messages, so none of them can be freed and its address reused
    while it lives: a conversation that starts with these very objects (compared
    by identity, at C speed) and their same contents starts with this prefix.
    """

    messages: tuple[BaseMessage, ...]
    contents: tuple[Any, ...]
    state: Any  # hashlib object after "[" + m1 + "," + ... + mn

    def matches(self, messages: Sequence[BaseMessage]) -> bool:
        n = len(self.messages)
        return (
            len(messages) >= n
            and all(map(is_, messages, self.messages))
            and tuple(map(_content, messages[:n])) == self.contents
        )


_content = attrgetter("content")
# Keyed by id() of the last message of the cached conversation.
_prefixes: OrderedDict[int, _Prefix] = OrderedDict()
_lock = threading.Lock()


def _longest_prefix(messages: Sequence[BaseMessage]) -> _Prefix | None:
    for end in range(len(messages), max(len(messages) - _LOOKBACK, 0), -1):
        entry = _prefixes.get(id(messages[end - 1]))
        if entry is not None and len(entry.messages) == end and entry.matches(messages):
            return entry
    return None


def conversation_hash(messages: Sequence[BaseMessage]) -> str:
    """SHA-256 of ``"[" + ",".join(canonical JSON of each message) + "]"``."""
    with _lock:
        prefix = _longest_prefix(messages)
        if prefix is not None:
            _prefixes.pop(id(messages[len(prefix.messages) - 1]), None)  # superseded below
    held: tuple[BaseMessage, ...] = ()
    contents: tuple[Any, ...] = ()
    if prefix is None:
        state, start = hashlib.sha256(b"["), 0
    else:
        state, start = prefix.state.copy(), len(prefix.messages)
        held, contents = prefix.messages, prefix.contents
    for i in range(start, len(messages)):
        text = dumps(message_fields(messages[i]), what=f"message {i} of the hashed conversation")
        state.update((b"," if i else b"") + text.encode())
    digest = state.copy()
    digest.update(b"]")
    # The prefix's tuples grow by what was appended: no pass over the whole conversation.
    added = tuple(messages[start:])
    whole = _Prefix(held + added, contents + tuple(map(_content, added)), state)
    with _lock:
        _prefixes[id(whole.messages[-1])] = whole
        while len(_prefixes) > _MAX_PREFIXES:
            _prefixes.popitem(last=False)
    return digest.hexdigest()
