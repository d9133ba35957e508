"""examples/time_travel.ipynb, executed headless (nbclient + ipykernel), checked by its outputs."""

from __future__ import annotations

import re
from pathlib import Path

import nbclient
import nbformat

from tether.graphs import CALLS_FILE, PAYMENTS_FILE, FakePaymentsProvider, read_calls

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "time_travel.ipynb"


def _outputs(tmp_path: Path) -> tuple[str, list[dict[str, str]]]:
    """The notebook's printed text, and the rich outputs (mime type to text) it displayed."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    printed, shown = [], []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", output
            if output.output_type == "stream":
                printed.append(output.text)
            elif output.output_type in ("execute_result", "display_data"):
                shown.append(dict(output.data))
    return "".join(printed), shown


def _value(text: str, label: str) -> str:
    found = re.search(rf"^{re.escape(label)}: (.*)$", text, re.MULTILINE)
    assert found is not None, f"{label!r} not printed:\n{text}"
    return found.group(1)


def test_the_time_travel_notebook(tmp_path: Path) -> None:
    printed, shown = _outputs(tmp_path)
    workdir = Path(_value(printed, "workdir"))
    # The run, the fork, the replay and the what-if, counted by the notebook...
    assert _value(printed, "model calls") == "4"
    assert _value(printed, "model calls made by the fork") == "2"
    assert _value(printed, "replay model calls") == "0"
    assert _value(printed, "replay new refunds") == "0"
    assert _value(printed, "what-if model calls") == "3"
    assert '"amount_cents": 2000' in _value(printed, "fork refunded")
    assert '"amount_cents": 1500' in _value(printed, "what-if refunded")
    assert (
        _value(printed, "visited")
        == "__start__ -> agent -> tools -> agent -> tools -> agent -> tools -> agent"
    )
    # ...and by the files the scripted model and the fake payments provider wrote.
    assert len(read_calls(workdir / CALLS_FILE)) == 4 + 2 + 0 + 3
    counts = FakePaymentsProvider(workdir / PAYMENTS_FILE).counts()
    assert (counts.refund_attempts, counts.refunds) == (3, 3)
    # The timeline, the state, the fork and the what-if render as HTML tables; the path as Mermaid.
    tables = [o["text/html"] for o in shown if "text/html" in o]
    assert len(tables) == 5
    assert all(t.startswith('<table class="tether-debug">') for t in tables)
    assert "lookup_order" in tables[0]
    assert any(o.get("text/markdown", "").startswith("```mermaid") for o in shown)
    (replay,) = [t for t in tables if "super-steps matched" in t]
    assert "<td>7</td>" in replay
    assert "<td>divergence</td><td>none</td>" in replay
