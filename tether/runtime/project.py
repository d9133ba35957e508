"""An unchanged LangGraph project: ``langgraph.json`` read as ``langgraph dev`` reads it.

The file's rules are the LangGraph CLI's and Agent Server's:

- ``graphs`` maps a graph id to ``"./path/file.py:variable"`` (a file, relative
  to the directory of ``langgraph.json``) or ``"package.module:variable"`` (an
  import path), or to ``{"path": ..., "description": ...}``. A spec with a
  ``/`` or ending in ``.py`` names a file; anything else is a module.
- The variable is a compiled graph, a ``StateGraph`` (compiled at load), or a
  graph factory: a callable taking nothing or a ``RunnableConfig``, returning a
  graph, a coroutine of one, or a (sync or async) context manager yielding one.
  A compiled graph is shared; a factory is called for every run.
- ``env`` is the path of a ``.env`` file or an inline mapping. It is read at
  load; :meth:`Project.apply_env` (or ``load(..., apply_env=True)``, before the
  graphs are imported, as ``langgraph dev`` does) puts it in ``os.environ``.
- ``dependencies`` are recorded, never installed; a local one that is a
  directory goes on ``sys.path``, as does the project directory, so a graph
  file can import its siblings.
- ``auth.path`` and ``http.app`` are parsed into :class:`ObjectRef` for the
  server to load later.

Each graph file is imported once per process under a module name made from
its absolute path, so two projects' ``agent.py`` never collide. Every problem
raises :class:`~tether.runtime.errors.ProjectConfigError` naming the graph id,
its spec and what is wrong.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, var_child_runnable_config
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.constants import CONFIG_KEY_CHECKPOINTER
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore

from tether.runtime._dotenv import read_dotenv
from tether.runtime.errors import ProjectConfigError, UnknownGraphError
from tether.runtime.objectref import ObjectRef, describe
from tether.runtime.webhooks import WebhookPolicy

__all__ = ["CompiledGraph", "GraphEntry", "ObjectRef", "Project"]

logger = logging.getLogger(__name__)

CompiledGraph = Pregel[Any, Any, Any, Any]
_BOUND_CACHE_SIZE = 16


@dataclass(frozen=True)
class GraphEntry:
    """One entry of ``graphs``, loaded.

    Attributes:
        graph_id: The key in ``graphs``.
        ref: Where the variable lives.
        description: The entry's ``description``, if it is an object.
        kind: ``"graph"`` for a compiled graph or a StateGraph (shared by all
            runs), ``"factory"`` for a callable called per run.
        value: The compiled graph, or the factory.
        takes_config: Whether the factory takes the RunnableConfig.
    """

    graph_id: str
    ref: ObjectRef
    description: str | None
    kind: Literal["graph", "factory"]
    value: Any
    takes_config: bool = False


def _entry(graph_id: str, raw: object, root: Path) -> GraphEntry:
    where = f"graph {graph_id!r}"
    description = None
    if isinstance(raw, dict):
        if "path" not in raw:
            raise ProjectConfigError(f"{where} ({raw!r}): an object entry needs a 'path'")
        description = raw.get("description")
        raw = raw["path"]
    ref = ObjectRef.parse(raw, root, where=where)
    value = ref.load()
    if isinstance(value, Pregel):
        return GraphEntry(graph_id, ref, description, "graph", value)
    if isinstance(value, StateGraph):
        try:
            compiled = value.compile()
        except Exception as exc:
            raise ref.error(f"compiling the StateGraph failed: {describe(exc)}") from exc
        return GraphEntry(graph_id, ref, description, "graph", compiled)
    if callable(value):
        return GraphEntry(graph_id, ref, description, "factory", value, _takes_config(ref, value))
    raise ref.error(
        f"{ref.attribute} is a {type(value).__name__}, not a compiled graph, a StateGraph "
        "or a graph factory"
    )


def _takes_config(ref: ObjectRef, factory: Callable[..., Any]) -> bool:
    """LangGraph's rule: a factory takes no argument, or one: the RunnableConfig."""
    try:
        params = list(inspect.signature(factory).parameters.values())
    except (TypeError, ValueError):
        return False
    if len(params) > 1:
        raise ref.error(
            f"the graph factory takes {len(params)} parameters "
            f"({', '.join(p.name for p in params)}); it may take none or one (the config)"
        )
    if params and "ServerRuntime" in str(params[0].annotation):
        raise ref.error(
            f"the graph factory's parameter {params[0].name!r} is a ServerRuntime, which "
            "tether does not provide; take the RunnableConfig instead"
        )
    return bool(params)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ProjectConfigError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProjectConfigError(
            f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from exc
    if not isinstance(data, dict):
        raise ProjectConfigError(f"{path} must hold a JSON object, not {type(data).__name__}")
    return data


def _read_env(raw: object, root: Path) -> tuple[dict[str, str], Path | None]:
    if raw is None:
        return {}, None
    if isinstance(raw, str):
        file = (root / raw).resolve()
        if not file.is_file():
            # python-dotenv (and so `langgraph dev`) reads a missing file as empty.
            logger.warning("env file %s does not exist; no variables loaded from it", file)
            return {}, file
        try:
            return read_dotenv(file), file
        except (OSError, UnicodeDecodeError) as exc:
            raise ProjectConfigError(f"env: cannot read {file}: {exc}") from exc
    if isinstance(raw, dict):
        for key, value in raw.items():
            if not isinstance(value, str):
                raise ProjectConfigError(
                    f"env.{key} must be a string, got {type(value).__name__} {value!r}; "
                    f'quote it: "{key}": "{value}"'
                )
        return dict(raw), None
    raise ProjectConfigError(
        f"env must be the path of a .env file or an object of strings, got {type(raw).__name__}"
    )


def _optional_ref(section: object, key: str, root: Path, name: str) -> ObjectRef | None:
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ProjectConfigError(f"{name} must be an object, got {type(section).__name__}")
    if key not in section:
        return None
    return ObjectRef.parse(section[key], root, where=f"{name}.{key}")


def _extend_sys_path(root: Path, dependencies: tuple[str, ...]) -> None:
    # `langgraph dev` appends the project directory and each local dependency
    # directory, so installed packages still win over same-named local files.
    for entry in (root, *(root / d for d in dependencies)):
        if entry.is_dir() and str(entry.resolve()) not in sys.path:
            sys.path.append(str(entry.resolve()))


class Project:
    """A loaded ``langgraph.json``: its graphs, env, dependencies, auth and http."""

    def __init__(
        self,
        config_path: Path,
        raw: Mapping[str, Any],
        entries: Mapping[str, GraphEntry],
        env: Mapping[str, str],
        env_file: Path | None,
    ) -> None:
        self.config_path = config_path
        self.root = config_path.parent
        self.raw = raw
        self.env = dict(env)
        self.env_file = env_file
        self.dependencies: tuple[str, ...] = tuple(raw.get("dependencies") or ())
        self.auth: Mapping[str, Any] | None = raw.get("auth")
        self.http: Mapping[str, Any] | None = raw.get("http")
        self.auth_ref = _optional_ref(self.auth, "path", self.root, "auth")
        self.http_app = _optional_ref(self.http, "app", self.root, "http")
        self.webhooks = WebhookPolicy.from_project(raw)
        self._entries = dict(entries)
        self._bound: OrderedDict[tuple[str, int, int], tuple[object, CompiledGraph]] = OrderedDict()

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, apply_env: bool = False) -> Project:
        """Read ``langgraph.json`` (or the one in directory ``path``) and import its graphs.

        Args:
            path: The file, or the directory that holds ``langgraph.json``.
            apply_env: Put ``env`` in ``os.environ`` before importing the graphs,
                as ``langgraph dev`` does, for modules that read it at import.

        Raises:
            ProjectConfigError: The file or any graph it names is malformed or
                cannot be loaded; the message names the graph id and its spec.
        """
        config_path = Path(path).resolve()
        if config_path.is_dir():
            config_path = config_path / "langgraph.json"
        raw = _read_json(config_path)
        root = config_path.parent
        graphs = raw.get("graphs")
        if not isinstance(graphs, dict) or not graphs:
            raise ProjectConfigError(
                f"{config_path} has no graphs; add at least one, e.g. "
                '"graphs": {"agent": "./my_agent/graph.py:graph"}'
            )
        dependencies = raw.get("dependencies") or []
        if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
            raise ProjectConfigError(
                f"dependencies must be a list of strings, got {dependencies!r}"
            )
        env, env_file = _read_env(raw.get("env"), root)
        if apply_env:
            os.environ.update(env)
        _extend_sys_path(root, tuple(dependencies))
        entries = {str(gid): _entry(str(gid), spec, root) for gid, spec in graphs.items()}
        return cls(config_path, raw, entries, env, env_file)

    @property
    def graph_ids(self) -> tuple[str, ...]:
        """The graph ids, in file order."""
        return tuple(self._entries)

    def entry(self, graph_id: str) -> GraphEntry:
        """The loaded entry for ``graph_id``.

        Raises:
            UnknownGraphError: No such graph id; the message lists the known ones.
        """
        try:
            return self._entries[graph_id]
        except KeyError:
            raise UnknownGraphError(
                f"no graph {graph_id!r} in {self.config_path}; known graph ids: "
                f"{', '.join(sorted(self._entries))}"
            ) from None

    def apply_env(self) -> None:
        """Put ``env`` in ``os.environ``, replacing values already there (as ``langgraph dev``)."""
        os.environ.update(self.env)

    @asynccontextmanager
    async def graph(
        self,
        graph_id: str,
        config: RunnableConfig | None = None,
        checkpointer: BaseCheckpointSaver[Any] | None = None,
        *,
        store: BaseStore | None = None,
    ) -> AsyncIterator[CompiledGraph]:
        """The graph for one run, compiled with ``checkpointer`` (and ``store``, if given).

        A compiled graph is copied with the checkpointer replaced, once per
        checkpointer in this process. A factory is called now, with ``config``
        (its ``configurable`` carrying the checkpointer, as LangGraph's server
        does) if it takes one; a context manager it returns is exited when this
        one is.

        Raises:
            UnknownGraphError: No such graph id.
            ProjectConfigError: The factory raised or returned no graph.
        """
        entry = self.entry(graph_id)
        if entry.kind == "graph":
            yield self._bound_copy(entry, entry.value, checkpointer, store)
            return
        async with AsyncExitStack() as stack:
            made = await _call_factory(entry, stack, config, checkpointer, store)
            yield _bind(entry, made, checkpointer, store)

    def _bound_copy(
        self,
        entry: GraphEntry,
        graph: CompiledGraph,
        checkpointer: BaseCheckpointSaver[Any] | None,
        store: BaseStore | None,
    ) -> CompiledGraph:
        key = (entry.graph_id, id(checkpointer), id(store))
        if (hit := self._bound.get(key)) is not None:
            self._bound.move_to_end(key)
            return hit[1]
        bound = _bind(entry, graph, checkpointer, store)
        # The pair keeps the checkpointer and store alive, so their ids stay unique.
        self._bound[key] = ((checkpointer, store), bound)
        if len(self._bound) > _BOUND_CACHE_SIZE:
            self._bound.popitem(last=False)
        return bound


