"""The released test tree of the installed LangGraph, fetched by version and cached.

LangGraph's sdist on PyPI ships its ``tests/``. We do not keep a copy in this
repository: the first run downloads the sdist of exactly the installed version
with pip (so pip's own index, proxy and certificate settings apply), checks it
against the SHA-256 recorded below, and extracts ``tests/``, ``pyproject.toml``
(its pytest settings) and ``LICENSE`` into ``.cache/langgraph-tests/`` at the
repository root, which git ignores. Later runs reuse that folder.

The sdist's ``langgraph/`` package is deliberately not extracted: the tests must
import the installed library, the one tether runs on, not a second copy.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "CACHE",
    "SDIST_SHA256",
    "SUITE_PATTERNS",
    "SuiteUnavailableError",
    "langgraph_version",
    "suite_files",
    "suite_root",
]

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "langgraph-tests"

# SHA-256 of each sdist we run, as PyPI lists it. Bump together with the
# langgraph pin in pyproject.toml's test extra.
SDIST_SHA256 = {
    "1.2.24": "86b0dd611b7201cb393da2de0e064029c1bef520f11a5e6ee04be53c2a815bc7",
}

# LangGraph's test files whose tests take a checkpointer (the others never
# touch one; tether_langgraph_fixtures deselects what does not).
SUITE_PATTERNS = (
    "test_pregel*.py",
    "test_time_travel*.py",
    "test_interrupt*.py",
    "test_interruption.py",
    "test_strict_resume.py",
    "test_subgraph_persistence*.py",
    "test_checkpoint_migration.py",
    "test_large_cases*.py",
    "test_delta_channel_*.py",
    "test_pydantic.py",
)

_KEEP = ("tests/", "pyproject.toml", "LICENSE")
_DONE = ".complete"


class SuiteUnavailableError(RuntimeError):
    """LangGraph's test tree could not be fetched or does not match its recorded hash."""


def langgraph_version() -> str:
    """The installed LangGraph's version: the one whose tests must run."""
    return importlib.metadata.version("langgraph")


def suite_root(version: str | None = None) -> Path:
    """The extracted sdist root of LangGraph ``version`` (default: installed), fetched once.

    Raises:
        SuiteUnavailableError: No hash is recorded for ``version``, pip could not
            download the sdist, or the download does not match the hash.
    """
    version = version or langgraph_version()
    root = CACHE / f"langgraph-{version}"
    if (root / _DONE).exists():
        return root
    CACHE.mkdir(parents=True, exist_ok=True)
    with _exclusive(CACHE / ".lock"):  # pytest-xdist workers may arrive together
        if not (root / _DONE).exists():
            _extract(_download(version), root, version)
    return root


def suite_files(root: Path) -> list[Path]:
    """The test files of ``root`` that :data:`SUITE_PATTERNS` name, sorted."""
    found = {path for pattern in SUITE_PATTERNS for path in (root / "tests").glob(pattern)}
    return sorted(found)


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _download(version: str) -> Path:
    """The verified sdist of ``version`` in the cache, downloaded with pip if absent."""
    expected = SDIST_SHA256.get(version)
    if expected is None:
        raise SuiteUnavailableError(
            f"no SHA-256 is recorded for the langgraph {version} sdist in "
            f"{Path(__file__).relative_to(REPO)}; the test extra pins the version whose "
            "tests run: install it (pip install -e '.[all,test]') or record the new hash"
        )
    folder = CACHE / "sdists"
    sdist = folder / f"langgraph-{version}.tar.gz"
    if not sdist.exists():
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--no-binary", ":all:", f"langgraph=={version}", "-d", str(folder),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not sdist.exists():
            raise SuiteUnavailableError(
                f"pip could not download the langgraph {version} sdist "
                f"(exit {done.returncode}): {done.stderr.strip()[-2000:]}"
            )
    actual = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if actual != expected:
        sdist.unlink()
        raise SuiteUnavailableError(
            f"{sdist.name} has SHA-256 {actual}, not the recorded {expected}; it was deleted"
        )
    return sdist


def _extract(sdist: Path, root: Path, version: str) -> None:
    """Unpack the kept parts of ``sdist`` into ``root``, all or nothing."""
    top = f"langgraph-{version}/"
    staging = root.with_name(f"{root.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(sdist) as archive:
        members = []
        for member in archive.getmembers():
            inner = member.name.removeprefix(top)
            if member.name.startswith(top) and inner.startswith(_KEEP):
                member.name = inner
                members.append(member)
        if not any(m.name.startswith("tests/") for m in members):
            raise SuiteUnavailableError(f"{sdist.name} has no tests/ folder")
        archive.extractall(staging, members=members, filter="data")
    (staging / _DONE).write_text(f"{sdist.name} sha256={SDIST_SHA256[version]}\n")
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
