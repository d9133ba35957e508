"""A writer of raw storage without the key cannot add clear metadata or roll one channel back.

* Metadata keys stored in clear outside the documented policy (``source``, ``step``,
  ``parents``, ``run_id`` and ``searchable_metadata``) are dropped on read and never
  matched by ``list(filter=...)``.
* The sealed metadata binds the checkpoint's channel versions, so an older channel
  value and version spliced into the newest row is refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from tests.backends import Backend
from tests.checkpointing.encryption_helpers import ring
from tests.checkpointing.raw_rows import edit_row, read_row
from tether.checkpointing._encrypted import EncryptedSaver
from tether.checkpointing.encryption import TamperedCiphertextError


def _config(thread_id: str, checkpoint_id: str | None = None) -> Any:
    conf = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


async def _chain(saver: BaseCheckpointSaver[Any], thread_id: str, notes: list[str]) -> list[str]:
    """One checkpoint per note (each a new version of the ``note`` channel); their ids."""
    ids: list[str] = []
    config = _config(thread_id)
    version = None
    for step, note in enumerate(notes):
        version = saver.get_next_version(version, None)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"note": note, "limit": 100}
        checkpoint["channel_versions"] = {"note": version, "limit": "1"}
        metadata: Any = {"source": "loop", "step": step, "parents": {}, "reviewer": "erin"}
        config = await saver.aput(config, checkpoint, metadata, {"note": version, "limit": "1"})
        ids.append(config["configurable"]["checkpoint_id"])
    return ids


async def test_clear_metadata_outside_the_policy_is_dropped_and_never_filtered(
    backend: Backend,
) -> None:
    async with backend.open(encryption=ring("k1"), searchable_metadata=("tenant",)) as saver:
        assert isinstance(saver, EncryptedSaver)
        config = _config("t")
        metadata: Any = {"source": "loop", "step": 1, "parents": {}, "tenant": "acme"}
        stored = await saver.aput(config, empty_checkpoint(), metadata, {})
        cid = stored["configurable"]["checkpoint_id"]

        def inject(checkpoint: dict[str, Any], clear: dict[str, Any]) -> None:
            clear["approved_by"] = "dana"  # a key the policy never stores in clear

        await edit_row(backend, saver, "t", cid, inject)
        _, raw = await read_row(backend, saver, "t", cid)
        assert raw["approved_by"] == "dana"  # the edit did land in storage

        tup = await saver.aget_tuple(stored)
        assert tup is not None
        assert "approved_by" not in tup.metadata
        assert tup.metadata["tenant"] == "acme"  # a documented clear key still reads
        assert [t async for t in saver.alist(None, filter={"approved_by": "dana"})] == []
        assert [t async for t in saver.alist(config, filter={"approved_by": "dana"})] == []
        found = [t async for t in saver.alist(config, filter={"tenant": "acme", "step": 1})]
        assert [t.config["configurable"]["checkpoint_id"] for t in found] == [cid]


async def test_an_older_channel_version_spliced_into_the_newest_row_is_refused(
    backend: Backend,
) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        assert isinstance(saver, EncryptedSaver)
        first, _, newest = await _chain(saver, "t", ["refund 10", "refund 20", "refund 5000"])
        old, _ = await read_row(backend, saver, "t", first)

        def roll_back(checkpoint: dict[str, Any], clear: dict[str, Any]) -> None:
            # The old envelope is validly bound to ("note", old version): only the set
            # of versions of the newest checkpoint can tell that it does not belong.
            checkpoint["channel_versions"]["note"] = old["channel_versions"]["note"]
            if "note" in checkpoint.get("channel_values", {}):
                checkpoint["channel_values"]["note"] = old["channel_values"]["note"]

        await edit_row(backend, saver, "t", newest, roll_back)
        with pytest.raises(TamperedCiphertextError, match=r"thread 't'.*metadata"):
            await saver.aget_tuple(_config("t"))
        with pytest.raises(TamperedCiphertextError):
            _ = [t async for t in saver.alist(_config("t"))]
        # The untouched checkpoints still read.
        tup = await saver.aget_tuple(_config("t", first))
        assert tup is not None
        assert tup.checkpoint["channel_values"]["note"] == "refund 10"


async def test_a_channel_version_dropped_from_the_newest_row_is_refused(
    backend: Backend,
) -> None:
    async with backend.open(encryption=ring("k1")) as saver:
        _, newest = await _chain(saver, "t", ["a", "b"])

        def drop(checkpoint: dict[str, Any], clear: dict[str, Any]) -> None:
            del checkpoint["channel_versions"]["limit"]
            checkpoint.get("channel_values", {}).pop("limit", None)

        await edit_row(backend, saver, "t", newest, drop)
        with pytest.raises(TamperedCiphertextError):
            await saver.aget_tuple(_config("t"))