async def _call_factory(
    entry: GraphEntry,
    stack: AsyncExitStack,
    config: RunnableConfig | None,
    checkpointer: BaseCheckpointSaver[Any] | None,
    store: BaseStore | None,
) -> Any:
    run_config = ensure_config(config)
    configurable = dict(run_config.get("configurable") or {})
    if checkpointer is not None:
        configurable.setdefault(CONFIG_KEY_CHECKPOINTER, checkpointer)
    run_config["configurable"] = configurable
    # As in LangGraph's server, get_config() works inside the factory.
    token = var_child_runnable_config.set(run_config)
    try:
        value = entry.value(run_config) if entry.takes_config else entry.value()
        if hasattr(value, "__aenter__") and hasattr(value, "__aexit__"):
            return await stack.enter_async_context(value)
        if hasattr(value, "__enter__") and hasattr(value, "__exit__"):
            return stack.enter_context(value)
        if inspect.isawaitable(value):
            return await value
        return value
    except Exception as exc:
        raise entry.ref.error(f"the graph factory raised {describe(exc)}") from exc
    finally:
        var_child_runnable_config.reset(token)


def _bind(
    entry: GraphEntry,
    graph: object,
    checkpointer: BaseCheckpointSaver[Any] | None,
    store: BaseStore | None,
) -> CompiledGraph:
    if isinstance(graph, StateGraph):
        graph = graph.compile()
    if not isinstance(graph, Pregel):
        raise entry.ref.error(
            f"the graph factory returned a {type(graph).__name__}, not a compiled graph or a "
            "StateGraph"
        )
    update: dict[str, Any] = {"checkpointer": checkpointer}
    if store is not None:
        update["store"] = store
    if graph.name == "LangGraph":
        update["name"] = entry.graph_id
    return graph.copy(update=update)
