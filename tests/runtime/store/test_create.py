"""Creating runs: validation, threads, multitask strategies and tenant isolation (§3.3.7)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.runtime.store.actions import GRAPH, LEASE, claim_one, create, kinds
from tether.runtime.errors import (
    AlreadyExistsError,
    AssistantNotFoundError,
    InvalidRunRequestError,
    RunNotFoundError,
    ThreadBusyError,
    ThreadNotFoundError,
)
from tether.runtime.ids import system_assistant_id
from tether.runtime.store import NewEvent, NewRun, Outcome, RunStore

PAST = datetime.now(UTC) - timedelta(minutes=1)


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


INVALID: list[tuple[dict[str, Any], str]] = [
    ({"input": {"a": 1}, "command": {"resume": 1}}, "input and command were both given"),
    ({"thread_id": None, "command": {"resume": 1}}, "You must provide a thread_id when resuming."),
    ({"command": {"jump": 1}}, "jump is not one"),
    ({"command": {}}, "command must have some of the keys goto, graph, resume, update"),
    ({"multitask_strategy": "parallel"}, "multitask_strategy 'parallel' is unknown"),
    ({"after_seconds": -1}, "after_seconds must be a finite number of seconds >= 0"),
    ({"after_seconds": float("nan")}, "after_seconds must be a finite number of seconds >= 0"),
    ({"deadline_at": PAST}, "is in the past"),
    ({"deadline_at": datetime(2999, 1, 1)}, "deadline_at must be a timezone-aware datetime"),
    ({"kwargs": {"stream_mode": "everything"}}, "stream_mode 'everything' is unknown"),
    ({"kwargs": {"stream_mode": ["values", "bogus"]}}, "stream_mode 'bogus' is unknown"),
    ({"thread_id": ""}, "thread_id must not be empty"),
    ({"thread_id": "x" * 256}, "thread_id is 256 characters long; the limit is 255"),
    ({"thread_id": "a\x00b"}, "thread_id 'a\\x00b' contains a NUL character"),
    ({"thread_id": 42}, "thread_id must be a string, got int"),
    ({"thread_id": "t\ud800"}, "is not valid Unicode text (a lone surrogate at position 1)"),
    ({"kwargs": {"durability": "never"}}, "durability 'never' is unknown"),
    ({"kwargs": {"interrupt_before": "tools"}}, "interrupt_before must be '*' or a list"),
    ({"kwargs": {"interrupt_after": [1]}}, "interrupt_after must be '*' or a list"),
    ({"kwargs": {"checkpoint_id": ""}}, "checkpoint_id must not be empty"),
    ({"kwargs": {"webhook": "/threads"}}, "must be an absolute http(s) URL"),
    ({"kwargs": {"webhook": 7}}, "webhook must be a URL string, got 7"),
    ({"run_id": ""}, "run_id must not be empty"),
    ({"if_not_exists": "maybe"}, "if_not_exists 'maybe' is unknown"),
    ({"on_completion": "archive"}, "on_completion 'archive' is unknown"),
    ({"step_timeout": 0}, "step_timeout must be a finite number of seconds > 0"),
    ({"max_attempts": 0}, "max_attempts must be an integer >= 1, got 0"),
    ({"input": object()}, "input: a builtins.object cannot be stored as JSON"),
    ({"metadata": ["a"]}, "metadata must be a mapping with string keys"),
    ({"metadata": {"k": ["x", "a\x00"]}}, "metadata['k'][1] contains a NUL character"),
    ({"metadata": {"k\x00": 1}}, "metadata (a key) contains a NUL character"),
    ({"kwargs": {"config": {"tags": ["\x00"]}}}, "kwargs['config']['tags'][0] contains a NUL"),
    ({"input": _deep(5000)}, "input: cannot be stored as JSON: it is nested too deeply"),
    ({"after_seconds": 1e12}, "after_seconds must be at most 316224000 seconds (ten years)"),
    ({"step_timeout": 1e300}, "step_timeout must be at most 316224000 seconds"),
    (
        {"kwargs": {"config": {"configurable": {"__pregel_checkpointer": 1}}}},
        "config.configurable key '__pregel_checkpointer' is reserved",
    ),
    (
        {"kwargs": {"config": {"configurable": {"__tether_budget": {}}}}},
        "config.configurable key '__tether_budget' is reserved",
    ),
    ({"kwargs": {"config": {"configurable": ["x"]}}}, "config.configurable must be a mapping"),
    # a compensation policy refused only once the run failed: nothing was undone nor listed
    (
        {"kwargs": {"config": {"configurable": {"tether_compensation": "bogus"}}}},
        "config.configurable 'tether_compensation' must be 'auto', 'ask' or 'none', got 'bogus'",
    ),
    (
        {"kwargs": {"config": {"configurable": {"tether_compensation": 5}}}},
        "configurable 'tether_compensation' must be 'auto', 'ask' or 'none', got 5",
    ),
    # a metadata that was not an object stopped the worker before the graph: the run stayed running
    ({"kwargs": {"config": {"metadata": 5}}}, "config.metadata must be a mapping"),
    ({"kwargs": {"config": {"metadata": [["a", 1]]}}}, "config.metadata must be a mapping"),
    ({"kwargs": {"config": {"tags": "abc"}}}, "config.tags must be a list of strings"),
    ({"kwargs": {"config": {"tags": [1]}}}, "config.tags must be a list of strings"),
    ({"kwargs": {"config": {"recursion_limit": "x"}}}, "config.recursion_limit must be a whole"),
    ({"kwargs": {"config": {"recursion_limit": 0}}}, "config.recursion_limit must be a whole"),
    ({"kwargs": {"config": {"recursion_limit": True}}}, "config.recursion_limit must be a whole"),
    ({"kwargs": {"config": {"max_concurrency": 1.5}}}, "config.max_concurrency must be a whole"),
    ({"kwargs": {"config": {"run_name": 5}}}, "config.run_name must be a string"),
    ({"kwargs": {"config": {"callbacks": [1]}}}, "config.callbacks cannot be sent with a run"),
]


@pytest.mark.parametrize(("options", "message"), INVALID, ids=[m for _, m in INVALID])
async def test_a_malformed_request_names_its_problem_and_writes_nothing(
    store: RunStore, options: dict[str, Any], message: str
) -> None:
    options = {"thread_id": "t1", "if_not_exists": "create", **options}
    with pytest.raises(InvalidRunRequestError) as caught:
        await store.create_run(NewRun(GRAPH, **options))
    assert message in str(caught.value)
    assert await store.list_runs() == []
    assert await store.list_threads() == []


async def test_a_new_run_is_pending_on_a_busy_thread_with_its_created_event(
    store: RunStore,
) -> None:
    run = await create(store, input={"q": 1}, metadata={"m": 2}, kwargs={"stream_mode": "values"})
    assert (run.status, run.input, run.input_kind, run.attempt, run.fence) == (
        "pending", {"q": 1}, "input", 0, 0,
    )  # fmt: skip
    assert run.graph_id == GRAPH
    assert run.assistant_id == system_assistant_id(GRAPH)
    assert run.metadata == {"m": 2}
    assert run.kwargs == {"stream_mode": "values", "on_completion": "keep", "temporary": False}
    assert await store.get_run(run.run_id) == run
    assert (await store.get_thread("t1")).status == "busy"
    events = await store.events(run.run_id)
    assert [(e.seq, e.kind, e.fence) for e in events] == [(1, "run.created", None)]
    assert events[0].data["graph_id"] == GRAPH


async def test_a_command_is_stored_as_the_runs_input(store: RunStore) -> None:
    run = await create(store, command={"resume": {"ok": True}})
    assert (run.input_kind, run.input) == ("command", {"resume": {"ok": True}})


async def test_a_stateless_run_gets_a_temporary_thread(store: RunStore) -> None:
    run = await create(store, thread_id=None)
    thread = await store.get_thread(run.thread_id)
    assert thread.temporary
    assert run.kwargs["on_completion"] == "delete"
    kept = await create(store, thread_id=None, on_completion="keep")
    assert not (await store.get_thread(kept.thread_id)).temporary


async def test_a_missing_thread_is_rejected_by_default(store: RunStore) -> None:
    with pytest.raises(ThreadNotFoundError, match="no thread 'nope' for this tenant"):
        await store.create_run(NewRun(GRAPH, thread_id="nope"))
    assert await store.list_runs() == []


async def test_an_unknown_assistant_is_not_found(store: RunStore) -> None:
    with pytest.raises(AssistantNotFoundError, match="no assistant 'other'"):
        await store.create_run(NewRun("other", thread_id="t1", if_not_exists="create"))
    assert await store.list_threads() == []


async def test_an_assistant_is_found_by_id_or_by_its_graph(store: RunStore) -> None:
    mine = await store.put_assistant(GRAPH, assistant_id="a1", name="mine", config={"k": 1})
    assert (await store.get_assistant("a1")) == mine
    assert (await store.get_assistant(GRAPH)).assistant_id == system_assistant_id(GRAPH)
    run = (await store.create_run(NewRun("a1", thread_id="t", if_not_exists="create"))).run
    assert (run.assistant_id, run.graph_id) == ("a1", GRAPH)
    with pytest.raises(AlreadyExistsError, match="assistant 'a1' already exists"):
        await store.put_assistant(GRAPH, assistant_id="a1")
    assert await store.put_assistant(GRAPH, assistant_id="a1", if_exists="do_nothing") == mine


PERSONA = {
    "config": {"configurable": {"model": "m1", "t": 1}, "metadata": {"team": "x"}, "tags": ["a"]},
    "context": {"tone": "warm", "sig": "A"},
}


def _options(run: Any) -> tuple[Any, Any]:
    return run.kwargs.get("config"), run.kwargs.get("context")


async def test_a_run_takes_its_assistants_config_and_context_under_its_own(
    store: RunStore,
) -> None:
    """As LangGraph's server: the assistant's config and context, the run's values winning
    (``configurable`` and ``metadata`` merged key by key), kept by the run when created."""
    await store.put_assistant(GRAPH, assistant_id="a1", **PERSONA)
    own = {"config": {"configurable": {"t": 2}, "metadata": {"who": "y"}}, "context": {"sig": "B"}}
    run = (
        await store.create_run(NewRun("a1", thread_id="t", if_not_exists="create", kwargs=own))
    ).run
    merged = (
        {"configurable": {"model": "m1", "t": 2}, "metadata": {"team": "x", "who": "y"},
         "tags": ["a"]},
        {"tone": "warm", "sig": "B"},
    )  # fmt: skip
    assert _options(run) == merged
    bare = (await store.create_run(NewRun("a1", thread_id="t2", if_not_exists="create"))).run
    assert _options(bare) == (PERSONA["config"], PERSONA["context"])
    # A later version of the assistant leaves the runs already created as they were.
    await store.update_assistant("a1", context={"tone": "cold"})
    assert _options(await store.get_run(run.run_id)) == merged
    later = (await store.create_run(NewRun("a1", thread_id="t3", if_not_exists="create"))).run
    # (a context given alone is the assistant's configurable too, as on LangGraph's server)
    assert _options(later) == (
        {**PERSONA["config"], "configurable": {"tone": "cold"}},
        {"tone": "cold"},
    )
    # A graph's system assistant has no options: the run's own are kept as given.
    plain = await create(store, thread_id="t4", kwargs=own)
    assert _options(plain) == (own["config"], own["context"])


async def test_an_assistants_configurable_and_context_are_kept_in_step(store: RunStore) -> None:
    """As LangGraph's server keeps them: ``context`` replaced ``configurable`` (LangGraph
    0.6), so one given alone is copied to the other, and a graph reads either."""
    old_style = await store.put_assistant(GRAPH, config={"configurable": {"k": 1}, "tags": ["t"]})
    assert old_style.context == {"k": 1}
    new_style = await store.put_assistant(GRAPH, context={"k": 2})
    assert new_style.config == {"configurable": {"k": 2}}
    both = await store.put_assistant(GRAPH, config={"configurable": {"a": 1}}, context={"b": 2})
    assert (both.config, both.context) == ({"configurable": {"a": 1}}, {"b": 2})
    aid = old_style.assistant_id
    updated = await store.update_assistant(aid, config={"configurable": {"k": 3}})
    assert (updated.config, updated.context) == ({"configurable": {"k": 3}}, {"k": 3})
    updated = await store.update_assistant(aid, config={"tags": ["u"]})
    assert (updated.config, updated.context) == ({"tags": ["u"]}, {"k": 3})
    updated = await store.update_assistant(aid, context={"k": 4})
    assert (updated.config, updated.context) == (
        {"tags": ["u"], "configurable": {"k": 4}},
        {"k": 4},
    )
    run = (await store.create_run(NewRun(aid, thread_id="t", if_not_exists="create"))).run
    assert _options(run) == ({"tags": ["u"], "configurable": {"k": 4}}, {"k": 4})


async def test_a_cron_s_runs_take_its_assistants_options(store: RunStore) -> None:
    await store.put_assistant(GRAPH, assistant_id="a1", **PERSONA)
    cron = await store.create_cron(
        "a1", "* * * * *", payload={"input": {}, "context": {"sig": "C"}}
    )
    later = datetime.now(UTC) + timedelta(minutes=2)
    due = [c for c in await store.due_crons(later) if c.cron_id == cron.cron_id]
    created = await store.fire_cron(due[0], later)
    assert created is not None
    assert _options(created.run) == (PERSONA["config"], {"tone": "warm", "sig": "C"})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"configurable": {"__pregel_checkpointer": 1}}, "key '__pregel_checkpointer' is reserved"),
        ({"configurable": {"model": "a\x00b"}}, r"\['model'\] contains a NUL character"),
        ({"recursion_limit": 0}, "config.recursion_limit must be a whole number >= 1"),
        ({"metadata": [1]}, "config.metadata must be a mapping"),
    ],
)
async def test_an_assistant_config_no_run_may_have_is_refused(
    store: RunStore, config: dict[str, Any], message: str
) -> None:
    """Every run of an assistant starts from its config, so it is checked as a run's is:
    a reserved key would otherwise reach every run through the assistant."""
    with pytest.raises(InvalidRunRequestError, match=message):
        await store.put_assistant(GRAPH, assistant_id="bad", config=config)
    with pytest.raises(AssistantNotFoundError):
        await store.get_assistant("bad")
    await store.put_assistant(GRAPH, assistant_id="good")
    with pytest.raises(InvalidRunRequestError, match=message):
        await store.update_assistant("good", config=config)
    assert (await store.get_assistant("good")).version == 1


async def test_a_caller_chosen_run_id_is_kept_and_may_not_repeat(store: RunStore) -> None:
    run = await create(store, run_id="run-1")
    assert run.run_id == "run-1"
    with pytest.raises(AlreadyExistsError, match="run run-1 already exists"):
        await create(store, thread_id="t2", run_id="run-1")
    assert [r.run_id for r in await store.list_runs()] == ["run-1"]
    with pytest.raises(ThreadNotFoundError):
        await store.get_thread("t2")


# -- multitask strategies (§3.10) -------------------------------------------------------


async def test_reject_raises_thread_busy_and_inserts_nothing(store: RunStore) -> None:
    first = await create(store)
    with pytest.raises(ThreadBusyError, match="Thread is already running a task"):
        await create(store, multitask_strategy="reject")
    assert [r.run_id for r in await store.list_runs()] == [first.run_id]
    # Once nothing is in flight, reject inserts like any other strategy.
    claim = await claim_one(store)
    await store.finish(claim.hold, Outcome("success", "idle"))
    second = await create(store, multitask_strategy="reject")
    assert second.status == "pending"


async def test_enqueue_queues_behind_the_runs_in_flight(store: RunStore) -> None:
    first = await create(store)
    second = await create(store, multitask_strategy="enqueue")
    assert (await store.get_run(first.run_id)).status == "pending"
    claim = await claim_one(store)
    assert claim.run.run_id == first.run_id
    assert await store.claim("w2", graphs=[GRAPH], limit=5, lease=LEASE) == []
    await store.finish(claim.hold, Outcome("success", "idle"))
    assert (await claim_one(store)).run.run_id == second.run_id


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
async def test_interrupt_and_rollback_cancel_a_pending_run_at_once(
    store: RunStore, strategy: Any
) -> None:
    first = await create(store)
    created = await store.create_run(NewRun(GRAPH, thread_id="t1", multitask_strategy=strategy))
    old = await store.get_run(first.run_id)
    reason = f"superseded by run {created.run.run_id} (multitask_strategy={strategy})"
    assert (old.status, old.cancel_action, old.cancel_reason) == ("cancelled", strategy, reason)
    assert created.superseded == (old,)
    assert await kinds(store, first.run_id) == ["run.created", "run.finished"]
    assert (await store.get_thread("t1")).status == "busy"
    assert (await claim_one(store)).run.run_id == created.run.run_id


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
async def test_interrupt_and_rollback_ask_a_running_run_to_stop(
    store: RunStore, strategy: Any
) -> None:
    await create(store)
    running = await claim_one(store)
    created = await store.create_run(NewRun(GRAPH, thread_id="t1", multitask_strategy=strategy))
    old = await store.get_run(running.run.run_id)
    assert (old.status, old.cancel_action) == ("running", strategy)
    assert old.cancel_reason == (
        f"superseded by run {created.run.run_id} (multitask_strategy={strategy})"
    )
    assert created.superseded == (old,)
    [held] = await store.heartbeat("w1", lease=LEASE)
    assert (held.cancel_action, held.cancel_reason) == (strategy, old.cancel_reason)
    assert (await kinds(store, old.run_id))[-1] == "cancel.requested"
    # The new run waits for the thread: the old one still holds it.
    assert await store.claim("w2", graphs=[GRAPH], limit=5, lease=LEASE) == []
    await store.finish(running.hold, Outcome("cancelled", "idle"))
    assert (await claim_one(store, "w2")).run.run_id == created.run.run_id


async def test_a_new_run_continues_an_interrupted_one(store: RunStore) -> None:
    await create(store)
    paused = await claim_one(store)
    await store.finish(paused.hold, Outcome("interrupted", "interrupted"))
    created = await store.create_run(
        NewRun(GRAPH, thread_id="t1", command={"resume": "yes"}, multitask_strategy="reject")
    )
    old = await store.get_run(paused.run.run_id)
    assert (old.status, old.ended_reason) == ("success", f"continued by run {created.run.run_id}")
    assert created.continued == old
    assert (await kinds(store, old.run_id))[-1] == "run.finished"


async def test_a_resume_names_the_runs_whose_execution_it_continues(store: RunStore) -> None:
    """A ``Command(resume=...)`` continues the paused run's execution, and that of the runs
    the paused one itself resumed: its kwargs name them, newest first, so a worker that may
    read only its own run's row still compensates and rolls back all of them. A run given
    new input starts a new execution: it names none."""
    first = (await create(store)).run_id
    resumed: list[str] = []
    for answer in ("yes", "again"):
        paused = await claim_one(store)
        await store.finish(paused.hold, Outcome("interrupted", "interrupted"))
        created = await store.create_run(NewRun(GRAPH, thread_id="t1", command={"resume": answer}))
        resumed.insert(0, paused.run.run_id)
        assert created.run.kwargs["tether_resumed"] == resumed
    assert resumed[-1] == first
    paused = await claim_one(store)
    await store.finish(paused.hold, Outcome("interrupted", "interrupted"))
    fresh = await store.create_run(NewRun(GRAPH, thread_id="t1", input={"q": 1}))
    assert "tether_resumed" not in fresh.run.kwargs
    assert fresh.continued is not None
    assert fresh.continued.run_id == paused.run.run_id


# -- tenants (§3.13) --------------------------------------------------------------------


async def test_another_tenants_run_and_thread_are_not_found(store: RunStore) -> None:
    created = await store.create_run(
        NewRun(GRAPH, thread_id="t1", if_not_exists="create"), tenant="a"
    )
    run = created.run
    assert run.tenant_id == "a"
    with pytest.raises(RunNotFoundError, match=f"no run '{run.run_id}' for this tenant"):
        await store.get_run(run.run_id, tenant="b")
    with pytest.raises(RunNotFoundError):
        await store.cancel_run(run.run_id, tenant="b")
    with pytest.raises(RunNotFoundError):
        await store.events(run.run_id, tenant="b")
    with pytest.raises(RunNotFoundError):
        await store.add_events(run.run_id, [NewEvent("note")], tenant="b")
    with pytest.raises(RunNotFoundError):
        await store.resume_run(run.run_id, {"resume": 1}, tenant="b")
    with pytest.raises(RunNotFoundError):
        await store.get_run(run.run_id)  # the default tenant is a tenant too
    assert await store.list_runs(tenant="b") == []
    assert await store.list_runs(tenant="b", thread_id="t1") == []
    with pytest.raises(ThreadNotFoundError):
        await store.get_thread("t1", tenant="b")
    with pytest.raises(ThreadNotFoundError):
        await store.delete_thread("t1", tenant="b")
    assert await store.list_threads(tenant="b") == []
    # A run on the foreign thread, even with if_not_exists="create", is refused.
    with pytest.raises(ThreadNotFoundError):
        await store.create_run(NewRun(GRAPH, thread_id="t1", if_not_exists="create"), tenant="b")
    # Nothing of tenant a changed.
    assert await store.get_run(run.run_id, tenant="a") == run
    assert [r.run_id for r in await store.list_runs(tenant="a")] == [run.run_id]
    assert await kinds(store, run.run_id, tenant="a") == ["run.created"]


async def test_another_tenants_assistant_is_not_found(store: RunStore) -> None:
    await store.put_assistant(GRAPH, assistant_id="private", tenant="a")
    with pytest.raises(AssistantNotFoundError):
        await store.get_assistant("private", tenant="b")
    with pytest.raises(AssistantNotFoundError):
        await store.create_run(NewRun("private", thread_id="t", if_not_exists="create"), tenant="b")
    # Shared (system) assistants serve every tenant.
    assert (await store.get_assistant(GRAPH, tenant="b")).tenant_id == ""
