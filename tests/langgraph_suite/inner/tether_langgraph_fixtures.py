"""pytest plugin for LangGraph's own test tree: its checkpointer fixtures become tether's.

Loaded with ``-p tether_langgraph_fixtures`` into a pytest process whose root is
the extracted LangGraph sdist (see :mod:`tests.langgraph_suite.runner`). In that
process ``tests`` is LangGraph's test package, not ours, which is why this
module lives outside our package path and loads ``tests/backends.py`` by file.

What it changes, and nothing else:

- LangGraph's ``sync_checkpointer`` and ``async_checkpointer`` fixtures are
  replaced, before pytest reads them, by fixtures that open the one variant
  named in ``TETHER_LANGGRAPH_VARIANT`` (``sqlite``, ``postgres+enc``, ...)
  through ``open_checkpointer_sync`` / ``open_checkpointer`` on a private
  database, key prefix or file, as ``tests/conftest.py`` isolates ours (on
  PostgreSQL a finished test's database is emptied and reused, which saves the
  100 to 300 ms of creating one per test).
- Only the tests that take one of those fixtures run; the rest are deselected,
  and so are those listed in ``TETHER_LANGGRAPH_DONE`` (run by an earlier
  child that a hang ended). ``TETHER_LANGGRAPH_ONLY`` names the only tests to
  run (a rerun of failures).
- Each test's outcome (passed, failed, hung, skipped) and the class of every
  saver handed out go, one JSON line each, to the file named in
  ``TETHER_LANGGRAPH_REPORT``; a test stopped by pytest-timeout is "hung".
- Two differences from LangGraph's own CI that are not about checkpointers are
  evened out: the installed ``langchain`` is hidden from langchain-core's
  version stamp (see ``_match_upstream_environment``), and our fixtures name
  their databases without drawing from a test's patched ``uuid.uuid4``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver

from tether import open_checkpointer, open_checkpointer_sync
from tether.checkpointing.encryption import KeyRing

FIXTURES = ("sync_checkpointer", "async_checkpointer")
_REPO = Path(__file__).resolve().parents[3]
_VARIANT = os.environ.get("TETHER_LANGGRAPH_VARIANT", "memory")
_BACKEND, _, _LAYER = _VARIANT.partition("+")
# One random key per run: every test of an encrypted variant writes real ciphertext.
_RING = KeyRing([("suite", os.urandom(32))]) if _LAYER == "enc" else None
# Captured before any test patches it (see _unpatched_uuid4).
_UUID4 = uuid.uuid4


def _load_backends() -> ModuleType:
    """``tests/backends.py`` of this repository, under a name that cannot clash."""
    name = "tether_test_backends"
    spec = importlib.util.spec_from_file_location(name, _REPO / "tests" / "backends.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


_backends = _load_backends()


@contextmanager
def _unpatched_uuid4() -> Iterator[None]:
    """Name databases and key prefixes with the real ``uuid.uuid4``.

    LangGraph's ``deterministic_uuids`` fixture patches ``uuid.uuid4`` with a
    fixed sequence that the test's expected message ids count on. Its own
    checkpointer fixtures draw database names from ``from uuid import uuid4``,
    which that patch does not reach; ``tests/backends.py`` calls
    ``uuid.uuid4()``, so without this it would take one id from the sequence.
    """
    patched = uuid.uuid4
    uuid.uuid4 = _UUID4
    try:
        yield
    finally:
        uuid.uuid4 = patched


@contextmanager
def _isolated(tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """A private slice of the variant's backend: its URL and ``open_checkpointer`` options."""
    with ExitStack() as stack:
        with _unpatched_uuid4():
            servers = _backends.server_urls() if _BACKEND in {"postgres", "redis"} else {}
            # On PostgreSQL a database per test, as LangGraph's fixtures have, but
            # emptied and reused rather than created anew (see recycled_database).
            backend = stack.enter_context(
                _backends.fresh_backend(_BACKEND, servers, tmp_path, reuse=True)
            )
        yield backend.url, {**backend.options, "encryption": _RING or False}


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _BACKEND == "postgres":
        _backends.drop_recycled_databases(_backends.server_urls()["postgres"])


