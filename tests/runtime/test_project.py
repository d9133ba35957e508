"""``Project``: an unchanged ``langgraph.json`` project, loaded as ``langgraph dev`` loads it.

Every project here is written into ``tmp_path``: a ``langgraph.json`` and the
graph files it names. Each kind of graph variable LangGraph accepts is loaded
and run; each way the file can be wrong raises ``ProjectConfigError`` with a
message naming the graph id, the spec and the problem.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from tether.runtime.errors import ProjectConfigError, UnknownGraphError
from tether.runtime.project import Project

ROOT = Path(__file__).resolve().parents[2]

# A one-node graph: it appends `tag` (from the config, else "ok") to `seen`.
GRAPH = """
import operator
from typing import Annotated, TypedDict
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph

class State(TypedDict):
    seen: Annotated[list[str], operator.add]

def node(state: State, config: RunnableConfig) -> dict:
    return {"seen": [config["configurable"].get("tag", "ok")]}

def build(name: str = "node") -> StateGraph:
    return StateGraph(State).add_node(name, node).add_edge(START, name)
"""
GOOD = GRAPH + "graph = build()\n"


def write_project(
    root: Path, graphs: Any, files: dict[str, str] | None = None, **extra: Any
) -> Path:
    """Write ``langgraph.json`` (graphs plus ``extra`` keys) and ``files`` under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    config = root / "langgraph.json"
    config.write_text(json.dumps({"dependencies": ["."], "graphs": graphs, **extra}))
    return config


def load_agent(root: Path, spec: str, code: str, **extra: Any) -> Project:
    """Load a project whose one graph, ``agent``, is ``spec`` and whose ``agent.py`` is ``code``."""
    return Project.load(write_project(root, {"agent": spec}, {"agent.py": code}, **extra))


def user_module(project: Project, graph_id: str) -> Any:
    """The module the graph's variable was loaded from."""
    return sys.modules[project.entry(graph_id).value.__module__]


async def run(project: Project, graph_id: str, **configurable: Any) -> dict[str, Any]:
    """Run ``graph_id`` once on a fresh saver; check the state went through that saver."""
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t1", **configurable}}
    async with project.graph(graph_id, config, saver) as graph:
        assert graph.checkpointer is saver
        result: dict[str, Any] = await graph.ainvoke({"seen": []}, config)
    stored = saver.get_tuple({"configurable": {"thread_id": "t1"}})
    assert stored is not None
    assert stored.checkpoint["channel_values"]["seen"] == result["seen"]
    return result


async def test_compiled_graph_is_copied_once_per_checkpointer(tmp_path: Path) -> None:
    config = write_project(
        tmp_path, {"agent": "./agent.py:graph"}, {"agent.py": GRAPH + "graph = build().compile()\n"}
    )
    project = Project.load(config)
    assert project.graph_ids == ("agent",)
    assert project.entry("agent").kind == "graph"
    assert await run(project, "agent") == {"seen": ["ok"]}

    original = project.entry("agent").value
    saver, other = InMemorySaver(), InMemorySaver()
    async with project.graph("agent", None, saver) as first:
        pass
    async with project.graph("agent", None, saver) as again:
        assert again is first
    async with project.graph("agent", None, other) as second:
        assert second.checkpointer is other
    assert second is not first
    assert first.name == "agent"  # LangGraph's server names an unnamed graph after its id
    assert original.checkpointer is None  # the user's object is never changed


async def test_state_graph_is_compiled_at_load(tmp_path: Path) -> None:
    project = load_agent(tmp_path, "./agent.py:graph", GRAPH + "graph = build()\n")
    assert project.entry("agent").kind == "graph"
    assert await run(project, "agent") == {"seen": ["ok"]}


async def test_zero_arg_factory_is_called_per_run(tmp_path: Path) -> None:
    code = GRAPH + "CALLS = []\n\ndef make():\n    CALLS.append(1)\n    return build().compile()\n"
    project = load_agent(tmp_path, "./agent.py:make", code)
    entry = project.entry("agent")
    assert (entry.kind, entry.takes_config) == ("factory", False)
    assert await run(project, "agent") == {"seen": ["ok"]}
    assert await run(project, "agent") == {"seen": ["ok"]}
    assert user_module(project, "agent").CALLS == [1, 1]


