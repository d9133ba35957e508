"""A recorded chat model: a ``BaseChatModel`` whose calls in graph nodes are recorded steps.

``recorded(chat_model)`` returns a :class:`RecordedChatModel`, so code that
needs a real chat model takes it as one: ``create_agent`` picks the same
structured-output strategy as for the bare model (it reads ``profile`` and the
model name), middleware that takes a model accepts it, and type checkers see a
``BaseChatModel``.

Recording hooks ``invoke``/``ainvoke``/``stream``/``astream`` rather than
``_generate``: the wrapped model's own public method runs the real call (its
callbacks, cache, rate limiter and streaming choice are its own), the answer is
recorded before the node sees it, and a replayed answer comes back without
calling the model or firing callbacks for a call that did not happen. The input
hash is the one of the input as given, exactly as for any recorded Runnable.
Inside a graph node the legacy ``generate`` path and ``astream_events`` raise
:class:`~tether.steps.StepsError` (see :mod:`._unrecorded`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from pydantic import Field, InstanceOf

from tether.steps._recorder import Recorder
from tether.steps._runnable import RecordedModel
from tether.steps._unrecorded import refuse_astream_events, refuse_generate

__all__ = ["RecordedChatModel"]


class RecordedChatModel(BaseChatModel):
    """A chat model whose calls inside graph nodes are recorded and replayed.

    Build it with :func:`tether.steps.recorded`. It is a ``BaseChatModel`` that
    proxies the wrapped one: ``_llm_type``, identifying and tracing params,
    ``profile``, token counting and every attribute it does not define itself
    (``model_name``, ``model``, ``model_id``, ``temperature``, ...) are the
    wrapped model's. ``bind_tools`` returns this recorded model bound to the
    tools, so the record wraps the final call; ``with_structured_output``
    returns a recorded structured model.

    Attributes:
        wrapped: The chat model that answers real calls.
        recorder: What is recorded on each step (``recorder.model_id`` is the recorded id).
    """

    wrapped: BaseChatModel
    # A plain field, not a private attribute: pydantic serves those through
    # __getattr__, which would cost every call a few microseconds.
    recorder: InstanceOf[Recorder] = Field(exclude=True)

    def __init__(self, wrapped: BaseChatModel, recorder: Recorder) -> None:
        # The settings every chat model has (callbacks, tags, metadata, cache,
        # rate limiter, profile, ...) are the wrapped model's; they apply only to
        # the legacy generate() path, since invoke/stream go to the wrapped model.
        shared = {name: getattr(wrapped, name) for name in BaseChatModel.model_fields}
        if isinstance(shared.get("metadata"), dict):
            shared["metadata"] = dict(shared["metadata"])
        super().__init__(**{**shared, "wrapped": wrapped, "recorder": recorder})

    def __repr__(self) -> str:
        return f"recorded({self.wrapped!r})"

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes this class lacks: those are the wrapped model's.
        if name.startswith("__") or name in type(self).__private_attributes__:
            return super().__getattr__(name)  # type: ignore[misc]  # pydantic's private attrs
        wrapped = self.__dict__.get("wrapped")
        if wrapped is None:
            raise AttributeError(name)
        return getattr(wrapped, name)

    # -- what langchain reads to identify and trace the model -------------------
    @property
    def _llm_type(self) -> str:
        return self.wrapped._llm_type

    @property
    def _identifying_params(self) -> Mapping[str, Any]:
        return self.wrapped._identifying_params

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return self.wrapped._get_ls_params(stop=stop, **kwargs)

    @property
    def OutputType(self) -> Any:
        return self.wrapped.OutputType

    def get_token_ids(self, text: str) -> list[int]:
        """The wrapped model's token ids for ``text``."""
        return self.wrapped.get_token_ids(text)

    def get_num_tokens(self, text: str) -> int:
        """The wrapped model's token count for ``text``."""
        return self.wrapped.get_num_tokens(text)

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """The wrapped model's token count for ``messages`` (and ``tools``)."""
        return self.wrapped.get_num_tokens_from_messages(messages, tools=tools)

    # -- derived models -----------------------------------------------------------
    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """The wrapped model's ``bind_tools``, with this recorded model as the bound model.

        The wrapped model formats the tools its own way; its binding's arguments are
        then bound to this model, so each call of the result is a recorded step.
        """
        bound = self.wrapped.bind_tools(tools, **kwargs)
        if (
            isinstance(bound, RunnableBinding)
            and bound.bound is self.wrapped
            and not bound.config_factories
            and bound.custom_input_type is None
            and bound.custom_output_type is None
        ):
            rebound = self.bind(**bound.kwargs)
            return rebound.with_config(bound.config) if bound.config else rebound
        # Not a plain binding of the wrapped model: record the whole thing.
        return RecordedModel(bound, self.recorder)

    def with_structured_output(
        self, schema: dict[str, Any] | type, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, dict[str, Any] | Any]:
        """The wrapped model's ``with_structured_output``, recorded (pydantic answers rebuilt)."""
        structured = self.wrapped.with_structured_output(schema, include_raw=include_raw, **kwargs)
        return RecordedModel(structured, self.recorder.for_schema(schema))

    # -- recorded calls -------------------------------------------------------------
    def invoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        """Call the wrapped model, or return the recorded answer for this step."""
        return cast(AIMessage, self.recorder.invoke(self.wrapped, input, config, **kwargs))

    async def ainvoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AIMessage:
        """Async :meth:`invoke`."""
        return cast(AIMessage, await self.recorder.ainvoke(self.wrapped, input, config, **kwargs))

    def stream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[AIMessageChunk]:
        """Stream the wrapped model's answer; a recorded answer comes back as one chunk."""
        return self.recorder.stream(self.wrapped, input, config, **kwargs)

    def astream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[AIMessageChunk]:
        """Async :meth:`stream`."""
        return self.recorder.astream(self.wrapped, input, config, **kwargs)

    def astream_events(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """The wrapped model's events, outside a graph node (refused inside one)."""
        refuse_astream_events(config)
        return super().astream_events(input, config, **kwargs)

    # -- the legacy generate() path: refused in a graph node, a pass-through outside ----
    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        refuse_generate()
        return self.wrapped._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        refuse_generate()
        return await self.wrapped._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
