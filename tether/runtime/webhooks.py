"""Webhooks: when a run ends, its outcome is POSTed to the URL its creator gave.

As on LangGraph's server, a run (or a cron) created with ``webhook`` gets one
POST of JSON when it ends (success, interrupted, error, timeout or a cancel
that kept the thread): the run as the API shows it, with ``status``,
``run_started_at``, ``run_ended_at``, ``webhook_sent_at``, the thread's
``values`` and, if the run failed, ``error``. The worker that wrote the
run's outcome sends it, after the outcome is committed, and tries up to three
times (a connection error or a 5xx; 1 s and 2 s apart). Delivery is at most
once per worker outcome: a worker killed between the outcome and the POST
sends nothing (LangGraph's server behaves the same).

A webhook URL is a request to make this server call an address, so it is
checked as LangGraph's server checks it (``webhooks.url`` in
``langgraph.json``: ``allowed_domains`` with ``*.`` wildcards,
``allowed_ports``, ``require_https``, ``disable_loopback`` (default true),
``disable_private_ips``, ``max_url_length``), when the run is created (a
clear 422) and again before sending (the name may resolve elsewhere by
then). Link-local, multicast and unspecified addresses (cloud metadata
services among them) are always refused; redirects are not followed.
``webhooks.headers`` are sent with every POST (a value may read
``${{ env.NAME }}``); ``webhooks.allowed_fields`` trims the payload;
``http.disable_webhooks`` turns sending off.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from tether.runtime.errors import ProjectConfigError

__all__ = [
    "WebhookPolicy",
    "WebhookRefusedError",
    "WebhookSender",
    "url_form",
    "webhook_payload",
]

log = logging.getLogger(__name__)

_ATTEMPTS = 3
_TIMEOUT_S = 10.0
_ENV_TEMPLATE = re.compile(r"\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_POLICY_KEYS = {
    "allowed_domains",
    "allowed_ports",
    "max_url_length",
    "require_https",
    "disable_loopback",
    "disable_private_ips",
}


class WebhookRefusedError(ValueError):
    """A webhook URL this server will not call; the message says why."""


def _section(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ProjectConfigError(f"{key} must be an object, got {value!r}")
    return value


def _bool(section: Mapping[str, Any], key: str, default: bool) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ProjectConfigError(f"webhooks.url.{key} must be true or false, got {value!r}")
    return value


def _strings(section: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = section.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ProjectConfigError(f"{where}.{key} must be a list of strings, got {value!r}")
    return tuple(value)


def _expand(value: str) -> str:
    def env(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise ProjectConfigError(f"webhooks.headers reads env.{name}, which is not set")
        return os.environ[name]

    return _ENV_TEMPLATE.sub(env, value)


def url_form(url: object) -> tuple[str, str, int]:
    """Refuse what no policy accepts: not an absolute http(s) URL with a host and no
    credentials. Its scheme, host and port (the scheme's default if none is given)."""
    if not isinstance(url, str) or not url:
        raise WebhookRefusedError(f"webhook must be a URL string, got {url!r}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebhookRefusedError(f"webhook {url!r} is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise WebhookRefusedError(
            f"webhook {url!r} must be an absolute http(s) URL (relative and other "
            "schemes are refused)"
        )
    host = (parts.hostname or "").lower()
    if not host:
        raise WebhookRefusedError(f"webhook {url!r} has no host")
    if parts.username is not None or parts.password is not None:
        raise WebhookRefusedError("webhook URL must not carry credentials; use webhooks.headers")
    return scheme, host, port if port is not None else (443 if scheme == "https" else 80)


@dataclass(frozen=True)
class WebhookPolicy:
    """Which webhook URLs are called, and how (``webhooks`` in ``langgraph.json``)."""

    allowed_domains: tuple[str, ...] = ()
    allowed_ports: tuple[int, ...] = ()
    max_url_length: int = 4096
    require_https: bool = False
    disable_loopback: bool = True
    disable_private_ips: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    allowed_fields: frozenset[str] = frozenset()
    disabled: bool = False

    @classmethod
    def from_project(cls, raw: Mapping[str, Any]) -> WebhookPolicy:
        """The policy a ``langgraph.json`` sets; a malformed one raises ``ProjectConfigError``."""
        webhooks = _section(raw, "webhooks")
        unknown = set(webhooks) - {"url", "headers", "allowed_fields"}
        if unknown:
            raise ProjectConfigError(f"webhooks has unknown keys {sorted(unknown)}")
        url = _section(webhooks, "url")
        unknown = set(url) - _POLICY_KEYS
        if unknown:
            raise ProjectConfigError(f"webhooks.url has unknown keys {sorted(unknown)}")
        ports = url.get("allowed_ports", [])
        if not isinstance(ports, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports
        ):
            raise ProjectConfigError(
                f"webhooks.url.allowed_ports must be a list of ports, got {ports!r}"
            )
        length = url.get("max_url_length", 4096)
        if not isinstance(length, int) or isinstance(length, bool) or length < 1:
            raise ProjectConfigError(
                f"webhooks.url.max_url_length must be a positive integer, got {length!r}"
            )
        headers = _section(webhooks, "headers")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
            raise ProjectConfigError(f"webhooks.headers must map names to strings: {headers!r}")
        disabled = _section(raw, "http").get("disable_webhooks", False)
        if not isinstance(disabled, bool):
            raise ProjectConfigError(f"http.disable_webhooks must be true or false: {disabled!r}")
        return cls(
            allowed_domains=tuple(
                d.strip().lower() for d in _strings(url, "allowed_domains", "webhooks.url")
            ),
            allowed_ports=tuple(ports),
            max_url_length=length,
            require_https=_bool(url, "require_https", False),
            disable_loopback=_bool(url, "disable_loopback", True),
            disable_private_ips=_bool(url, "disable_private_ips", False),
            headers={k: _expand(v) for k, v in headers.items()},
            allowed_fields=frozenset(_strings(webhooks, "allowed_fields", "webhooks")),
            disabled=disabled,
        )

    def _listed(self, host: str) -> bool:
        return any(
            host == d or (d.startswith("*.") and host.endswith(d[1:])) for d in self.allowed_domains
        )

    def check(self, url: object) -> tuple[str, int]:
        """Refuse a malformed or disallowed URL (no lookup); its host and port."""
        if isinstance(url, str) and len(url) > self.max_url_length:
            raise WebhookRefusedError(
                f"webhook URL is {len(url)} characters; at most {self.max_url_length}"
            )
        scheme, host, port = url_form(url)
        if self.require_https and scheme != "https":
            raise WebhookRefusedError(f"webhook {url!r} must use https")
        if self.allowed_ports and port not in self.allowed_ports:
            raise WebhookRefusedError(f"webhook port {port} is not allowed")
        if self.allowed_domains and not self._listed(host):
            raise WebhookRefusedError(
                f"webhook host {host!r} is not in webhooks.url.allowed_domains"
            )
        return host, port

    def _address_problem(self, host: str, address: str) -> str | None:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        listed = host in self.allowed_domains
        if ip.is_loopback:
            if self.disable_loopback and not listed:
                return "a loopback address (set webhooks.url.disable_loopback to false to allow it)"
            return None
        if ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved:
            return "a link-local, multicast or reserved address"
        if ip.is_private and self.disable_private_ips and not listed:
            return "a private address (webhooks.url.disable_private_ips is set)"
        return None

    async def check_resolved(self, url: object) -> None:
        """:meth:`check`, then refuse a host that resolves to an address not allowed."""
        host, port = self.check(url)
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise WebhookRefusedError(f"webhook host {host!r} does not resolve: {exc}") from None
        for info in infos:
            problem = self._address_problem(host, str(info[4][0]))
            if problem is not None:
                raise WebhookRefusedError(f"webhook host {host!r} resolves to {problem}")


def webhook_payload(
    run: Mapping[str, Any],
    *,
    values: Any,
    started_at: datetime | None,
    ended_at: datetime | None,
    error: Any = None,
    allowed_fields: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """What LangGraph's server POSTs for a run that ended: the run, its times, its values."""
    payload: dict[str, Any] = {
        **run,
        "run_started_at": started_at.isoformat() if started_at else None,
        "run_ended_at": ended_at.isoformat() if ended_at else None,
        "webhook_sent_at": datetime.now(UTC).isoformat(),
        "values": values,
    }
    if error is not None:
        payload["error"] = error
    if allowed_fields:
        payload = {k: v for k, v in payload.items() if k in allowed_fields}
    return payload


class WebhookSender:
    """Sends webhooks in the background; :meth:`aclose` waits for those under way."""

    def __init__(self, policy: WebhookPolicy, *, retry_delay: float = 1.0) -> None:
        self.policy = policy
        self.retry_delay = retry_delay
        self._tasks: set[asyncio.Task[None]] = set()

    def send(self, url: str, payload: Mapping[str, Any], *, run_id: str) -> None:
        """Start sending ``payload`` to ``url`` (unless webhooks are turned off)."""
        if self.policy.disabled:
            log.info("run %s: webhooks are disabled (http.disable_webhooks)", run_id)
            return
        task = asyncio.create_task(self._deliver(url, dict(payload), run_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, url: str, payload: dict[str, Any], run_id: str) -> None:
        import httpx

        try:
            await self.policy.check_resolved(url)
        except WebhookRefusedError as refused:
            log.warning("run %s: webhook not sent: %s", run_id, refused)
            return
        async with httpx.AsyncClient(timeout=_TIMEOUT_S, follow_redirects=False) as client:
            for attempt in range(1, _ATTEMPTS + 1):
                try:
                    response = await client.post(
                        url, json=payload, headers=dict(self.policy.headers)
                    )
                    if response.status_code < 500:
                        if response.status_code >= 400:
                            log.warning(
                                "run %s: webhook %s answered %d", run_id, url, response.status_code
                            )
                        return
                    problem = f"answered {response.status_code}"
                except httpx.HTTPError as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                if attempt < _ATTEMPTS:
                    await asyncio.sleep(self.retry_delay * 2 ** (attempt - 1))
            log.warning("run %s: webhook %s failed %d times: %s", run_id, url, _ATTEMPTS, problem)

    async def aclose(self, grace: float = 10.0) -> None:
        """Wait up to ``grace`` seconds for webhooks under way, then cancel the rest."""
        if not self._tasks:
            return
        pending = set(self._tasks)
        _, late = await asyncio.wait(pending, timeout=grace)
        for task in late:
            task.cancel()
        for task in late:
            with contextlib.suppress(asyncio.CancelledError):
                await task
