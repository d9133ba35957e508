"""Loops that try again log a transient store error as one warning line, not a traceback.

While PostgreSQL restarts, every job of every scheduler tick fails; a
traceback for each buried the log. The errors here are real ones, raised by a
real SQLite file, a real PostgreSQL server and a closed port.
"""

from __future__ import annotations

import logging
import socket
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from tests.backends import drop_postgres_connections, sqlite_write_lock
from tether.runtime import Runtime, Scheduler
from tether.runtime.store.transient import log_failure

log = logging.getLogger("tests.transient")


def _locked_error(tmp_path: Path) -> sqlite3.OperationalError:
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    with sqlite_write_lock(url):
        db = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0)
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            return exc
        finally:
            db.close()
    raise AssertionError("the write lock was not held")


def _refused_error() -> psycopg.OperationalError:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        try:
            psycopg.connect(f"postgresql://u@127.0.0.1:{port}/db", connect_timeout=2)
        except psycopg.OperationalError as exc:
            return exc
    raise AssertionError("a closed port accepted a connection")


def test_a_transient_error_is_one_warning_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tests.transient")
    log_failure(log, _locked_error(tmp_path), "job %s failed", "a")
    log_failure(log, _refused_error(), "job %s failed", "b")
    first, second = caplog.records
    assert (first.levelno, first.exc_info) == (logging.WARNING, None)
    assert first.getMessage() == (
        "job a failed: OperationalError: database is locked (transient; tried again)"
    )
    assert (second.levelno, second.exc_info) == (logging.WARNING, None)
    assert second.getMessage().startswith("job b failed: OperationalError: ")
    assert "\n" not in second.getMessage()


def test_any_other_error_keeps_its_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tests.transient")
    db = sqlite3.connect(tmp_path / "empty.db")
    try:
        db.execute("SELECT * FROM missing")
    except sqlite3.OperationalError as exc:  # an OperationalError, but not a busy one
        log_failure(log, exc, "job %s failed", "c")
    finally:
        db.close()
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], sqlite3.Error)
    assert record.getMessage() == "job c failed"


@pytest.mark.parametrize("runtime_url", ["postgres"], indirect=True)
async def test_a_tick_after_postgresql_dropped_its_connections_logs_no_traceback(
    runtime: Runtime, runtime_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    scheduler = Scheduler(runtime)
    assert (await scheduler.tick()).errors == []  # every job has its connections now
    assert drop_postgres_connections(runtime_url) >= 1
    caplog.set_level(logging.WARNING, logger="tether.runtime")
    report = await scheduler.tick(datetime.now(UTC))
    assert report.errors, "no job met the dropped connections"
    failed = [r for r in caplog.records if "scheduler: job" in r.getMessage()]
    assert len(failed) == len(report.errors), [r.getMessage() for r in caplog.records]
    for record in failed:
        assert (record.levelno, record.exc_info) == (logging.WARNING, None), record.getMessage()
        assert record.getMessage().endswith("(transient; tried again)")
    assert (await scheduler.tick()).errors == []  # the pools have new connections
