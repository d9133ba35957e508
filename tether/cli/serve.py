"""``tether serve``: the LangGraph Agent Server API for a ``langgraph.json`` project."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
from typing import Any

from tether.errors import MissingDependencyError

__all__ = ["register"]

DEFAULT_STORE = ".tether/serve.db"


def register(subparsers: Any) -> None:
    """Add ``tether serve``."""
    parser = subparsers.add_parser(
        "serve",
        help="serve the LangGraph Agent Server API (langgraph_sdk clients work unchanged)",
        description=(
            "Serves assistants, threads, runs and run streams as LangGraph's Agent Server "
            "does, over tether's runtime. Without --url the run store is a SQLite file "
            f"({DEFAULT_STORE} next to langgraph.json) and the runs execute in this process."
        ),
    )
    parser.add_argument("--config", default="langgraph.json", help="the project's langgraph.json")
    parser.add_argument(
        "--url",
        default=os.environ.get("TETHER_URL"),
        help=(
            "run store: postgresql://… or sqlite:///path (default $TETHER_URL, else "
            f"sqlite:///<project>/{DEFAULT_STORE})"
        ),
    )
    parser.add_argument("--checkpoints-url", help="where checkpoints live (default: --url)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=2024, help="port to listen on")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="in-process workers executing runs (0: leave runs to `tether worker` processes)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=10, help="runs each worker executes at once"
    )
    parser.add_argument("--lease", type=float, default=2.0, help="worker lease in seconds")
    parser.add_argument(
        "--shutdown-grace",
        type=float,
        default=30.0,
        help="on SIGTERM, seconds in-process runs get to reach a step boundary and hand back",
    )
    parser.add_argument(
        "--max-body-mb",
        type=float,
        default=32.0,
        help="the largest request body taken, in MiB; a larger one is refused (413)",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help=(
            "local development only: no authentication, every API request acts for the "
            "default tenant and the approvals inbox trusts the user a request names "
            "(x-tether-user header, or its login form); without it: the project's auth.path, "
            "else API keys from `tether apikeys`"
        ),
    )
    parser.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from tether.server import create_app
    except MissingDependencyError as exc:  # it names its own extra
        print(f"tether: error: tether serve: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(
            f"tether: error: tether serve needs the server extra ({exc.name or exc} is "
            "missing): pip install 'tether[server]'",
            file=sys.stderr,
        )
        return 2
    from tether.runtime import Runtime
    from tether.runtime import project as projects

    problem = _bad_option(args)
    if problem is not None:
        print(f"tether: error: {problem}", file=sys.stderr)
        return 2
    project = projects.Project.load(args.config, apply_env=True)
    url = args.url
    if not url:
        store = project.root / DEFAULT_STORE
        store.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{store}"
    asyncio.run(_check_store(url))  # a bad URL or an unreachable database: one clear line
    auth = _auth_mode(args, project, url)
    if auth is None:
        return 2
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(message)s", stream=sys.stderr
    )
    runtime = Runtime(url, checkpoints_url=args.checkpoints_url)
    app = create_app(
        runtime,
        project,
        workers=args.workers,
        worker_options={
            "concurrency": args.concurrency,
            "lease": args.lease,
            "shutdown_grace": args.shutdown_grace,
        },
        no_auth=args.no_auth,
        max_body_bytes=int(args.max_body_mb * 2**20),
    )
    # The address before the app starts: one in use is refused before any worker starts
    # or registers (the app's lifespan starts them).
    listening = _listen(args.host, args.port)
    if listening is None:
        return 1
    print(
        f"tether serve: graphs {', '.join(project.graph_ids)}; run store {_shown(url)}; "
        f"{args.workers} in-process worker(s); {auth}; http://{args.host}:{args.port}",
        file=sys.stderr,
        flush=True,
    )
    # On SIGTERM the in-process workers stop first, handing their runs back at the
    # next step; open streams (which follow those runs) are closed after a short wait.
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        # uvloop and httptools when installed (the server extra installs both).
        loop="auto",
        http="auto",
        timeout_graceful_shutdown=min(5.0, args.shutdown_grace),
    )
    _server_class()(config, app).run(sockets=[listening])
    return 0


def _listen(host: str, port: int) -> socket.socket | None:
    """A socket bound to ``host:port`` for uvicorn, or ``None`` after saying why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        print(f"tether: error: cannot listen on {host}:{port}: {exc.strerror}", file=sys.stderr)
        return None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        print(
            f"tether: error: cannot listen on {host}:{port}: {exc.strerror or exc} "
            "(another server there? choose one with --port)",
            file=sys.stderr,
        )
        return None
    sock.set_inheritable(True)
    return sock


def _bad_option(args: argparse.Namespace) -> str | None:
    """What is wrong with the command's numbers, if anything."""
    if args.workers < 0:
        return f"--workers must be 0 or more, not {args.workers}"
    if not args.max_body_mb > 0 or args.max_body_mb * 2**20 > 2**62:
        return f"--max-body-mb must be a positive size, not {args.max_body_mb}"
    return None


def _auth_mode(args: argparse.Namespace, project: Any, url: str) -> str | None:
    """How requests are authenticated; ``None`` (after saying why) when nothing would
    let a request in: no ``auth.path``, no API key and no ``--no-auth``."""
    if args.no_auth:
        print(
            "tether serve: WARNING: --no-auth: requests are not authenticated and all act "
            "for the default tenant; use it for local development only",
            file=sys.stderr,
        )
        return "no authentication (--no-auth)"
    if project.auth_ref is not None:
        return f"auth {project.auth_ref.spec}"
    if asyncio.run(_active_keys(url)) == 0:
        print(
            "tether: error: no authentication configured: langgraph.json has no auth.path "
            "and the run store has no API key. Create a key with `tether apikeys create "
            f"--url {_shown(url)} --user USER --tenant TENANT`, or pass --no-auth for "
            "local development",
            file=sys.stderr,
        )
        return None
    return "API keys"


async def _active_keys(url: str) -> int:
    from tether.server import apikeys

    async with apikeys.open_key_store(url) as keys:
        return await keys.count_active()


async def _check_store(url: str) -> None:
    """Open the run store once (and migrate it) before serving."""
    from tether.runtime import Runtime

    async with Runtime(url):
        pass


def _server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, stopping the app's workers as soon as a signal arrives."""

        def __init__(self, config: uvicorn.Config, app: Any) -> None:
            super().__init__(config)
            self.tether_app = app

        def handle_exit(self, sig: int, frame: Any) -> None:
            self.tether_app.stop_workers()
            super().handle_exit(sig, frame)

    return Server


def _shown(url: str) -> str:
    from tether.checkpointing import redact

    return str(redact(url))
