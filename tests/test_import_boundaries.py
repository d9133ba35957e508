"""Names tell public from internal, and no package reaches into another's internals.

A module whose name starts with ``_`` belongs to the package that holds it: only
that package's own modules import it (``tether._canonical`` is shared by every
subpackage; ``tether.store._codec`` by the store alone). Across subpackages a
module imports only what the other package exports: a name listed in that
package's ``__all__`` (wherever the name is defined), or one of its public
modules. Within one subpackage anything goes. The check reads the source with
:mod:`ast`, so it sees imports under ``TYPE_CHECKING`` and inside functions too.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

import tether

ROOT = Path(tether.__file__).parent


@dataclass(frozen=True)
class Source:
    name: str  # dotted module name
    path: Path

    @property
    def package(self) -> str:
        """The package relative imports resolve against."""
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


def _sources(root: Path) -> dict[str, Source]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        found[name] = Source(name, path)
    return found


def _unit(module: str) -> str:
    """The subpackage (or top-level module) a module belongs to: ``tether.X``."""
    return ".".join(module.split(".")[:2])


def _static_all(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text()).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return None


def _private_owner(module: str) -> str | None:
    """The package a private module belongs to (the one holding its first ``_`` part)."""
    parts = module.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _package_of(module: str, sources: dict[str, Source]) -> str:
    """The module itself if it is a package, else the package holding it."""
    if sources[module].path.name == "__init__.py":
        return module
    return module.rpartition(".")[0]


def _may_load(importer: str, module: str) -> bool:
    owner = _private_owner(module)
    return owner is None or _within(importer, owner) or _unit(importer) == _unit(module)


def _imports(source: Source) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` for every import of a tether module in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source.path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = source.package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base, [a.name for a in node.names]))
    return [(line, m, names) for line, m, names in found if m.split(".")[0] == "tether"]


def violations(root: Path) -> list[str]:
    """Every import that crosses a subpackage boundary into something not exported."""
    sources = _sources(root)
    out = []
    for source in sources.values():
        for line, module, names in _imports(source):
            where = f"{source.path.relative_to(root.parent)}:{line}"
            if module not in sources:
                out.append(f"{where}: imports {module}, which does not exist")
                continue
            if not _may_load(source.name, module):
                out.append(f"{where}: imports the private module {module}")
                continue
            package = _package_of(module, sources)
            if _unit(source.name) == _unit(module) or _within(source.name, package):
                continue
            exported = _static_all(sources[package].path) or []
            for name in names:
                sub = f"{module}.{name}"
                if sub in sources:  # ``from package import module``
                    if not _may_load(source.name, sub):
                        out.append(f"{where}: imports the private module {sub}")
                elif name not in exported:
                    out.append(f"{where}: imports {name}, not in {package}.__all__")
    return sorted(out)


def test_no_module_imports_another_packages_internals() -> None:
    assert violations(ROOT) == []


def _packages() -> list[str]:
    return sorted(name for name, s in _sources(ROOT).items() if s.path.name == "__init__.py")


def _ruff_order(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return (kind, name)


@pytest.mark.parametrize("package", _packages())
def test_a_package_exports_exactly_what_it_lists(package: str) -> None:
    path = _sources(ROOT)[package].path
    listed = _static_all(path)
    if package == "tether.testing":  # holds modules, exports nothing
        assert listed is None
        return
    assert listed is not None, f"{package} has no __all__"
    assert listed == sorted(listed, key=_ruff_order), f"{package}.__all__ is not sorted"
    module = importlib.import_module(package)
    missing = [name for name in listed if not hasattr(module, name)]
    assert missing == []


# The check itself, on small trees written for it.


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "tether"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


BASE = {
    "__init__.py": "",
    "_shared.py": "__all__ = ['helper']\nhelper = 1\n",
    "low/__init__.py": "from tether.low._impl import thing\n__all__ = ['thing']\n",
    "low/_impl.py": "__all__ = ['other', 'thing']\nthing = other = 1\n",
    "low/public.py": "__all__ = ['shown']\nshown = hidden = 1\n",
}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("from tether.low._impl import thing\n", "imports the private module tether.low._impl"),
        ("import tether.low._impl\n", "imports the private module tether.low._impl"),
        ("from tether.low import _impl\n", "imports the private module tether.low._impl"),
        ("from tether.low import other\n", "imports other, not in tether.low.__all__"),
        ("from tether.low.public import shown\n", "imports shown, not in tether.low.__all__"),
        ("def f():\n    from tether.low import other\n", "not in tether.low.__all__"),
        ("from ..low import other\n", "imports other, not in tether.low.__all__"),
    ],
)
def test_the_check_names_each_kind_of_reach(tmp_path: Path, text: str, problem: str) -> None:
    root = _tree(tmp_path, {**BASE, "high/__init__.py": "", "high/user.py": text})
    found = violations(root)
    assert len(found) == 1
    assert found[0].startswith("tether/high/user.py:")
    assert problem in found[0]


def test_the_check_allows_exports_and_a_packages_own_internals(tmp_path: Path) -> None:
    user = (
        "from tether import _shared\n"
        "from tether._shared import helper\n"
        "from tether.low import thing\n"
        "from tether.low import public\n"
        "from tether.low.public import thing as same\n"
        "from tether.high._mine import x\n"
    )
    files = {**BASE, "high/__init__.py": "", "high/user.py": user, "high/_mine.py": "x = 1\n"}
    files["low/inner/__init__.py"] = "from tether.low._impl import other\n"
    assert violations(_tree(tmp_path, files)) == []
