"""``tether approvals``: list, show, approve, reject, edit and expire stored approval requests.

Deciding resumes the paused run in this process, so the command needs the
graph that runs the thread: ``--graph module:factory`` names a function taking
the checkpointer and returning the compiled graph (default: ``$TETHER_GRAPH``,
else the demo's refund agent, ``tether.demo.graph:demo_graph``). With
``--runtime``, ``--url`` is a run store: the decision is checked and stored the
same way, and the run's resume is enqueued for whichever ``tether worker`` is
free.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.pregel import Pregel

from tether.approvals import (
    ApprovalRequest,
    Decider,
    DecisionPayload,
    DecisionResult,
    decide_as,
    escape_json,
    escape_text,
    expire_due,
    format_approval,
    format_approval_line,
    get_approval,
    list_approvals,
    resume_decided,
)
from tether.checkpointing import open_checkpointer
from tether.cli._cwd import cwd_first_on_sys_path
from tether.errors import ConfigurationError

if TYPE_CHECKING:
    from tether.runtime import Runtime

__all__ = ["load_graph", "register"]

DEFAULT_GRAPH = "tether.demo.graph:demo_graph"
GRAPH_ENV = "TETHER_GRAPH"


def load_graph(spec: str, checkpointer: BaseCheckpointSaver[Any]) -> Any:
    """Build the graph ``spec`` (``module:factory``) names over ``checkpointer``.

    The module is imported with the current directory first on ``sys.path``.

    Raises:
        ConfigurationError: The spec is malformed, cannot be imported, or does
            not return a compiled graph.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(
            f"--graph {spec!r} must be 'module:factory', e.g. tether.demo.graph:demo_graph"
        )
    cwd_first_on_sys_path()
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(
            f"--graph {spec!r}: cannot import {module_name!r} ({exc})"
        ) from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigurationError(f"--graph {spec!r}: {module_name} has no callable {attr!r}")
    try:
        graph = factory(checkpointer)
    except Exception as exc:
        raise ConfigurationError(
            f"--graph {spec!r}: the factory failed ({type(exc).__name__}: {exc}); it must take "
            "the checkpointer and return the compiled graph"
        ) from exc
    if not isinstance(graph, Pregel):
        raise ConfigurationError(
            f"--graph {spec!r}: the factory returned {type(graph).__name__}, not a compiled graph; "
            "it must take the checkpointer and return builder.compile(checkpointer=...)"
        )
    return graph


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {"key_prefix": args.key_prefix} if args.key_prefix else {}


def _run(
    args: argparse.Namespace, body: Callable[[BaseCheckpointSaver[Any]], Awaitable[int]]
) -> int:
    async def main() -> int:
        async with open_checkpointer(args.url, **_options(args)) as saver:
            return await body(saver)

    return asyncio.run(main())


def _cmd_list(args: argparse.Namespace) -> int:
    async def body(saver: BaseCheckpointSaver[Any]) -> int:
        status = None if args.status == "all" else args.status
        views = await list_approvals(saver, thread_id=args.thread, status=status)
        if args.json:
            listed = [{**v.request.to_dict(), "state": v.status} for v in views]
            print(escape_json(listed, indent=2))
            return 0
        if not views:
            where = f" in thread '{escape_text(args.thread)}'" if args.thread else ""
            print(
                f"no {args.status if args.status != 'all' else ''} approvals{where}".replace(
                    "  ", " "
                )
            )
        for view in views:
            print(format_approval_line(view))
        return 0

    return _run(args, body)


def _cmd_show(args: argparse.Namespace) -> int:
    async def body(saver: BaseCheckpointSaver[Any]) -> int:
        view = await get_approval(saver, args.approval_id)
        if args.json:
            print(
                escape_json(
                    {**view.request.to_dict(), "state": view.status, "decision": view.decision},
                    indent=2,
                )
            )
        else:
            print(format_approval(view, url=args.url))
        return 0

    return _run(args, body)


