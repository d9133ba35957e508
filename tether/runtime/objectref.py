"""``"./file.py:name"`` or ``"package.module:name"``: an object named in ``langgraph.json``.

``graphs``, ``auth.path`` and ``http.app`` name Python objects this way, as the
LangGraph CLI defines: text with a ``/`` (or ending in ``.py``) before the last
``:`` is a file, relative to the project directory; anything else is an import
path, found on ``sys.path``. A file is imported once per process under a module
name made from its absolute path, so two projects' ``agent.py`` never share a
module, and a file named by two graphs is executed once.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from tether.runtime.errors import ProjectConfigError

__all__ = ["ObjectRef", "describe"]

_JS_SUFFIXES = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx")


@dataclass(frozen=True)
class ObjectRef:
    """``"./file.py:name"`` or ``"package.module:name"``, resolved against the project.

    Attributes:
        where: What names the object, for messages (``graph 'agent'``, ``auth.path``).
        spec: The text as written in ``langgraph.json``.
        file: The absolute file for a path spec, else None.
        module: The import path for a module spec, else None.
        attribute: The variable to take from the file or module.
    """

    where: str
    spec: str
    file: Path | None
    module: str | None
    attribute: str

    @classmethod
    def parse(cls, spec: object, root: Path, *, where: str) -> ObjectRef:
        """Check ``spec``'s form and resolve a file spec against ``root``."""
        if not isinstance(spec, str):
            raise ProjectConfigError(
                f"{where} ({spec!r}): expected a string like './agent.py:graph' or "
                f"'my_package.agent:graph', got {type(spec).__name__}"
            )
        source, sep, attribute = spec.rpartition(":")
        if not sep or not source:
            raise ProjectConfigError(
                f"{where} ({spec!r}): no ':' before a variable name; write it as "
                "'./path/to/file.py:variable' or 'package.module:variable'"
            )
        if not attribute.isidentifier():
            raise ProjectConfigError(
                f"{where} ({spec!r}): {attribute!r} after ':' is not a variable name"
            )
        if source.endswith(_JS_SUFFIXES):
            raise ProjectConfigError(
                f"{where} ({spec!r}): JavaScript graphs are not supported; tether runs "
                "Python graphs"
            )
        if "/" in source or source.endswith(".py"):
            return cls(where, spec, (root / source).resolve(), None, attribute)
        return cls(where, spec, None, source, attribute)

    def load(self) -> Any:
        """Import the file or module and return the variable.

        Raises:
            ProjectConfigError: The file is missing, its import raised, or it
                defines no such variable.
        """
        module = self._import()
        try:
            return module.__dict__[self.attribute]
        except KeyError:
            raise self.error(
                f"{self._origin()} defines no {self.attribute!r}{_hint(module)}"
            ) from None

    def error(self, problem: str) -> ProjectConfigError:
        """A ProjectConfigError naming this reference and ``problem``."""
        return ProjectConfigError(f"{self.where} ({self.spec!r}): {problem}")

    def _origin(self) -> str:
        return str(self.file) if self.file is not None else f"module {self.module}"

    def _import(self) -> ModuleType:
        if self.file is None:
            try:
                return importlib.import_module(str(self.module))
            except Exception as exc:
                raise self.error(f"importing module {self.module} failed: {describe(exc)}") from exc
        if not self.file.is_file():
            raise self.error(f"there is no file {self.file}")
        name = _module_name(self.file)
        if (loaded := sys.modules.get(name)) is not None:
            return loaded
        spec = importlib.util.spec_from_file_location(name, self.file)
        if spec is None or spec.loader is None:
            raise self.error(f"{self.file} cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[name]
            raise self.error(f"importing {self.file} failed: {describe(exc)}") from exc
        return module


def _module_name(file: Path) -> str:
    digest = hashlib.sha256(str(file).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", file.stem)
    return f"langgraph_project_{digest}_{stem}"


def describe(exc: BaseException) -> str:
    """``"ValueError: message"``, for error texts."""
    return f"{type(exc).__name__}: {exc}"


def _hint(module: ModuleType) -> str:
    graphs = [k for k, v in vars(module).items() if isinstance(v, Pregel | StateGraph)]
    if graphs:
        return f"; graphs it defines: {', '.join(sorted(graphs))}"
    public = [k for k in vars(module) if not k.startswith("_")]
    return f"; names it defines: {', '.join(sorted(public))}" if public else ""