async def test_config_factory_gets_the_run_config_and_the_checkpointer(tmp_path: Path) -> None:
    code = GRAPH + (
        "from langchain_core.runnables.config import ensure_config\n"
        "SEEN = []\n\n"
        "def make(config):\n"
        "    SEEN.append((config['configurable'], ensure_config()['configurable']))\n"
        "    return build(config['configurable']['tag']).compile()\n"
    )
    project = load_agent(tmp_path, "./agent.py:make", code)
    assert project.entry("agent").takes_config
    assert await run(project, "agent", tag="from-config") == {"seen": ["from-config"]}
    [(given, ambient)] = user_module(project, "agent").SEEN
    assert given["tag"] == "from-config"
    assert isinstance(given["__pregel_checkpointer"], InMemorySaver)
    assert ambient == given  # get_config() inside the factory sees the same config


async def test_async_factory_returning_a_state_graph(tmp_path: Path) -> None:
    code = GRAPH + "async def make(config):\n    return build()\n"
    project = load_agent(tmp_path, "./agent.py:make", code)
    assert await run(project, "agent") == {"seen": ["ok"]}


@pytest.mark.parametrize(
    ("decorator", "define"),
    [("asynccontextmanager", "async def"), ("contextmanager", "def")],
)
async def test_context_manager_factory_is_exited_after_the_run(
    tmp_path: Path, decorator: str, define: str
) -> None:
    code = GRAPH + (
        f"from contextlib import {decorator}\n"
        "EVENTS = []\n\n"
        f"@{decorator}\n"
        f"{define} make(config):\n"
        "    EVENTS.append('enter')\n"
        "    yield build().compile()\n"
        "    EVENTS.append('exit')\n"
    )
    project = load_agent(tmp_path, "./agent.py:make", code)
    events = user_module(project, "agent").EVENTS
    async with project.graph("agent", {}, InMemorySaver()) as graph:
        assert events == ["enter"]
        result = await graph.ainvoke({"seen": []}, {"configurable": {"thread_id": "t"}})
    assert result == {"seen": ["ok"]}
    assert events == ["enter", "exit"]


async def test_module_spec_and_sibling_imports(tmp_path: Path) -> None:
    files = {
        "projmod_pkg/__init__.py": "",
        "projmod_pkg/agent.py": "from projmod_shared import build\ngraph = build().compile()\n",
        "projmod_shared.py": GRAPH,
        "by_path.py": "from projmod_shared import build\ngraph = build()\n",
    }
    graphs = {"by_module": "projmod_pkg.agent:graph", "by_path": "./by_path.py:graph"}
    project = Project.load(write_project(tmp_path, graphs, files))
    assert project.graph_ids == ("by_module", "by_path")
    assert await run(project, "by_module") == {"seen": ["ok"]}
    assert await run(project, "by_path") == {"seen": ["ok"]}


def test_same_file_name_in_two_projects_stays_apart(tmp_path: Path) -> None:
    for name in ("one", "two"):
        write_project(
            tmp_path / name,
            {"agent": "./agent.py:make", "again": "./agent.py:make"},
            {"agent.py": f"NAME = {name!r}\ndef make():\n    return NAME\n"},
        )
    one, two = Project.load(tmp_path / "one"), Project.load(tmp_path / "two")
    assert one.entry("agent").value() == "one"
    assert two.entry("agent").value() == "two"
    # Two graphs in one file share the module: it is executed once.
    assert one.entry("again").value is one.entry("agent").value


def test_object_entry_with_description(tmp_path: Path) -> None:
    graphs = {"agent": {"path": "./agent.py:graph", "description": "Answers tickets"}}
    project = Project.load(write_project(tmp_path, graphs, {"agent.py": GOOD}))
    assert project.entry("agent").description == "Answers tickets"


def test_env_file_is_read_not_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_PT_HOME", "/home/x")
    monkeypatch.delenv("TETHER_PT_PLAIN", raising=False)
    dotenv = (
        "# a comment\n"
        "TETHER_PT_PLAIN=plain value  # trailing note\n"
        "export TETHER_PT_EXPORTED='single # kept'\n"
        'TETHER_PT_DOUBLE="line1\\nline2"\n'
        "TETHER_PT_EXPANDED=${TETHER_PT_PLAIN}/${TETHER_PT_HOME}/${TETHER_PT_NONE:-dflt}\n"
    )
    config = write_project(
        tmp_path, {"agent": "./agent.py:graph"}, {"agent.py": GOOD, ".env": dotenv},
        env=".env",
    )  # fmt: skip
    project = Project.load(config)
    assert project.env == {
        "TETHER_PT_PLAIN": "plain value",
        "TETHER_PT_EXPORTED": "single # kept",
        "TETHER_PT_DOUBLE": "line1\nline2",
        "TETHER_PT_EXPANDED": "plain value//home/x/dflt",
    }
    assert project.env_file == tmp_path / ".env"
    assert "TETHER_PT_PLAIN" not in os.environ
    monkeypatch.setenv("TETHER_PT_PLAIN", "before")  # restored after the test
    project.apply_env()
    assert os.environ["TETHER_PT_PLAIN"] == "plain value"
    assert os.environ["TETHER_PT_EXPANDED"] == "plain value//home/x/dflt"
    for key in project.env:
        monkeypatch.delenv(key)