def _edited(args: argparse.Namespace, original: dict[str, Any]) -> dict[str, Any]:
    if bool(args.set) == bool(args.args_json):
        raise ConfigurationError(
            "edit needs exactly one of --set KEY=VALUE (repeatable) or --args-json JSON"
        )
    if args.args_json:
        try:
            edited = json.loads(args.args_json)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"--args-json is not valid JSON: {exc}") from exc
        if not isinstance(edited, dict):
            raise ConfigurationError("--args-json must be a JSON object of arguments")
        return edited
    edited = dict(original)
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigurationError(
                f"--set {item!r} must be KEY=VALUE, e.g. --set amount_cents=2500"
            )
        if key not in original:
            raise ConfigurationError(
                f"--set {key}: the request has no argument {key!r} (it has {', '.join(original)})"
            )
        try:
            edited[key] = json.loads(raw)
        except json.JSONDecodeError:
            edited[key] = raw
    return edited


def _report(result: DecisionResult, resumed_by: str | None = None) -> None:
    """Print what the decision did.

    Args:
        result: The decision's outcome.
        resumed_by: Who continues the run, when not this process (``--runtime``:
            a worker); by default the run resumed here.
    """
    d = result.decision
    values = result.values
    recorded = (
        f"{escape_text(d['decision'])} recorded for {escape_text(result.approval_id)} by "
        f"{escape_text(d['by'])}"
    )
    if isinstance(values, dict) and "continued_by" in values:  # a compensation, in a runtime
        print(
            f"{recorded}; a worker continues the compensation in run "
            f"{escape_text(values['continued_by'])}"
        )
        return
    print(f"{recorded}; {resumed_by or f'the run resumed in process {os.getpid()}'}")
    if result.pending:
        for payload in result.pending:
            print(
                f"the run now waits on approval {escape_text(payload['approval_id'])} "
                f"({escape_text(payload['action'])})"
            )
    elif result.finished:
        print("the run finished")


async def _waiting_run(rt: Runtime, request: ApprovalRequest) -> str | None:
    """The id of the run of ``rt`` that waits on ``request``, if one does."""
    for run in await rt.list(thread_id=request.thread_id, status="interrupted"):
        if any(w.approval_id == request.approval_id for w in run.waiting_on):
            return run.run_id
    return None


def _worker_resumes(run_id: str | None, thread_id: str) -> str:
    """What ``--runtime`` reports: a worker, not this process, resumes the run."""
    if run_id is None:
        return f"a worker resumes the run of thread {escape_text(thread_id)}"
    return f"a worker resumes run {escape_text(run_id)}"


def _decide_on_runtime(args: argparse.Namespace) -> int:
    """Check and store the decision; the run store enqueues the resume for a worker."""
    from tether.runtime import Runtime

    async def main() -> int:
        async with Runtime(
            args.url, checkpoints_url=args.checkpoints_url, tenant=args.tenant, **_options(args)
        ) as rt:
            view = await get_approval(await rt.checkpointer(), args.approval_id)
            edited = _edited(args, view.request.args) if args.decision == "edit" else None
            waiting = await _waiting_run(rt, view.request)
            result = await rt.decide(
                args.thread,
                args.approval_id,
                args.decision,
                by=args.by,
                roles=args.role or (),
                args_sha256=args.args_sha256,
                edited_args=edited,
                reason=args.reason,
            )
        _report(result, resumed_by=_worker_resumes(waiting, view.request.thread_id))
        return 0

    return asyncio.run(main())


def _compensation_resumer(graph: Any, request: ApprovalRequest) -> Any:
    """A compensation request is decided by continuing the compensation, not the run."""
    from tether.compensation import (
        CompensationResumer,
        compensating_graph,
        is_compensation_request,
    )

    if is_compensation_request(request) and compensating_graph(graph):
        return CompensationResumer(graph)
    return None


def _cmd_decide(args: argparse.Namespace) -> int:
    if args.runtime:
        return _decide_on_runtime(args)

    async def body(saver: BaseCheckpointSaver[Any]) -> int:
        graph = load_graph(args.graph, saver)
        view = await get_approval(saver, args.approval_id)
        edited = _edited(args, view.request.args) if args.decision == "edit" else None
        # --by and --role are taken on trust: whoever can run this command against
        # the database can decide as anyone (see docs/approvals.md, "Decided by whom").
        decider = Decider(args.by, args.role or (), source="cli")
        payload = DecisionPayload(args.decision, args.args_sha256, edited, args.reason)
        resumer = _compensation_resumer(graph, view.request)
        result = await decide_as(
            saver,
            decider,
            args.approval_id,
            payload,
            graph=None if resumer is not None else graph,
            resumer=resumer,
            thread_id=args.thread,
        )
        _report(result)
        return 0

    return _run(args, body)


