"""Each record-store operation, written once as a flow over the backend calls of :mod:`._io`.

A flow checks and encodes its arguments in the caller's context (where the
calling node's run id is visible), yields the backend calls, and decodes what
comes back. ``RecordStore`` runs it with ``await``, ``SyncRecordStore`` from the
calling thread (:mod:`._io`); neither adds logic of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether import _flows
from tether.checkpointing import check_run_ids
from tether.store._chain import ChainHead, ChainReport, ChainRow, head_of, verify
from tether.store._codec import check_names
from tether.store._data_keys import ring_only
from tether.store._io import (
    AppendRaw,
    ChainRaw,
    DeleteRunsRaw,
    DeleteThreadRaw,
    Flow,
    GetRaw,
    InsertRaw,
    ListRaw,
    LoadDataKey,
    LoadKeyedHash,
    PutRawWithStep,
    StepsRaw,
    StepThreadsRaw,
    UpsertRaw,
)
from tether.store._keyed import KeyedHash
from tether.store._ownership import forget, resolve_run_id
from tether.store._types import RawRecord, Record

if TYPE_CHECKING:
    from tether.checkpointing import DataKey
from tether.store.operations import (
    AppendStep,
    DeleteRuns,
    DeleteThread,
    Get,
    IndexedSteps,
    Insert,
    List,
    Operation,
    PutWithStep,
    Steps,
    StepThreads,
    Upsert,
    VerifyChain,
)
from tether.store.operations import ChainHead as ChainHeadOp
from tether.store.operations import KeyedHash as KeyedHashOp

if TYPE_CHECKING:
    from tether.store._record import RecordStore

__all__ = ["flow_for"]


def flow_for(store: RecordStore, op: Operation) -> Flow[Any]:  # noqa: PLR0912 - one case per operation, read as a table
    """The flow that performs ``op`` on ``store``.

    Raises:
        TypeError: ``op`` is not a record-store operation.
    """
    flow: Flow[Any]
    match op:
        case Insert():
            flow = _insert(store, op)
        case Upsert():
            flow = _upsert(store, op)
        case Get():
            flow = _get(store, op)
        case List():
            flow = _list(store, op)
        case AppendStep():
            flow = _append_step(store, op)
        case PutWithStep():
            flow = _put_with_step(store, op)
        case Steps():
            flow = _steps(store, op)
        case IndexedSteps():
            flow = _indexed_steps(store, op.thread_id)
        case DeleteThread():
            flow = _delete_thread(store, op)
        case DeleteRuns():
            flow = _delete_runs(op)
        case KeyedHashOp():
            flow = _keyed_hash(store)
        case VerifyChain() | ChainHeadOp() | StepThreads():
            flow = _chain_flow(store, op)
        case _:
            _flows.unknown_operation(op, "the record store (tether.store.operations)")
    return flow


def _data_key(
    store: RecordStore, thread: str, *, create: bool, want: str | None = None, kind: str = ""
) -> Flow[DataKey | None]:
    """The thread's data key: from memory when cached, else one backend hop."""
    if store._codec.cipher is None or ring_only(thread, kind):
        return None
    key = store._data_keys.get(thread, want)
    if key is None and (create or want is not None):
        key = yield LoadDataKey(thread, create, want)
    return key


def _opening_key(store: RecordStore, thread: str, payload: str) -> Flow[DataKey | None]:
    """The data key a stored value needs (``None`` if it is sealed by a ring key)."""
    want = store._codec.wanted_key(payload)
    if want is None:
        return None
    key = yield from _data_key(store, thread, create=False, want=want)
    return key


def _raw(store: RecordStore, op: Insert | Upsert | PutWithStep) -> Flow[RawRecord]:
    check_names(op.kind, op.key)
    thread = str(op.thread_id)
    key = yield from _data_key(store, thread, create=True, kind=op.kind)
    run_id = resolve_run_id(op.run_id)
    return store._codec.raw(op.kind, op.key, op.value, thread, run_id, key)


def _insert(store: RecordStore, op: Insert) -> Flow[bool]:
    raw = yield from _raw(store, op)
    inserted: bool = yield InsertRaw(raw)
    return inserted


def _upsert(store: RecordStore, op: Upsert) -> Flow[None]:
    raw = yield from _raw(store, op)
    yield UpsertRaw(raw)


