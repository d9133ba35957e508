"""Every operation acts on exactly the thread, namespace and run id it is given.

Each hostile id sits beside a near-twin: the same text in another case, one part
of a comma list, the same text with a space trimmed, a glob, a query operator,
another Unicode form. Whatever a backend's index does with such text (RediSearch
TAG fields ignore ASCII case, split on ``,`` and trim spaces), an operation on
one of the pair must leave the other exactly as it was. Every test runs once
with the ids as targets and once with their twins as targets.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring

# (id, near-twin): all distinct, and each valid text on every backend (no NUL).
PAIRS: list[tuple[str, str]] = [
    ("alice", "Alice"),
    ("BOB", "bob"),
    ("a", "a,b"),
    ("b,a", "b"),
    ("x y ", "x y"),
    (" lead", "lead"),
    ("tab\t", "tab"),
    ("c|d", "c"),
    ("*", "star*"),
    ("?", "q?"),
    ("[ab]", "[ab"),
    ("{", "{}"),
    ("-", "--"),
    ("@", "@home"),
    ("%", "%%"),
    ("\\", "\\\\"),
    ("'quote'", '"quote"'),
    ("user:42", "user"),
    ("ümlaut", "ÜMLAUT"),
    ("straße", "STRASSE"),
    ("Σίσυφος", "ΣΊΣΥΦΟΣ"),
    ("k", "\u212a"),  # KELVIN SIGN
    ("e\u0301", "\u00e9"),  # decomposed and composed é
    ("日本", "日本,語"),
    ("😀", "😀 "),
    ("new\nline", "new line"),
    ("ctl\x01", "ctl"),
    ("\u00a0nbsp", "nbsp"),
    (" ", ""),
    (",", ",,"),
    ("a b,c", "a b"),
]
ALL_IDS = [i for pair in PAIRS for i in pair]
assert len(set(ALL_IDS)) == len(ALL_IDS)

# Namespaces of one thread, each beside a near-twin.
NS_PAIRS: list[tuple[str, str]] = [
    ("child:1", "Child:1"),
    ("a,b:1", "a:1"),
    ("ns x :1", "ns x:1"),
    ("p|q:1", "p:1"),
    ("*:1", "star:1"),
    ("ü:1", "Ü:1"),
    (" ", "  "),
]
ALL_NS = [n for pair in NS_PAIRS for n in pair]


def _targets(side: int) -> tuple[list[str], list[str]]:
    """The ids an operation acts on, and the twins that must stay untouched."""
    return [p[side] for p in PAIRS], [p[1 - side] for p in PAIRS]


def _config(thread_id: str, ns: str = "", checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


async def _put(
    saver: BaseCheckpointSaver[Any],
    thread_id: str,
    ns: str = "",
    parent: RunnableConfig | None = None,
    step: int = 0,
) -> RunnableConfig:
    """Save a checkpoint whose value and writes name its thread and namespace."""
    checkpoint = empty_checkpoint()
    owner = f"{thread_id}/{ns}/{step}"
    version = saver.get_next_version(None, None)  # type: ignore[arg-type]
    checkpoint["channel_values"] = {"owner": owner}
    checkpoint["channel_versions"] = {"owner": version}
    config = _config(thread_id, ns, parent["configurable"]["checkpoint_id"] if parent else None)
    metadata: Any = {"source": "loop", "step": step, "run_id": f"run-{thread_id}", "parents": {}}
    stored = await saver.aput(config, checkpoint, metadata, {"owner": version})
    await saver.aput_writes(stored, [("mail", f"write:{owner}")], "task-1", "")
    return stored


async def _fill(saver: BaseCheckpointSaver[Any], ids: list[str]) -> None:
    """Two checkpoints (step 0 and 1) per thread, each with a pending write."""
    for thread_id in ids:
        await _put(saver, thread_id, step=1, parent=await _put(saver, thread_id, step=0))


async def _history(saver: BaseCheckpointSaver[Any], thread_id: str, ns: str = "") -> list[Any]:
    """What a thread reads back: each listed checkpoint's owner and writes, newest first."""
    return [
        (
            t.config["configurable"]["thread_id"],
            t.checkpoint["channel_values"].get("owner"),
            [w[2] for w in t.pending_writes or []],
        )
        async for t in saver.alist(_config(thread_id, ns))
    ]


def _expected(thread_id: str, steps: tuple[int, ...] = (1, 0), ns: str = "") -> list[Any]:
    return [(thread_id, f"{thread_id}/{ns}/{s}", [f"write:{thread_id}/{ns}/{s}"]) for s in steps]


async def _latest_owner(saver: BaseCheckpointSaver[Any], thread_id: str, ns: str = "") -> Any:
    found = await saver.aget_tuple(_config(thread_id, ns))
    return None if found is None else found.checkpoint["channel_values"].get("owner")