def test_env_dict_applied_before_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TETHER_PT_AT_IMPORT", raising=False)
    code = "import os\nVALUE = os.environ['TETHER_PT_AT_IMPORT']\ndef make():\n    return VALUE\n"
    env = {"TETHER_PT_AT_IMPORT": "set"}
    config = write_project(tmp_path, {"agent": "./agent.py:make"}, {"agent.py": code}, env=env)
    with pytest.raises(ProjectConfigError, match="KeyError: 'TETHER_PT_AT_IMPORT'"):
        Project.load(config)
    assert "TETHER_PT_AT_IMPORT" not in os.environ
    project = Project.load(config, apply_env=True)
    monkeypatch.delenv("TETHER_PT_AT_IMPORT")
    assert project.env == {"TETHER_PT_AT_IMPORT": "set"}
    assert project.entry("agent").value() == "set"


def test_missing_env_file_is_empty_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tether.runtime.project"):
        project = load_agent(tmp_path, "./agent.py:graph", GOOD, env=".env")
    assert project.env == {}
    assert f"env file {tmp_path / '.env'} does not exist" in caplog.text


def test_dependencies_auth_and_http_are_recorded(tmp_path: Path) -> None:
    files = {
        "agent.py": GOOD,
        "src/auth_mod_dep.py": "AUTH = 'the auth object'\n",
        "webapp.py": "app = 'the app'\n",
    }
    config = write_project(
        tmp_path, {"agent": "./agent.py:graph"}, files,
        dependencies=[".", "./src", "langchain-openai"],
        auth={"path": "auth_mod_dep:AUTH", "disable_studio_auth": True},
        http={"app": "./webapp.py:app", "disable_mcp": True},
    )  # fmt: skip
    project = Project.load(config)
    assert project.dependencies == (".", "./src", "langchain-openai")
    assert str(tmp_path / "src") in sys.path  # a local dependency directory is importable
    assert project.auth == {"path": "auth_mod_dep:AUTH", "disable_studio_auth": True}
    assert project.auth_ref is not None
    assert (project.auth_ref.module, project.auth_ref.attribute) == ("auth_mod_dep", "AUTH")
    assert project.auth_ref.load() == "the auth object"
    assert project.http_app is not None
    assert project.http_app.file == tmp_path / "webapp.py"
    assert project.http_app.load() == "the app"


async def test_unknown_graph_id_names_the_known_ones(tmp_path: Path) -> None:
    graphs = {"beta": "./agent.py:graph", "alpha": "./agent.py:graph"}
    project = Project.load(write_project(tmp_path, graphs, {"agent.py": GOOD}))
    with pytest.raises(UnknownGraphError, match=r"no graph 'gamma' .*known graph ids: alpha, beta"):
        async with project.graph("gamma", None, InMemorySaver()):
            pass


NO_COLON = r"graph 'agent' \('./agent.py'\): no ':' before a variable name"
NO_FILE = r"graph 'agent' \('./missing.py:graph'\): there is no file .*/missing.py$"
NO_VARIABLE = (
    r"graph 'agent' \('./agent.py:grph'\): .*agent.py defines no 'grph'; graphs it defines: graph"
)
IMPORT_FAILS = r"graph 'agent' \('./agent.py:graph'\): importing .*agent.py failed: "
NO_SUCH_XYZ = "ModuleNotFoundError: No module named 'no_such_xyz'"
NOT_GRAPHLIKE = r"graph is a int, not a compiled graph, a StateGraph or a graph factory"
THREE_PARAMETERS = r"takes 3 parameters \(a, b, c\); it may take none or one"
NO_ENTRYPOINT = r"compiling the StateGraph failed: ValueError: Graph must have an entrypoint"
NO_MODULE = (
    r"graph 'agent' \('no_such_pkg_xyz.agent:graph'\): importing module no_such_pkg_xyz.agent"
)