def _cmd_resume(args: argparse.Namespace) -> int:
    async def body(saver: BaseCheckpointSaver[Any]) -> int:
        result = await resume_decided(saver, args.approval_id, graph=load_graph(args.graph, saver))
        _report(result)
        return 0

    return _run(args, body)


def _cmd_expire(args: argparse.Namespace) -> int:
    now = None
    if args.now:
        try:
            now = datetime.fromisoformat(args.now)
        except ValueError as exc:
            raise ConfigurationError(f"--now {args.now!r} is not an ISO 8601 time: {exc}") from exc
        if now.tzinfo is None:
            raise ConfigurationError("--now needs a time zone, e.g. 2026-12-01T09:00:00+00:00")

    async def body(saver: BaseCheckpointSaver[Any]) -> int:
        actions = await expire_due(saver, load_graph(args.graph, saver), now=now)
        for action in actions:
            print(
                f"{escape_text(action.approval_id)}  {action.outcome:<16}  "
                f"{escape_text(action.detail)}"
            )
        if not actions:
            print("no expired approvals")
        return 0

    return _run(args, body)


def _common(parser: argparse.ArgumentParser, graph: bool = False) -> None:
    parser.add_argument(
        "--url",
        required=True,
        help="checkpointer URL (sqlite:///..., postgresql://..., redis://...)",
    )
    parser.add_argument("--key-prefix", help="Redis key prefix the runs were opened with")
    if graph:
        parser.add_argument(
            "--graph",
            default=os.environ.get(GRAPH_ENV, DEFAULT_GRAPH),
            help="module:factory building the graph from the checkpointer "
            f"(default: ${GRAPH_ENV} or {DEFAULT_GRAPH})",
        )


def register(subparsers: Any) -> None:
    """Add ``tether approvals ...``."""
    parser = subparsers.add_parser(
        "approvals", help="list, show and decide stored approval requests"
    )
    sub = parser.add_subparsers(dest="approvals_command", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="pending approvals of a thread or the whole database")
    _common(p)
    p.add_argument("--thread", help="only this thread")
    p.add_argument(
        "--status",
        default="pending",
        choices=["pending", "approved", "edited", "rejected", "expired", "voided", "all"],
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=_cmd_list)

    p = sub.add_parser("show", help="the whole request, as the approver should see it")
    _common(p)
    p.add_argument("approval_id")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=_cmd_show)

    for decision, text in (
        ("approve", "approve as shown"),
        ("reject", "reject (the agent is told why)"),
        ("edit", "approve with edited arguments"),
    ):
        p = sub.add_parser(decision, help=text)
        _common(p, graph=True)
        p.add_argument("approval_id")
        p.add_argument("--by", required=True, help="who decides")
        p.add_argument("--role", action="append", help="a role the decider holds (repeatable)")
        p.add_argument("--args-sha256", required=True, help="the args_sha256 you were shown")
        p.add_argument(
            "--reason",
            required=decision == "reject",
            help="why (shown to the agent, audited; required to reject)",
        )
        p.add_argument("--thread", help="the thread (checked against the request)")
        p.add_argument(
            "--runtime",
            action="store_true",
            help="--url is a run store whose workers own the run: enqueue its resume for "
            "them instead of running the graph here (--graph is then not used)",
        )
        p.add_argument("--checkpoints-url", help="with --runtime: where checkpoints live")
        p.add_argument("--tenant", default="", help="with --runtime: the run's tenant")
        if decision == "edit":
            p.add_argument(
                "--set",
                action="append",
                default=[],
                metavar="KEY=VALUE",
                help="change one argument (JSON value, else text)",
            )
            p.add_argument("--args-json", help="the full edited arguments as a JSON object")
        p.set_defaults(handler=_cmd_decide, decision=decision)

    p = sub.add_parser(
        "resume",
        help="resume a run whose stored decision was never delivered (the decider died)",
    )
    _common(p, graph=True)
    p.add_argument("approval_id")
    p.set_defaults(handler=_cmd_resume)

    p = sub.add_parser("expire", help="apply the expiry policy of every overdue request")
    _common(p, graph=True)
    p.add_argument("--now", help="the time to expire at (ISO 8601 with zone; default now)")
    p.set_defaults(handler=_cmd_expire)
