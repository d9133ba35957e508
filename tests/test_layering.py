"""Each layer loads only the layers beneath it (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# What importing a module must not load: upper layers, and the harness.
CASES = {
    "tether.checkpointing": (
        "tether.steps",
        "tether.approvals",
        "tether.graphs",
        "tether.crashtest",
        "tether.runtime",
        "tether.demo",
        "tether.cli",
    ),
    "tether": ("tether.steps", "tether.approvals", "tether.graphs", "tether.crashtest"),
    "tether.store": ("tether.steps", "tether.approvals", "tether.graphs", "tether.crashtest"),
    "tether.steps": (
        "tether.approvals",
        "tether.graphs",
        "tether.crashtest",
        "tether.compensation",
    ),
    "tether.approvals": ("tether.graphs", "tether.crashtest", "tether.compensation"),
    "tether.compensation": ("tether.graphs", "tether.crashtest", "tether.runtime"),
    "tether.debug": (
        "tether.approvals",
        "tether.graphs",
        "tether.crashtest",
        "tether.runtime",
        "tether.server",
        "tether.demo",
        "tether.cli",
        "tether.compensation",
        "tether.retention",
    ),
    "tether.runtime": ("tether.retention", "tether.server", "tether.cli"),
    "tether.retention": ("tether.server", "tether.cli", "tether.graphs", "tether.crashtest"),
    "tether.crashtest._harness": ("tether.graphs", "tether.demo", "tether.cli"),
    # What the runtime lends the layers below it: they import it, so it imports none of them.
    "tether.boundaries": (
        "tether.checkpointing",
        "tether.store",
        "tether.steps",
        "tether.approvals",
        "tether.graphs",
        "tether.crashtest",
        "tether.runtime",
        "tether.demo",
        "tether.cli",
    ),
}


def _loaded_by(module: str) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('tether'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded: list[str] = json.loads(out)
    return loaded


@pytest.mark.parametrize("module", sorted(CASES))
def test_a_layer_loads_nothing_above_it(module: str) -> None:
    loaded = _loaded_by(module)
    assert module in loaded
    above = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in CASES[module])]
    assert above == []


def test_boundaries_load_only_the_errors_and_the_crash_point_hook() -> None:
    assert _loaded_by("tether.boundaries") == [
        "tether",
        "tether._crashpoints",
        "tether._lazy",
        "tether._version",
        "tether.boundaries",
        "tether.errors",
    ]


def test_import_tether_checkpointing_stays_small() -> None:
    # 67 modules before the root package became lazy; the opener needs about ten.
    assert len(_loaded_by("tether.checkpointing")) <= 15
