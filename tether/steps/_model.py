"""Recorded models: a model call inside a graph node is a recorded step.

``recorded(model)`` wraps any LangChain chat model or Runnable. Inside a graph
node that has a checkpointer, each ``invoke``/``ainvoke``/``stream``/``astream``
first looks for a record of this call (thread, checkpoint namespace, the node's
task id, the call's index within this execution of the node). If one exists the
recorded output comes back and the model is not called; if its input hash
differs, :class:`NonDeterminismError` is raised. Otherwise the model is called
and its output is recorded durably before the node sees it. Outside a graph
the wrapper simply calls the model.

A chat model comes back as a :class:`RecordedChatModel` (a ``BaseChatModel``);
any other Runnable as a :class:`RecordedModel`. Both record through the same
:class:`~tether.steps._recorder.Recorder`.
"""

from __future__ import annotations

from typing import Any, overload

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable

from tether.steps import _budget as budgets
from tether.steps._chat import RecordedChatModel
from tether.steps._recorder import Recorder, default_model_id, model_step
from tether.steps._runnable import RecordedModel

__all__ = ["RecordedChatModel", "RecordedModel", "model_step", "recorded"]


@overload
def recorded(
    model: BaseChatModel,
    *,
    model_id: str | None = None,
    prompt_version: str | None = None,
    price: budgets.Price | None = None,
) -> RecordedChatModel: ...


@overload
def recorded(
    model: Runnable[Any, Any],
    *,
    model_id: str | None = None,
    prompt_version: str | None = None,
    price: budgets.Price | None = None,
) -> RecordedModel: ...


def recorded(
    model: Runnable[Any, Any],
    *,
    model_id: str | None = None,
    prompt_version: str | None = None,
    price: budgets.Price | None = None,
) -> RecordedModel | RecordedChatModel:
    """Wrap ``model`` so its calls inside graph nodes are recorded and replayed.

    Args:
        model: Any LangChain chat model or Runnable.
        model_id: The id recorded on each step (default: the model's own name).
        prompt_version: Your prompt's version label, recorded on each step.
        price: What the model charges, for cost accounting and budgets.

    Returns:
        For a chat model, a :class:`RecordedChatModel`: a ``BaseChatModel`` that
        ``create_agent`` and middleware accept as the model itself. For any
        other Runnable, a :class:`RecordedModel`. Both have the same
        ``invoke``/``ainvoke``/``stream``/``astream``, ``bind_tools`` and
        ``with_structured_output``.
    """
    if isinstance(model, RecordedModel | RecordedChatModel):
        return model
    if not isinstance(model, Runnable):
        raise TypeError(
            f"recorded() wraps a LangChain chat model or Runnable, got {type(model).__name__}"
        )
    recorder = Recorder(model_id or default_model_id(model), prompt_version, price)
    if isinstance(model, BaseChatModel):
        return RecordedChatModel(model, recorder)
    return RecordedModel(model, recorder)
