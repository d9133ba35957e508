"""``tether demo``: the refund agent pauses for a person, who decides from another process.

No servers and no keys: checkpoints, records and the step log live in an
embedded SQLite file under ``<dir>/demo`` (recreated on every run), the model
is the scripted one, and the payments provider is the SQLite fake.

1. This process runs the agent and prints each step as it is recorded, until
   the refund needs approval; it then shows the stored request.
2. A separate OS process runs ``tether approvals edit ...`` as a person would,
   with a smaller amount; that process resumes the run to the end.
3. This process reads the step log back and counts the model calls, showing
   that nothing was asked twice.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig

from tether._calllog import read_calls
from tether._progress import aunfinished
from tether.approvals import escape_text, format_approval, get_approval
from tether.checkpointing import open_checkpointer
from tether.demo.graph import DEMO_DIR_ENV, build_demo_graph
from tether.graphs import CALLS_FILE, PAYMENTS_FILE, FakePaymentsProvider, refund_input
from tether.steps import Step, read_steps

__all__ = ["EDITED_AMOUNT_CENTS", "run_demo"]

EDITED_AMOUNT_CENTS = 2500
EDIT_REASON = "the customer keeps the lid; partial refund agreed on the phone"
Printer = Callable[[str], None]


def _short(value: Any, width: int = 88) -> str:
    # Model and tool output is shown escaped, like an approval request: it must
    # not be able to restyle or hide what the demo prints after it.
    text = escape_text(" ".join(str(value).split()))
    return text if len(text) <= width else text[: width - 3] + "..."


def describe_step(step: Step) -> str:
    """One line for a step of the log."""
    head = f"  step {step.index:>2}  {step.kind:<8}"
    output = step.output
    if step.kind == "model" and isinstance(output, AIMessage):
        calls = ", ".join(
            f"{c['name']}({', '.join(f'{k}={v!r}' for k, v in c['args'].items())})"
            for c in output.tool_calls
        )
        return f"{head} {_short(f'-> {calls}' if calls else repr(str(output.content)))}"
    if step.kind == "approval" and isinstance(output, dict):
        by = f" by {_short(output['by'])}" if output.get("by") else ""
        what = f" ({_short(output['outcome'])})" if output.get("outcome") else ""
        return f"{head} {_short(output['event'])}{what} {_short(output['approval_id'])}{by}"
    if step.kind == "compensation":
        undoes = step.detail.get("undoes")
        beside = f" (undoes step {undoes})" if undoes is not None else ""
        return f"{head} {_short(step.name)}{beside}"
    return f"{head} {_short(step.name)}: {_short(output, 70)}"


def _approval_note(content: Any) -> str:
    try:
        return escape_text(json.loads(str(content))["approval"]["note"])
    except (ValueError, KeyError, TypeError):
        return _short(content, 200)


class _StepPrinter:
    """Prints the steps of a thread that were not printed yet."""

    def __init__(self, out: Printer) -> None:
        self.out = out
        self.seen = 0

    async def flush(self, saver: Any, thread_id: str) -> list[Step]:
        steps = await read_steps(saver, thread_id)
        for step in steps[self.seen :]:
            self.out(describe_step(step))
        self.seen = len(steps)
        return steps


def _readable(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _fresh_workdir(base: Path) -> Path:
    workdir = (base / "demo").resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    return workdir


def _decide_elsewhere(
    url: str, workdir: Path, approval_id: str, args_sha256: str, out: Printer
) -> int:
    argv = [
        sys.executable, "-m", "tether", "approvals", "edit", approval_id,
        "--url", url, "--by", "dana", "--role", "support-lead",
        "--args-sha256", args_sha256,
        "--set", f"amount_cents={EDITED_AMOUNT_CENTS}", "--reason", EDIT_REASON,
    ]  # fmt: skip
    shown = ["tether", *argv[3:]]
    out("  $ " + shlex.join(shown).replace(" --", " \\\n      --"))
    env = {**os.environ, DEMO_DIR_ENV: str(workdir)}
    env.pop("TETHER_GRAPH", None)
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    for line in (done.stdout + done.stderr).strip().splitlines():
        out(f"  | {line}")
    return done.returncode


async def _phase_one(url: str, workdir: Path, thread_id: str, out: Printer) -> tuple[str, int]:
    printer = _StepPrinter(out)
    async with open_checkpointer(url) as saver:
        graph = build_demo_graph(checkpointer=saver, workdir=workdir)
        config = {"configurable": {"thread_id": thread_id}}
        waiting: list[Any] = []
        async for update in graph.astream(refund_input(), config, stream_mode="updates"):
            await printer.flush(saver, thread_id)
            waiting.extend(update.get("__interrupt__", ()))
        if len(waiting) != 1:
            raise RuntimeError(f"expected the run to pause on one approval, got {waiting!r}")
        approval_id = str(waiting[0].value["approval_id"])
        out(f"\n  paused: the run waits on approval {approval_id}. Nothing is held in memory;")
        out("  the request is stored state in the database, with an expiry.\n")
        out("[2/3] The request as the approver sees it (tether approvals show):\n")
        view = await get_approval(saver, approval_id)
        for line in format_approval(view, url=url).splitlines():
            out("  " + line)
        return approval_id, printer.seen


async def _summary(url: str, workdir: Path, thread_id: str, out: Printer) -> bool:
    async with open_checkpointer(url) as saver:
        steps = await read_steps(saver, thread_id)
        graph = build_demo_graph(checkpointer=saver, workdir=workdir)
        config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
        state = await graph.aget_state(config)
        # Not `state.next`: it is empty for a run killed between a step's writes
        # and its checkpoint, which still has work to do.
        left = await aunfinished(graph, config)
    out("\n  the whole step log, as recorded by both processes:")
    for step in steps:
        out(describe_step(step))
    calls = read_calls(workdir / CALLS_FILE)
    prompts = {c.input_hash for c in calls}
    per_pid: dict[int, int] = {}
    for call in calls:
        per_pid[call.pid] = per_pid.get(call.pid, 0) + 1
    model_steps = sum(1 for s in steps if s.kind == "model")
    counts = FakePaymentsProvider(workdir / PAYMENTS_FILE).counts()
    messages = state.values.get("messages", [])
    told = [m for m in messages if getattr(m, "name", None) == "issue_refund"]
    if told:
        out(f"\n  the agent was told of the edit: {_approval_note(told[-1].content)}")
    out(f"  agent's last word: {_short(messages[-1].content, 200) if messages else ''}")
    out(
        f"  model calls: {len(calls)} for {len(prompts)} distinct prompts "
        f"({', '.join(f'process {p}: {n}' for p, n in per_pid.items())}); "
        f"model steps in the log: {model_steps}"
    )
    out(f"  refunds issued: {counts.refunds}; emails sent: {counts.emails}")
    ok = len(calls) == len(prompts) == model_steps and counts.refunds == 1 and counts.emails == 1
    out(
        "  nothing was asked twice: every model call had a new prompt, and the resume "
        "replayed the log instead of asking again."
        if ok
        else "  UNEXPECTED: a call or an effect was repeated; see above."
    )
    if left:
        out("  UNEXPECTED: the run is not finished; `tether approvals resume` continues it.")
    return ok and not left


async def run_demo(base: Path, out: Printer = print) -> int:
    """Run the demo in ``base/demo``; returns the exit code."""
    workdir = _fresh_workdir(base)
    url = f"sqlite:///{_readable(workdir / 'demo.db')}"
    thread_id = f"demo-{uuid.uuid4().hex[:8]}"
    out("tether demo: a refund agent that needs a person's approval, across two processes")
    out(f"  database {_readable(workdir / 'demo.db')} (embedded SQLite; no servers, no keys)")
    out(f"  thread {thread_id}\n")
    out(f"[1/3] Process {os.getpid()} runs the agent; each step is printed as it is recorded:\n")
    approval_id, _ = await _phase_one(url, workdir, thread_id, out)
    async with open_checkpointer(url) as saver:
        args_sha256 = (await get_approval(saver, approval_id)).request.args_sha256
    out(
        f"\n[3/3] A person (dana, support lead) lowers the amount to {EDITED_AMOUNT_CENTS} cents "
        "from another OS process; it resumes the run:\n"
    )
    code = _decide_elsewhere(url, workdir, approval_id, args_sha256, out)
    if code != 0:
        out(f"\n  the deciding process failed with exit code {code}")
        return 1
    ok = await _summary(url, workdir, thread_id, out)
    out("\ndone." if ok else "\nthe demo did not finish as expected.")
    return 0 if ok else 1