@pytest.mark.parametrize(
    ("spec", "code", "message"),
    [
        (123, None, r"graph 'agent' \(123\): expected a string like './agent.py:graph'"),
        ("./agent.py", None, NO_COLON),
        ("./agent.py:", None, r"'' after ':' is not a variable name"),
        ({"description": "x"}, None, r"graph 'agent' .*an object entry needs a 'path'"),
        ("./missing.py:graph", None, NO_FILE),
        ("./agent.py:grph", GOOD, NO_VARIABLE),
        ("./agent.py:graph", "import no_such_xyz\n", IMPORT_FAILS + NO_SUCH_XYZ),
        ("./agent.py:graph", "raise RuntimeError('boom')\n", IMPORT_FAILS + "RuntimeError: boom"),
        ("no_such_pkg_xyz.agent:graph", None, NO_MODULE + " failed: ModuleNotFoundError"),
        ("./agent.py:graph", "graph = 42\n", NOT_GRAPHLIKE),
        ("./agent.py:make", "def make(a, b, c):\n    pass\n", THREE_PARAMETERS),
        (
            "./agent.py:make",
            "def make(rt: 'ServerRuntime'):\n    pass\n",
            "'rt' is a ServerRuntime",
        ),
        ("./agent.ts:graph", None, r"JavaScript graphs are not supported"),
        ("./agent.py:graph", GRAPH + "graph = StateGraph(State)\n", NO_ENTRYPOINT),
    ],
)
def test_bad_graph_entries(tmp_path: Path, spec: Any, code: str | None, message: str) -> None:
    files = {} if code is None else {"agent.py": code}
    with pytest.raises(ProjectConfigError, match=message):
        Project.load(write_project(tmp_path, {"agent": spec}, files))


A = '{"graphs": {"a": "./a.py:g"}, '
BAD_ENV_TYPE = r"env must be the path of a .env file or an object of strings, got int"
BAD_ENV_VALUE = r'env.PORT must be a string, got int 8000; quote it: "PORT": "8000"'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"graphs": {"agent": ', r"langgraph.json is not valid JSON: Expecting value at line 1"),
        ("[1, 2]", r"must hold a JSON object, not list"),
        ('{"dependencies": ["."]}', r"has no graphs; add at least one"),
        ('{"graphs": {}}', r"has no graphs; add at least one"),
        (A + '"env": 5}', BAD_ENV_TYPE),
        (A + '"env": {"PORT": 8000}}', BAD_ENV_VALUE),
        (A + '"dependencies": "."}', r"dependencies must be a list of strings, got '.'"),
        (A + '"http": {"app": "./web.py"}}', r"http.app \('./web.py'\): no ':' before a variable"),
        (A + '"auth": "./auth.py:auth"}', r"auth must be an object, got str"),
    ],
)
def test_bad_files(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "a.py").write_text(GOOD.replace("graph = build()", "g = build()"))
    (tmp_path / "langgraph.json").write_text(text)
    with pytest.raises(ProjectConfigError, match=message):
        Project.load(tmp_path)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ProjectConfigError, match=r"cannot read .*nowhere.json: No such file"):
        Project.load(tmp_path / "nowhere.json")


def test_a_fixed_import_error_loads_on_retry(tmp_path: Path) -> None:
    config = write_project(tmp_path, {"agent": "./agent.py:graph"}, {"agent.py": "1/0\n"})
    with pytest.raises(ProjectConfigError, match="ZeroDivisionError"):
        Project.load(config)
    (tmp_path / "agent.py").write_text(GOOD)
    assert Project.load(config).entry("agent").kind == "graph"


FACTORY_RAISED = r"graph 'agent' \('./agent.py:make'\): the graph factory raised ValueError: no key"
NOT_A_GRAPH = r"the graph factory returned a str, not a compiled graph or a StateGraph"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("def make():\n    raise ValueError('no key')\n", FACTORY_RAISED),
        ("def make():\n    return 'not a graph'\n", NOT_A_GRAPH),
    ],
)
async def test_bad_factories_fail_per_run(tmp_path: Path, code: str, message: str) -> None:
    project = load_agent(tmp_path, "./agent.py:make", code)
    with pytest.raises(ProjectConfigError, match=message):
        async with project.graph("agent", None, InMemorySaver()):
            pass


@pytest.mark.skipif(
    not (ROOT / "examples" / "langgraph.json").is_file(), reason="examples/ has no langgraph.json"
)
async def test_the_examples_project_loads() -> None:
    project = Project.load(ROOT / "examples" / "langgraph.json")
    assert project.graph_ids
    for graph_id in project.graph_ids:
        async with project.graph(graph_id, {"configurable": {}}, InMemorySaver()) as graph:
            assert graph.get_graph().nodes