def _record(store: RecordStore, raw: RawRecord) -> Flow[Record]:
    key = yield from _opening_key(store, raw.thread_id, raw.payload)
    return store._codec.record(raw, key)


def _get(store: RecordStore, op: Get) -> Flow[Record | None]:
    check_names(op.kind, op.key)
    raw: RawRecord | None = yield GetRaw(op.kind, op.key)
    if raw is None:
        return None
    record = yield from _record(store, raw)
    return record


def _list(store: RecordStore, op: List) -> Flow[list[Record]]:
    check_names(op.kind, "-")
    thread = None if op.thread_id is None else str(op.thread_id)
    raws: list[RawRecord] = yield ListRaw(op.kind, thread)
    records = []
    for raw in raws:
        records.append((yield from _record(store, raw)))
    return records


def _append_step(store: RecordStore, op: AppendStep) -> Flow[int]:
    thread = str(op.thread_id)
    run_id = resolve_run_id(op.run_id)
    keyed = yield from _keyed_hash(store)
    key = yield from _data_key(store, thread, create=True)
    index: int = yield AppendRaw(thread, store._codec.step(thread, op.step, run_id, keyed, key))
    return index


def _put_with_step(store: RecordStore, op: PutWithStep) -> Flow[int | None]:
    raw = yield from _raw(store, op)
    keyed = yield from _keyed_hash(store)
    key = yield from _data_key(store, raw.thread_id, create=True)
    step = store._codec.step(raw.thread_id, op.step, raw.run_id, keyed, key)
    index: int | None = yield PutRawWithStep(raw, op.replace, step)
    return index


def _indexed_steps(store: RecordStore, thread_id: str) -> Flow[list[tuple[int, dict[str, Any]]]]:
    thread = str(thread_id)
    rows: list[tuple[int, str]] = yield StepsRaw(thread)
    steps = []
    for index, payload in rows:
        key = yield from _opening_key(store, thread, payload)
        steps.append((index, store._codec.step_value(thread, index, payload, key)))
    return steps


def _steps(store: RecordStore, op: Steps) -> Flow[list[dict[str, Any]]]:
    rows = yield from _indexed_steps(store, op.thread_id)
    return [step for _, step in rows]


def _chain_flow(store: RecordStore, op: VerifyChain | ChainHeadOp | StepThreads) -> Flow[Any]:
    if isinstance(op, VerifyChain):
        return _verify_chain(store, op)
    if isinstance(op, ChainHeadOp):
        return _chain_head(op.thread_id)
    return _step_threads()


def _verify_chain(store: RecordStore, op: VerifyChain) -> Flow[ChainReport]:
    thread = str(op.thread_id)
    keyed = yield from _keyed_hash(store)
    rows: list[ChainRow] = yield ChainRaw(thread)
    # The key the newest step names (a log written before data keys names none).
    want = next((w for row in reversed(rows) if (w := _wanted(store, row))), None)
    key = yield from _data_key(store, thread, create=False, want=want)

    def open_text(index: int, payload: str) -> str:
        return store._codec.step_text(thread, index, payload, key)

    return verify(thread, rows, open_text, keyed, op.expected_head)


def _wanted(store: RecordStore, row: ChainRow) -> str | None:
    return None if row.text is None else store._codec.wanted_key(row.text)


def _chain_head(thread_id: str) -> Flow[ChainHead | None]:
    rows: list[ChainRow] = yield ChainRaw(str(thread_id))
    return head_of(rows)


def _step_threads() -> Flow[list[str]]:
    threads: list[str] = yield StepThreadsRaw()
    return threads


def _delete_thread(store: RecordStore, op: DeleteThread) -> Flow[None]:
    thread = str(op.thread_id)
    yield DeleteThreadRaw(thread)
    if store.key_records is not None:  # the data key last: see tether.checkpointing._cascade
        yield DeleteThreadRaw(thread, keys=True)
    forget([thread])


def _delete_runs(op: DeleteRuns) -> Flow[None]:
    runs = check_run_ids(op.run_ids, "delete_runs")
    if runs:
        yield DeleteRunsRaw(runs)
        forget(None)


def _keyed_hash(store: RecordStore) -> Flow[KeyedHash | None]:
    # Loaded once per store, by RecordStore.keyed_hash; after that no hop to the loop.
    if store._codec.cipher is None or store._keyed is not None:
        return store._keyed
    keyed: KeyedHash | None = yield LoadKeyedHash()
    return keyed
