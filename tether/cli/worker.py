"""``tether worker``: execute the runs of a ``langgraph.json`` project from a run store."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``tether worker``."""
    parser = subparsers.add_parser(
        "worker",
        help="claim and execute runs of a langgraph.json project",
        description=(
            "Claims pending runs of the graphs named in langgraph.json, executes them under "
            "a lease (another worker takes a run over within seconds if this process dies), "
            "and hands them back on SIGTERM."
        ),
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("TETHER_URL"),
        help="run store: postgresql://… or sqlite:///path (default $TETHER_URL)",
    )
    parser.add_argument("--config", default="langgraph.json", help="the project's langgraph.json")
    parser.add_argument("--checkpoints-url", help="where checkpoints live (default: --url)")
    parser.add_argument("--concurrency", type=int, default=10, help="runs executed at once")
    parser.add_argument("--lease", type=float, default=2.0, help="lease in seconds")
    parser.add_argument(
        "--shutdown-grace",
        type=float,
        default=30.0,
        help="seconds held runs get to reach a boundary on SIGTERM",
    )
    parser.add_argument(
        "--step-timeout",
        type=_seconds,
        help="seconds one step of a run may take, for runs created without a step_timeout",
    )
    parser.add_argument("--worker-id", help="this worker's id (default host:pid:random)")
    parser.add_argument(
        "--no-scheduler",
        dest="scheduler",
        action="store_false",
        help="do not campaign to lead the scheduler (approval expiry, deadlines, crons); "
        "by default one worker per run store leads it",
    )
    parser.add_argument(
        "--retention",
        metavar="FILE",
        help='a tether.json whose "retention" section the scheduler applies (default: the '
        "tether.json beside --config, if it has one)",
    )
    parser.add_argument(
        "--no-retention",
        dest="no_retention",
        action="store_true",
        help="do not run the retention sweep, whatever tether.json says",
    )
    parser.set_defaults(handler=_worker)


def _seconds(text: str) -> float:
    """A positive number of seconds, or argparse's error naming the bad value."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}")
    return value


def _worker(args: argparse.Namespace) -> int:
    from tether.cli._event_loop import run
    from tether.runtime import Worker

    if not args.url:
        print("tether: error: --url (or $TETHER_URL) is required", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    worker = Worker(
        args.url,
        args.config,
        checkpoints_url=args.checkpoints_url,
        concurrency=args.concurrency,
        lease=args.lease,
        shutdown_grace=args.shutdown_grace,
        step_timeout=args.step_timeout,
        worker_id=args.worker_id,
        scheduler=args.scheduler,
        retention=_retention(args),
    )
    run(worker.run(handle_signals=True))
    return 0


def _retention(args: argparse.Namespace) -> Any:
    """The scheduler's retention job from --retention or the project's tether.json."""
    from tether.retention import load_policy, project_policy, scheduled_sweep

    if args.no_retention:
        return None
    policy = load_policy(args.retention) if args.retention else project_policy(args.config)
    if policy is None:
        return None
    logging.getLogger("tether.retention").info(
        "retention: %d rules, swept every %s", len(policy.rules), policy.every
    )
    return scheduled_sweep(policy)
