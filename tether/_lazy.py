"""Module attributes loaded on first use, so importing a package stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``where[name]`` when ``name`` is first read.

    Args:
        package: The importing module's ``__name__`` (for the error message).
        where: Public name -> the module that defines it (absolute).

    Returns:
        The function to bind as the module's ``__getattr__``. Python calls it
        only for names the module does not define, and the import system
        caches the loaded module, so a repeated read costs a dict lookup.
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
