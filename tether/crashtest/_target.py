"""What ``tether crashtest MODULE:GRAPH`` runs: the :class:`CrashTarget` protocol.

``MODULE:GRAPH`` names a module attribute that is either a :class:`CrashTarget`
or a function taking no arguments and returning one. A target says how to build
the graph on a given checkpointer and working directory, what input to run it
on, and optionally how to count the effects it had on the outside world and
where its scripted model logs its calls::

    from tether.crashtest import CrashTarget

    def crash_target() -> CrashTarget:
        return CrashTarget(
            build=lambda checkpointer, workdir: build_my_graph(checkpointer, workdir),
            input={"messages": [("user", "refund order A-1001")]},
            effects=lambda workdir: {"refunds": count_refunds(workdir)},
            calls_file="model_calls.log",
        )

Every run (the unkilled reference, each killed run and each resume) gets the
same kind of fresh, empty ``workdir``: a killed run and its resume share one,
exactly as a crashed worker and the worker that takes over share the outside
world.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from tether._messages import message_fingerprint
from tether.errors import TetherError

__all__ = ["CrashTarget", "CrashTestError", "load_target", "normalize_state"]


class CrashTestError(TetherError):
    """The crash harness was given a bad target, URL or option, or could not run."""


def normalize_state(values: Mapping[str, Any]) -> Any:
    """A JSON-ready view of a graph's state, for comparing runs.

    Message ids that storage assigns at random (``add_messages`` gives tool
    results a fresh UUID) are left out; everything a model or tool produced is
    kept, including token usage.
    """

    def convert(value: Any) -> Any:
        if isinstance(value, BaseMessage):
            data = message_fingerprint(value)
            if isinstance(value, AIMessage) and value.usage_metadata:
                data["usage_metadata"] = dict(value.usage_metadata)
            return data
        if isinstance(value, Mapping):
            return {str(k): convert(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [convert(v) for v in value]
        return value

    # A JSON round trip turns what is left (dataclasses, enums) into plain values.
    return json.loads(json.dumps(convert(values), sort_keys=True, default=repr))


@dataclass(frozen=True)
class CrashTarget:
    """A graph the crash harness can build, run, kill and resume.

    Attributes:
        build: ``build(checkpointer, workdir)`` returns the compiled graph. It
            must use the checkpointer it is given (the harness wraps the real
            one to add crash points) and keep every outside-world file under
            ``workdir``.
        input: The graph input of the run.
        effects: ``effects(workdir)`` counts the effects the run had on the
            outside world, by kind (``{"refunds": 1, "emails": 1}``). A crashed
            run with more of a kind than the unkilled run has duplicate effects.
        calls_file: Where, relative to ``workdir``, a
            :class:`~tether.graphs.ScriptedChatModel` logs its calls; used to
            count re-asked model calls. ``None`` if the target has none.
        answer: For graphs that stop at ``interrupt()``: maps an interrupt's
            value to the resume value. Without it such a graph is an error.
        normalize: Turns the final state values into what is compared.
        durability: LangGraph durability mode of every run. ``"sync"`` makes
            the order of checkpoint writes, and so the boundaries, deterministic.
        thread_id: The thread the run uses.
        compensate: The graph is made with
            :func:`tether.compensation.compensating` and its run fails: each
            process compensates it (``tether.compensation.compensate``) after the
            failure, and the run is finished when nothing waits on a person.
            The compensation's boundaries are killed like any other.
        compensations: Effect kinds (keys of ``effects``) that compensations
            make; fewer of them than the unkilled run made are *missing
            compensations*.
    """

    build: Callable[[BaseCheckpointSaver[Any], Path], Any]
    input: Any
    effects: Callable[[Path], Mapping[str, int]] | None = None
    calls_file: str | None = None
    answer: Callable[[Any], Any] | None = None
    normalize: Callable[[Mapping[str, Any]], Any] = normalize_state
    durability: Literal["sync", "async", "exit"] = "sync"
    thread_id: str = "crashtest"
    compensate: bool = False
    compensations: tuple[str, ...] = ()


def load_target(spec: str) -> CrashTarget:
    """Import ``MODULE:ATTR`` and return the :class:`CrashTarget` it names.

    Raises:
        CrashTestError: The spec is malformed, the module or attribute is
            missing, or the attribute is not (and does not return) a CrashTarget.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CrashTestError(
            f"crash target {spec!r} must be written MODULE:ATTR, for example "
            "tether.graphs.refund:crash_target"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise CrashTestError(
            f"cannot import module {module_name!r} of crash target {spec!r}: {exc}; "
            "check the name and that its directory is on PYTHONPATH"
        ) from exc
    try:
        found = getattr(module, attr)
    except AttributeError:
        raise CrashTestError(
            f"module {module_name!r} has no attribute {attr!r} (crash target {spec!r})"
        ) from None
    target = found() if callable(found) and not isinstance(found, CrashTarget) else found
    if not isinstance(target, CrashTarget):
        raise CrashTestError(
            f"crash target {spec!r} is a {type(target).__name__}, not a CrashTarget; point it "
            "at a CrashTarget or a function with no arguments that returns one"
        )
    return target
