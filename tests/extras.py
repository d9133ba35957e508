"""Processes in which the optional extras' modules cannot be imported.

``pip install tether`` installs no driver for PostgreSQL or Redis and no web
server: what the README promises of such an install is tried in a child
process (and its children) whose ``sitecustomize`` makes those modules
unimportable, exactly as if they were not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DATABASES = (
    "psycopg",
    "psycopg_pool",
    "redis",
    "redisvl",
    "langgraph.checkpoint.postgres",
    "langgraph.checkpoint.redis",
)
"""The modules only the ``postgres`` and ``redis`` extras install."""

SERVER = ("fastapi", "starlette", "uvicorn")
"""The modules only the ``server`` extra installs."""

_BLOCKER = """
import importlib.abc
import sys

BLOCKED = {blocked!r}


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _NotInstalled())
"""


def env_without(blocked: tuple[str, ...], workdir: Path) -> dict[str, str]:
    """The environment of a process (and its children) where ``blocked`` are missing."""
    site = workdir / "without-extras"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_BLOCKER.format(blocked=blocked))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env["PYTHONPATH"] = os.pathsep.join((str(site), str(ROOT)))
    return env


def run_without(
    blocked: tuple[str, ...], workdir: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in ``workdir`` with ``blocked`` missing; it must end within 2 minutes."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=workdir, env=env_without(blocked, workdir), capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
