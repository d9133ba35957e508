"""The inbox in a real headless Chromium, on a server with API keys: log in with a key, see a
pending refund, edit the amount, the run finishes with it.

The browser is Debian's ``chromium`` (``scripts/test`` installs it), driven by
Playwright for Python with ``executable_path`` (Playwright's own browser
download is never used). Without the browser the test is skipped, and under
``CI=true`` it fails instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client

from tests.server.conftest import ServeProcess
from tests.server.inbox import PROJECT
from tests.server.test_apikeys import new_key

CHROMIUM_NAMES = ("chromium", "chromium-browser")


def _chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    problem = "Debian's chromium is not installed (scripts/test installs it with apt-get)"
    if os.environ.get("CI") == "true":
        pytest.fail(problem)
    pytest.skip(problem)


@pytest.fixture
def browser() -> Iterator[Any]:
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("playwright is not installed: pip install -e '.[test]'")
        pytest.skip("playwright is not installed")
    with sync_playwright() as playwright:
        # --no-sandbox: the tests may run as root (CI does), where Chromium's sandbox cannot start
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def keyed_server(tmp_path: Path) -> Iterator[tuple[ServeProcess, str]]:
    """``tether serve`` with API keys (no ``--no-auth``), and dana's key."""
    url = f"sqlite:///{tmp_path / 'runtime.db'}"
    key = new_key(url, "dana", "acme", tmp_path, "support-lead")
    process = ServeProcess(url, tmp_path, project=PROJECT, auth=())
    try:
        process.start()
        yield process, key
    finally:
        process.stop()


def test_log_in_edit_a_refund_and_see_the_run_finish(
    browser: Any, keyed_server: tuple[ServeProcess, str]
) -> None:
    server, key = keyed_server
    client = get_sync_client(url=server.base, api_key=key)
    thread = client.threads.create()
    tid = thread["thread_id"]
    run = client.runs.create(
        tid, "refund", input={"order_id": "o-77", "amount_cents": 5000, "note": "lid broken"}
    )
    client.runs.join(tid, run["run_id"])
    assert client.threads.get(tid)["status"] == "interrupted"

    page = browser.new_page()
    page.goto(f"{server.base}/inbox")
    assert page.url.endswith("/inbox/login")  # nobody is logged in yet
    page.fill("#login input[name=credential]", "tk_not-a-key")
    page.click("#login button[type=submit]")
    assert "that credential was refused" in page.inner_text("[role=alert]")
    page.fill("#login input[name=credential]", key)
    page.click("#login button[type=submit]")
    page.wait_for_url(f"{server.base}/inbox")
    assert page.inner_text("#who").startswith("dana (support-lead)")
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["tether_inbox_session"]["httpOnly"] is True
    assert cookies["tether_inbox_session"]["sameSite"] == "Strict"

    row = page.locator("tr", has_text=run["run_id"])
    assert row.count() == 1
    assert "5000" in row.inner_text()
    assert "pending" in row.inner_text()
    row.locator("a").click()
    page.wait_for_url(f"{server.base}/inbox/a/**")
    assert page.inner_text("#state") == "pending"
    arguments = page.inner_text('dd[data-field="arguments"]')
    assert '"amount_cents": 5000' in arguments
    assert '"order_id": "o-77"' in arguments

    # an amount the schema refuses: the page says why, and nothing is decided
    page.fill('#edit input[name="arg:amount_cents"]', "-5")
    page.click("#edit button[type=submit]")
    error = page.inner_text("[role=alert]")
    assert "amount_cents" in error
    assert "greater than 0" in error
    assert page.inner_text("#state") == "pending"
    assert page.input_value('#edit input[name="arg:amount_cents"]') == "-5"

    page.fill('#edit input[name="arg:amount_cents"]', "2500")
    page.fill("#edit input[name=reason]", "half, agreed with the customer")
    page.click("#edit button[type=submit]")
    page.wait_for_url(f"{server.base}/inbox/a/**")
    assert page.inner_text("#state") == "edited"
    assert "edit by dana" in page.inner_text('dd[data-field="decision"]')

    client.runs.join(tid, run["run_id"])
    finished = client.runs.get(tid, run["run_id"])
    assert finished["status"] == "success"
    done = client.threads.get(tid)
    assert done["status"] == "idle"
    assert done["values"]["refunded"] == 2500
    assert done["values"]["decision"] == "edit"

    page.goto(f"{server.base}/inbox")
    assert page.locator("tr", has_text=run["run_id"]).count() == 0  # no longer waiting