@pytest.fixture(params=[_VARIANT])
def sync_checkpointer(tmp_path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    """tether's saver for sync code, as ``graph.invoke`` users get it."""
    with _isolated(tmp_path) as (url, options), open_checkpointer_sync(url, **options) as saver:
        _record_saver(saver)
        yield saver


@pytest.fixture(params=[_VARIANT])
async def async_checkpointer(tmp_path: Path) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """tether's saver for async code, as ``graph.ainvoke`` users get it."""
    with _isolated(tmp_path) as (url, options):
        async with open_checkpointer(url, **options) as saver:
            _record_saver(saver)
            yield saver


def _record_saver(saver: BaseCheckpointSaver[Any]) -> None:
    # Lets the runner check that every test got tether's saver, not LangGraph's.
    name = f"{type(saver).__module__}.{type(saver).__qualname__}"
    if name not in _SAVERS:
        _SAVERS.add(name)
        _record(saver=name)


def pytest_plugin_registered(plugin: object, plugin_name: str | None) -> None:
    """Swap LangGraph's checkpointer fixtures for ours in its ``tests/conftest.py``.

    pytest reads a conftest's fixtures only when it collects the conftest's
    directory, after this hook, so the swap is what it sees. The module on
    disk stays exactly as released.
    """
    if not plugin_name or Path(plugin_name).parts[-2:] != ("tests", "conftest.py"):
        return
    if all(hasattr(plugin, name) for name in FIXTURES):
        plugin.sync_checkpointer = sync_checkpointer  # type: ignore[attr-defined]
        plugin.async_checkpointer = async_checkpointer  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    _match_upstream_environment()


def _match_upstream_environment() -> None:
    """Run LangGraph's tests as its own CI does, where ``langchain`` is not installed.

    tether's test extra installs ``langchain`` (for examples/), and
    langchain-core then adds ``{"langchain": <version>}`` to every chat model's
    ``lc_versions`` metadata. LangGraph's message-stream tests compare that
    metadata exactly and expect only ``langchain-core``. Nothing stored by a
    checkpointer depends on it.
    """
    import langchain_core.language_models.base as models

    models._get_langchain_version = lambda: None  # type: ignore[attr-defined]


def _listed(variable: str) -> set[str] | None:
    """The test ids in the file the environment variable names, if it names one."""
    path = os.environ.get(variable)
    return set(Path(path).read_text().splitlines()) if path and Path(path).exists() else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tests that take a checkpointer, minus those run already, or just those asked."""
    done = _listed("TETHER_LANGGRAPH_DONE") or set()
    only = _listed("TETHER_LANGGRAPH_ONLY")
    keep = [
        i
        for i in items
        if set(FIXTURES) & set(getattr(i, "fixturenames", ()))
        and i.nodeid not in done
        and (only is None or i.nodeid in only)
    ]
    kept = set(keep)
    dropped = [i for i in items if i not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


_OUTCOMES: dict[str, str] = {}
_SAVERS: set[str] = set()
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "hung": 3}


def _record(**entry: str) -> None:
    """Append one line to the report: appended as it happens, so a killed run still tells."""
    if path := os.environ.get("TETHER_LANGGRAPH_REPORT"):
        with open(path, "a") as report:
            report.write(json.dumps(entry) + "\n")


def _is_timeout(report: pytest.TestReport) -> bool:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", "") or ""
    return "Timeout (>" in message and "pytest-timeout" in message


def pytest_runtest_logstart(nodeid: str) -> None:
    _record(started=nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Record the worst outcome of a test's setup, call and teardown, after its teardown."""
    if report.failed:
        outcome = "hung" if _is_timeout(report) else "failed"
    elif report.skipped:
        outcome = "skipped"
    else:
        outcome = "passed"
    previous = _OUTCOMES.get(report.nodeid, "passed")
    _OUTCOMES[report.nodeid] = max(previous, outcome, key=_RANK.__getitem__)
    if report.when == "teardown":
        _record(test=report.nodeid, outcome=_OUTCOMES.pop(report.nodeid))
