"""ScriptedChatModel: deterministic answers, bound tools, and an honest calls log."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from tether.graphs import ScriptedChatModel, ScriptError, ScriptRule, read_calls
from tether.graphs._refund_scenario import refund_script
from tether.graphs._scripted import after_tool, on_first_turn, planned_call


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return order_id


def _model(tmp_path: Path) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[
            ScriptRule(
                "ask",
                on_first_turn,
                lambda ms: AIMessage(
                    "", tool_calls=[planned_call("lookup_order", {"order_id": "A-1001"})]
                ),
            ),
            ScriptRule(
                "answer",
                after_tool("lookup_order"),
                lambda ms: AIMessage(f"found {ms[-1].content}"),
            ),
        ],
        calls_file=str(tmp_path / "calls.log"),
    )


def test_same_conversation_same_answer_and_every_call_logged(tmp_path: Path) -> None:
    model = _model(tmp_path)
    first = model.invoke([HumanMessage("refund A-1001")])
    again = model.invoke([HumanMessage("refund A-1001")])
    assert first == again
    assert first.id is not None
    assert first.id.startswith("scripted-")
    assert first.tool_calls[0]["name"] == "lookup_order"
    assert first.tool_calls[0]["id"]
    assert first.usage_metadata is not None
    assert first.usage_metadata["total_tokens"] > 0
    calls = read_calls(tmp_path / "calls.log")
    assert [c.rule for c in calls] == ["ask", "ask"]
    assert calls[0].input_hash == calls[1].input_hash
    reply = ToolMessage(
        "A-1001 teapot", tool_call_id=first.tool_calls[0]["id"], name="lookup_order"
    )
    final = model.invoke([HumanMessage("refund A-1001"), first, reply])
    assert final.content == "found A-1001 teapot"
    assert not final.tool_calls
    calls = read_calls(tmp_path / "calls.log")
    assert len(calls) == 3
    assert calls[2].input_hash != calls[0].input_hash


async def test_async_calls_are_logged_too(tmp_path: Path) -> None:
    model = _model(tmp_path)
    reply = await model.ainvoke([HumanMessage("refund A-1001")])
    assert reply == model.invoke([HumanMessage("refund A-1001")])
    assert len(read_calls(tmp_path / "calls.log")) == 2


def test_message_ids_do_not_change_the_answer(tmp_path: Path) -> None:
    model = _model(tmp_path)
    a = model.invoke([HumanMessage("refund A-1001", id="one")])
    b = model.invoke([HumanMessage("refund A-1001", id="two")])
    assert a == b


def test_bind_tools_returns_a_scripted_model_that_checks_tool_names(tmp_path: Path) -> None:
    bound = _model(tmp_path).bind_tools([lookup_order])
    assert isinstance(bound, ScriptedChatModel)
    assert bound.invoke([HumanMessage("x")]).tool_calls[0]["name"] == "lookup_order"

    @tool
    def other(x: str) -> str:
        """Another tool."""
        return x

    with pytest.raises(ScriptError, match="not bound"):
        _model(tmp_path).bind_tools([other]).invoke([HumanMessage("x")])


def test_no_matching_rule_is_a_clear_error(tmp_path: Path) -> None:
    model = _model(tmp_path)
    with pytest.raises(ScriptError, match="no rule of the script"):
        model.invoke([HumanMessage("x"), ToolMessage("?", tool_call_id="c", name="nope")])
    assert read_calls(tmp_path / "calls.log") == []


def test_a_rule_must_return_an_ai_message(tmp_path: Path) -> None:
    model = ScriptedChatModel(rules=[ScriptRule("bad", on_first_turn, lambda ms: "text")])  # type: ignore[arg-type,return-value]
    with pytest.raises(ScriptError, match="not AIMessage"):
        model.invoke([HumanMessage("x")])


def test_read_calls_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_calls(tmp_path / "absent.log") == []


def test_refund_script_decides_from_the_last_tool_result() -> None:
    model = ScriptedChatModel(rules=refund_script())
    ask = model.invoke([HumanMessage("My order A-1001 arrived broken")])
    assert ask.tool_calls[0]["args"] == {"order_id": "A-1001"}
    unknown = ToolMessage('{"error": "unknown order"}', tool_call_id="c1", name="lookup_order")
    reply = model.invoke([HumanMessage("My order A-1001 arrived broken"), ask, unknown])
    assert not reply.tool_calls
    assert "could not find" in str(reply.content)
    no_id = model.invoke([HumanMessage("please refund my order")])
    assert not no_id.tool_calls
