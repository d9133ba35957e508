"""Parsing of checkpointer URLs into a backend name and its connection target."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tether.errors import ConfigurationError

__all__ = ["SCHEMES", "CheckpointerURL", "parse_url", "redact"]

# scheme -> backend module name
SCHEMES: dict[str, str] = {
    "memory": "memory",
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "postgres": "postgres",
    "redis": "redis",
    "rediss": "redis",
}

_EXAMPLES = (
    "memory://, sqlite:///path/to/file.db, postgresql://user@host:5432/db, redis://host:6379"
)


@dataclass(frozen=True)
class CheckpointerURL:
    """A validated checkpointer URL."""

    url: str
    backend: str
    host: str | None
    port: int | None
    path: str

    @property
    def where(self) -> str:
        """``host:port`` for network backends, the path for files."""
        if self.host is not None:
            return f"{self.host}:{self.port}" if self.port else self.host
        return self.path

    @property
    def sqlite_path(self) -> str:
        """The SQLite database file (``:memory:`` for an in-memory database)."""
        return self.path


# Query parameters whose value is a secret (libpq's password and sslpassword,
# redis-py's password, tokens and keys of other drivers), matched case-insensitively.
_SECRET_PARAM = re.compile(
    r"(?i)([?&;](?:[^=&;#]*(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|credential|auth)"
    r"[^=&;#]*)=)[^&;#]*"
)


_AUTHORITY = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)")


def redact(url: str) -> str:
    """The URL with every secret replaced by ``***``, for error messages.

    Hides the password in the user part (``user:***@host``) and the value of
    every query parameter named like a secret (``?password=***``,
    ``sslpassword``, ``token``, ``api_key``, ...).
    """
    # String surgery rather than urlsplit(...).geturl(), which rewrites what it
    # does not understand (postgresql:///db loses a slash).
    authority = _AUTHORITY.match(url)
    if authority:
        userinfo, at, host = authority.group(2).rpartition("@")
        if at and ":" in userinfo:
            user = userinfo.partition(":")[0]
            url = f"{authority.group(1)}{user}:***@{host}{url[authority.end() :]}"
    return _SECRET_PARAM.sub(r"\1***", url)


def parse_url(url: str) -> CheckpointerURL:
    """Validate ``url`` and say which backend serves it.

    Raises:
        ConfigurationError: The URL is empty, has no scheme, an unknown scheme,
            or lacks the part its backend needs.
    """
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError(
            f"a checkpointer URL must be a non-empty string, got {url!r}; try one of {_EXAMPLES}"
        )
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if not scheme:
        raise ConfigurationError(
            f"checkpointer URL {redact(url)!r} has no scheme; try one of {_EXAMPLES}"
        )
    backend = SCHEMES.get(scheme)
    if backend is None:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise ConfigurationError(
            f"unknown checkpointer URL scheme {scheme!r} in {redact(url)!r}; "
            f"supported schemes are {known}"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigurationError(f"checkpointer URL {redact(url)!r} has a bad port: {exc}") from exc
    path = parts.path
    if backend == "sqlite":
        path = _sqlite_path(url, parts.netloc, parts.path)
    elif backend in {"postgres", "redis"} and not parts.hostname and "host=" not in parts.query:
        raise ConfigurationError(
            f"checkpointer URL {redact(url)!r} names no host; "
            f"write it as {scheme}://host:port{'/dbname' if backend == 'postgres' else ''}"
        )
    host = parts.hostname if backend in {"postgres", "redis"} else None
    default_port = {"postgres": 5432, "redis": 6379}.get(backend)
    return CheckpointerURL(
        url=url,
        backend=backend,
        host=host,
        port=port or (default_port if host else None),
        path=path,
    )


def _sqlite_path(url: str, netloc: str, path: str) -> str:
    # sqlite:///relative.db -> "relative.db"; sqlite:////abs/file.db -> "/abs/file.db";
    # sqlite:///:memory: -> ":memory:" (the SQLAlchemy convention).
    if netloc:
        raise ConfigurationError(
            f"SQLite URL {url!r} has a host part ({netloc!r}); write sqlite:///relative.db "
            "or sqlite:////absolute/path.db"
        )
    file = path[1:] if path.startswith("/") else path
    if not file:
        raise ConfigurationError(
            f"SQLite URL {url!r} names no database file; write sqlite:///path/to/file.db"
        )
    if file != ":memory:":
        parent = Path(file).expanduser().parent
        if not parent.exists():
            raise ConfigurationError(
                f"SQLite database {file!r}: directory {str(parent)!r} does not exist; create it "
                "first"
            )
    return file