async def _assert_untouched(saver: BaseCheckpointSaver[Any], ids: list[str]) -> None:
    for thread_id in ids:
        assert await _history(saver, thread_id) == _expected(thread_id), repr(thread_id)
        assert await _latest_owner(saver, thread_id) == f"{thread_id}//1", repr(thread_id)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_reads_see_only_the_exact_thread(backend: Backend, encrypted: bool) -> None:
    options = {"encryption": ring("k1")} if encrypted else {}
    async with backend.open(**options) as saver:
        await _fill(saver, ALL_IDS)
        await _assert_untouched(saver, ALL_IDS)
        # A twin's checkpoint id asked for under this thread is not this thread's.
        for thread_id, twin in PAIRS:
            theirs = await saver.aget_tuple(_config(twin))
            assert theirs is not None
            twin_id = theirs.config["configurable"]["checkpoint_id"]
            assert await saver.aget_tuple(_config(thread_id, "", twin_id)) is None, thread_id


@pytest.mark.parametrize("side", [0, 1], ids=["ids", "twins"])
@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_delete_thread_deletes_only_the_exact_thread(
    backend: Backend, side: int, encrypted: bool
) -> None:
    targets, twins = _targets(side)
    options = {"encryption": ring("k1")} if encrypted else {}
    async with backend.open(**options) as saver:
        await _fill(saver, ALL_IDS)
        for thread_id in targets:
            await saver.adelete_thread(thread_id)
        for thread_id in targets:
            assert await _history(saver, thread_id) == [], repr(thread_id)
            assert await saver.aget_tuple(_config(thread_id)) is None, repr(thread_id)
        await _assert_untouched(saver, twins)


@pytest.mark.parametrize("side", [0, 1], ids=["ids", "twins"])
@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_copy_thread_copies_only_the_exact_thread(
    backend: Backend, side: int, encrypted: bool
) -> None:
    targets, twins = _targets(side)
    options = {"encryption": ring("k1")} if encrypted else {}
    async with backend.open(**options) as saver:
        await _fill(saver, ALL_IDS)
        for thread_id in targets:
            await saver.acopy_thread(thread_id, f"copy of {thread_id}")
        for thread_id in targets:
            copied = await _history(saver, f"copy of {thread_id}")
            assert [(owner, writes) for _, owner, writes in copied] == [
                (owner, writes) for _, owner, writes in _expected(thread_id)
            ], repr(thread_id)
        await _assert_untouched(saver, ALL_IDS)
        for thread_id in twins:
            assert await _history(saver, f"copy of {thread_id}") == [], repr(thread_id)


@pytest.mark.parametrize("side", [0, 1], ids=["ids", "twins"])
@pytest.mark.parametrize("strategy", ["delete", "keep_latest"])
async def test_prune_prunes_only_the_exact_threads(
    backend: Backend, side: int, strategy: str
) -> None:
    targets, twins = _targets(side)
    async with backend.open() as saver:
        await _fill(saver, ALL_IDS)
        await saver.aprune(targets, strategy=strategy)
        kept: list[Any] = [] if strategy == "delete" else [1]
        for thread_id in targets:
            assert await _history(saver, thread_id) == _expected(thread_id, tuple(kept)), repr(
                thread_id
            )
        await _assert_untouched(saver, twins)


@pytest.mark.parametrize("side", [0, 1], ids=["ids", "twins"])
async def test_delete_for_runs_deletes_only_the_exact_runs(backend: Backend, side: int) -> None:
    targets, twins = _targets(side)
    async with backend.open() as saver:
        await _fill(saver, ALL_IDS)
        await saver.adelete_for_runs([f"run-{t}" for t in targets])
        for thread_id in targets:
            assert await _history(saver, thread_id) == [], repr(thread_id)
        await _assert_untouched(saver, twins)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
async def test_namespaces_are_matched_exactly(backend: Backend, encrypted: bool) -> None:
    options = {"encryption": ring("k1")} if encrypted else {}
    thread_id = "ns-thread"
    async with backend.open(**options) as saver:
        for ns in ALL_NS:
            first = await _put(saver, thread_id, ns, step=0)
            await _put(saver, thread_id, ns, parent=first, step=1)
        for ns in ALL_NS:
            assert await _history(saver, thread_id, ns) == _expected(thread_id, ns=ns), repr(ns)
            assert await _latest_owner(saver, thread_id, ns) == f"{thread_id}/{ns}/1", repr(ns)
        everything = [t async for t in saver.alist({"configurable": {"thread_id": thread_id}})]
        assert len(everything) == 2 * len(ALL_NS)
