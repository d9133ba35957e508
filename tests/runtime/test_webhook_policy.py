"""The webhook URL policy: what ``langgraph.json``'s ``webhooks`` allows; what is always refused."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from tether.runtime.errors import ProjectConfigError
from tether.runtime.webhooks import (
    WebhookPolicy,
    WebhookRefusedError,
    WebhookSender,
    webhook_payload,
)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"webhooks": []}, "webhooks must be an object"),
        ({"webhooks": {"urls": {}}}, "unknown keys ['urls']"),
        ({"webhooks": {"url": {"allow": []}}}, "webhooks.url has unknown keys ['allow']"),
        ({"webhooks": {"url": {"allowed_ports": [0]}}}, "allowed_ports must be a list of ports"),
        ({"webhooks": {"url": {"allowed_ports": "443"}}}, "allowed_ports must be a list"),
        ({"webhooks": {"url": {"max_url_length": 0}}}, "max_url_length must be a positive"),
        ({"webhooks": {"url": {"require_https": "yes"}}}, "require_https must be true or false"),
        ({"webhooks": {"url": {"allowed_domains": [""]}}}, "allowed_domains must be a list"),
        ({"webhooks": {"headers": {"X": 1}}}, "webhooks.headers must map names to strings"),
        ({"webhooks": {"headers": {"X": "${{ env.TETHER_NOT_SET_ANYWHERE }}"}}}, "not set"),
        ({"http": {"disable_webhooks": 1}}, "http.disable_webhooks must be true or false"),
    ],
)
def test_a_malformed_policy_is_refused_naming_the_key(raw: dict[str, Any], problem: str) -> None:
    with pytest.raises(ProjectConfigError) as caught:
        WebhookPolicy.from_project(raw)
    assert problem in str(caught.value)


def test_a_policy_reads_every_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_TOKEN", "s3cret")
    policy = WebhookPolicy.from_project(
        {
            "webhooks": {
                "url": {
                    "allowed_domains": ["Hooks.Example.com", "*.corp.example"],
                    "allowed_ports": [443],
                    "require_https": True,
                    "disable_loopback": False,
                    "disable_private_ips": True,
                    "max_url_length": 100,
                },
                "headers": {"Authorization": "Bearer ${{ env.HOOK_TOKEN }}"},
                "allowed_fields": ["run_id", "status"],
            },
            "http": {"disable_webhooks": True},
        }
    )
    assert policy.allowed_domains == ("hooks.example.com", "*.corp.example")
    assert policy.headers == {"Authorization": "Bearer s3cret"}
    assert (policy.require_https, policy.disable_loopback, policy.disable_private_ips) == (
        True,
        False,
        True,
    )
    assert policy.allowed_fields == {"run_id", "status"}
    assert policy.disabled
    assert policy.check("https://a.corp.example/x") == ("a.corp.example", 443)
    assert policy.check("https://hooks.example.com/x") == ("hooks.example.com", 443)
    for url, problem in [
        ("http://hooks.example.com/x", "must use https"),
        ("https://hooks.example.com:8443/x", "port 8443 is not allowed"),
        ("https://evil.example/x", "not in webhooks.url.allowed_domains"),
        ("https://corp.example.evil/x", "not in webhooks.url.allowed_domains"),
        ("https://hooks.example.com/" + "x" * 100, "at most 100"),
    ]:
        with pytest.raises(WebhookRefusedError) as caught:
            policy.check(url)
        assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("/threads", "absolute http(s) URL"),
        ("file:///etc/passwd", "absolute http(s) URL"),
        ("gopher://example.com/", "absolute http(s) URL"),
        ("http:///nohost", "has no host"),
        ("http://user:pw@example.com/", "must not carry credentials"),
        ("http://example.com:99999/", "is not a URL"),
        ("", "must be a URL string"),
        (42, "must be a URL string"),
    ],
)
def test_a_malformed_url_is_refused(url: object, problem: str) -> None:
    with pytest.raises(WebhookRefusedError) as caught:
        WebhookPolicy().check(url)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("policy", "url", "problem"),
    [
        (WebhookPolicy(), "http://127.0.0.1:9/hook", "loopback"),
        (WebhookPolicy(), "http://localhost:9/hook", "loopback"),
        (WebhookPolicy(), "http://[::1]:9/hook", "loopback"),
        (WebhookPolicy(disable_loopback=False), "http://169.254.169.254/latest", "link-local"),
        (WebhookPolicy(disable_loopback=False), "http://[fe80::1]/x", "link-local"),
        (WebhookPolicy(disable_loopback=False), "http://0.0.0.0:9/x", "link-local"),
        (WebhookPolicy(disable_private_ips=True), "http://10.1.2.3/x", "private"),
        (WebhookPolicy(disable_private_ips=True), "http://192.168.1.1/x", "private"),
        (WebhookPolicy(), "http://no-such-host.invalid/x", "does not resolve"),
    ],
)
async def test_an_address_not_allowed_is_refused(
    policy: WebhookPolicy, url: str, problem: str
) -> None:
    with pytest.raises(WebhookRefusedError) as caught:
        await policy.check_resolved(url)
    assert problem in str(caught.value)


async def test_allowed_addresses_pass() -> None:
    await WebhookPolicy(disable_loopback=False).check_resolved("http://127.0.0.1:9/hook")
    await WebhookPolicy().check_resolved("http://10.1.2.3/x")  # private is allowed by default
    # A host named in allowed_domains may be loopback even when loopback is off.
    await WebhookPolicy(allowed_domains=("localhost",)).check_resolved("http://localhost:9/")


def test_the_payload_is_the_run_with_its_times_and_values() -> None:
    run = {"run_id": "r", "status": "success", "kwargs": {}}
    full = webhook_payload(run, values={"a": 1}, started_at=None, ended_at=None, error={"e": 1})
    assert full["run_id"] == "r"
    assert full["values"] == {"a": 1}
    assert full["error"] == {"e": 1}
    assert {"run_started_at", "run_ended_at", "webhook_sent_at"} <= set(full)
    trimmed = webhook_payload(
        run, values=1, started_at=None, ended_at=None, allowed_fields=frozenset({"run_id"})
    )
    assert trimmed == {"run_id": "r"}


class _Flaky(BaseHTTPRequestHandler):
    """Answers 500 to the first two POSTs of each path, then 204."""

    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append(self.path)
        self.send_response(500 if self.seen.count(self.path) <= 2 else 204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


async def test_a_5xx_is_tried_again_and_a_refused_or_disabled_one_never_sent(flaky: str) -> None:
    sender = WebhookSender(WebhookPolicy(disable_loopback=False), retry_delay=0.01)
    sender.send(f"{flaky}/a", {"run_id": "r"}, run_id="r")
    await sender.aclose()
    assert _Flaky.seen.count("/a") == 3  # 500, 500, 204
    for policy in (WebhookPolicy(), WebhookPolicy(disable_loopback=False, disabled=True)):
        sender = WebhookSender(policy, retry_delay=0.01)
        sender.send(f"{flaky}/b", {"run_id": "r"}, run_id="r")
        await sender.aclose()
    assert "/b" not in _Flaky.seen
