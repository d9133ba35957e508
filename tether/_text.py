"""Text every store keeps as given: no NUL character, nothing that is not UTF-8.

PostgreSQL refuses a NUL in text, and a lone surrogate (which JSON's
``\\ud800`` escape can carry) has no UTF-8 form, so no backend stores it.
Ids, decisions and request bodies are checked with :func:`text_problem`
before anything is written, so a refusal never comes from a half-done write.
"""

from __future__ import annotations

__all__ = ["text_problem"]


def text_problem(value: str, *, nul: bool = True) -> str | None:
    """What is wrong with ``value`` as stored text (worded to follow its name), else ``None``.

    Args:
        value: The text.
        nul: Whether a NUL character is refused too.
    """
    if nul and "\x00" in value:
        return "contains a NUL character"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"is not valid Unicode text (a lone surrogate at position {exc.start})"
    return None
