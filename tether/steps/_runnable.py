"""A recorded Runnable: any model that is not a chat model, or a chain around one.

Build it with :func:`tether.steps.recorded`; a chat model gets a
:class:`~tether.steps._chat.RecordedChatModel` instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig

from tether.steps._budget import Price
from tether.steps._recorder import Recorder
from tether.steps._unrecorded import refuse_astream_events

__all__ = ["RecordedModel"]


class RecordedModel(Runnable[Any, Any]):
    """A Runnable whose calls inside graph nodes are recorded and replayed.

    ``bind_tools`` and ``with_structured_output`` return recorded models too;
    other attributes are those of the wrapped model.

    Attributes:
        model: The wrapped Runnable.
        recorder: What is recorded on each step, and how.
    """

    def __init__(self, model: Runnable[Any, Any], recorder: Recorder) -> None:
        self.model = model
        self.recorder = recorder

    @property
    def model_id(self) -> str:
        """The id recorded on each step."""
        return self.recorder.model_id

    @property
    def prompt_version(self) -> str | None:
        """The prompt version recorded on each step."""
        return self.recorder.prompt_version

    @property
    def price(self) -> Price | None:
        """What the model charges, for cost accounting and budgets."""
        return self.recorder.price

    def __repr__(self) -> str:
        return f"recorded({self.model!r})"

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes RecordedModel lacks (model_name, temperature, ...).
        if name.startswith("__") or name in ("model", "recorder"):
            raise AttributeError(name)
        return getattr(self.model, name)

    @property
    def InputType(self) -> Any:
        return self.model.InputType

    @property
    def OutputType(self) -> Any:
        return self.model.OutputType

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordedModel:
        """The wrapped model's ``bind_tools``, recorded."""
        bound = self.model.bind_tools(tools, **kwargs)  # type: ignore[attr-defined]
        return RecordedModel(bound, self.recorder)

    def with_structured_output(self, schema: Any, **kwargs: Any) -> RecordedModel:
        """The wrapped model's ``with_structured_output``, recorded."""
        structured = self.model.with_structured_output(schema, **kwargs)  # type: ignore[attr-defined]
        return RecordedModel(structured, self.recorder.for_schema(schema))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Call the model, or return the recorded answer for this step."""
        return self.recorder.invoke(self.model, input, config, **kwargs)

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """Stream the model's answer; a recorded answer comes back as chunks."""
        return self.recorder.stream(self.model, input, config, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Async :meth:`invoke`."""
        return await self.recorder.ainvoke(self.model, input, config, **kwargs)

    def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Async :meth:`stream`."""
        return self.recorder.astream(self.model, input, config, **kwargs)

    def astream_events(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """The model's events, outside a graph node (refused inside one: see ``recorded``)."""
        refuse_astream_events(config)
        return super().astream_events(input, config, **kwargs)
