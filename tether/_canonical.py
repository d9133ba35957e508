"""Canonical JSON: the one text of a value, for hashes that are stored.

Three hashes are written down and compared later, possibly by another process
or another version of tether: an approval's ``args_sha256`` (an approver
decides on exactly those arguments), a step record's input hash (a replay
serves the recorded output only if the input hashes equal) and the scripted
model's input hash (its reply ids and calls file). All three are the SHA-256
of the canonical JSON defined here, so equal data always gives equal bytes,
in every process, and data that cannot be written the same way every time is
refused instead of guessed at.

The form
--------
* Objects have their keys sorted (by code point) and no whitespace: the
  separators are ``","`` and ``":"``.
* Object keys must be ``str`` (a ``str`` subclass, like a ``StrEnum`` member,
  counts as its text). An ``int`` or any other key is an error: JSON keys are
  strings, and turning a key into one is the caller's choice to make.
* ``str``, ``int``, ``bool`` and ``None`` are written as JSON writes them;
  ``IntEnum`` and ``StrEnum`` members as their value.
* An ``int`` of any size is written in full (no rounding at 2**53: the hash is
  of this text, not of what a JavaScript reader would make of it). One too long
  for Python to write (4300 digits, see ``sys.set_int_max_str_digits``) is an
  error.
* A ``float`` is written as ``repr`` writes it, the shortest text that reads
  back to the same float (``1.0``, ``1e+16``, ``-0.0``); ``1`` and ``1.0``
  therefore differ. NaN and infinity are an error with ``allow_nan=False``;
  with ``allow_nan=True`` they are written ``NaN``, ``Infinity`` and
  ``-Infinity``, as Python's ``json`` module does (not standard JSON, but
  step hashes have always been written so).
* A mapping is an object; a list, a tuple or any other sequence (but not
  ``str`` or binary data) is an array.
* A pydantic model is its ``model_dump(mode="json")``, so dates, UUIDs and
  decimals inside a model are written as the model's JSON writes them.
* ``reducers`` let a caller map types of its own domain to plain data first
  (the steps map a LangChain message to the fields that make up what a model
  was asked). They are tried, in order, before the rules for mappings,
  sequences and models, and what they return is encoded by these rules.

Everything else is an error, raised as :class:`CanonicalJSONError` (or the
subclass a caller passes) naming the type and the path inside the value where
it was found, such as ``$.refund.items[2]``. There is no ``repr`` or ``str``
fallback: those texts may differ between processes (a set's order depends on
the hash seed, an object's repr on its address), and a hash that differs
between processes fails exactly when it is needed, after a crash. In
particular:

* ``set`` and ``frozenset``: no order to write; pass a sorted list.
* ``bytes``, ``bytearray``, ``memoryview``: no one text (UTF-8? base64?);
  decode them or pass base64 text.
* ``datetime``, ``date``, ``time``, ``UUID``, ``Decimal``, dataclasses, enums
  that are not ``int`` or ``str``: pass their text (or a pydantic model, which
  writes them as its JSON does). Refusing them now leaves the choice open:
  accepting a type later changes no stored hash, changing its text would.
* A LangChain message outside a reducer is a pydantic model like any other
  (all of its fields, ids included); callers that hash what a message *means*
  reduce it first.
* A container that holds itself.

The text
--------
Two spellings of the same form are in use, and both are fixed by stored
hashes. Approval arguments are written with ``ensure_ascii=False``, the text
an approver reads (hashed as UTF-8, so a string with a lone surrogate is an
error); step and scripted-model inputs with ``ensure_ascii=True``, every
non-ASCII character as a ``\\uXXXX`` escape. Callers therefore name both
choices, ``ensure_ascii`` and ``allow_nan``, at every call.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import date, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from pydantic import BaseModel

from tether.errors import TetherError

__all__ = ["CanonicalJSONError", "Reducers", "canonical_json", "to_plain"]

Reducers = Sequence[tuple[type, Callable[[Any], Any]]]
"""``(type, function)`` pairs: an instance of ``type`` is encoded as ``function(value)``."""

_LONG_INT_BITS = 1000  # below this many bits an int always fits Python's digit limit


class CanonicalJSONError(TetherError, ValueError):
    """A value holds something canonical JSON cannot encode.

    Attributes:
        type_name: The offending type (module-qualified unless a builtin).
        path: Where it was found inside the value, ``$`` being the value itself.
    """

    def __init__(self, what: str, type_name: str, path: str, reason: str, noun: str = "") -> None:
        self.type_name = type_name
        self.path = path
        noun = noun or f"{'an' if type_name[0] in 'aeiou' else 'a'} {type_name}"
        super().__init__(f"{what} holds {noun} at {path}, which is not JSON: {reason}")


class _Refused(Exception):
    """Raised inside the walk; each container on the way out adds its step to the path."""

    def __init__(self, value: Any, reason: str, *, noun: str = "") -> None:
        super().__init__(reason)
        self.type_name = _type_name(type(value))
        self.reason = reason
        self.noun = noun
        self.steps: list[str] = []  # innermost first


def _type_name(cls: type) -> str:
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _step(key: str | int) -> str:
    if isinstance(key, int):
        return f"[{key}]"
    if key.isidentifier():
        return f".{key}"
    return f"[{json.dumps(key, ensure_ascii=False)}]"


_BINARY = (bytes, bytearray, memoryview)
_HINTS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    ((set, frozenset), "a set has no order to write; pass a sorted list"),
    (_BINARY, "binary data has no one text; decode it, or pass base64 text"),
    ((date, time), "pass its ISO 8601 text (value.isoformat())"),
    (UUID, "pass its text (str(value))"),
    (Decimal, "pass its text (str(value)) or an int of the smallest unit"),
)
_GENERAL = (
    "canonical JSON holds only str, int, float, bool, None, lists, tuples, "
    "dicts with str keys and pydantic models"
)


def _hint(value: Any) -> str:
    for kinds, hint in _HINTS:
        if isinstance(value, kinds):
            return hint
    if dataclasses.is_dataclass(value):
        return "pass dataclasses.asdict(value) or a pydantic model"
    return _GENERAL


class _Walk:
    """One conversion to plain data, with its options and the containers being walked."""

    def __init__(self, allow_nan: bool, ensure_utf8: bool, reducers: Reducers) -> None:
        self.allow_nan = allow_nan
        self.ensure_utf8 = ensure_utf8
        self.reducers = tuple(reducers)
        self.open: set[int] = set()  # ids of the containers on the current path

    def plain(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict or kind is list or kind is tuple:  # common types, without ABC checks
            return self._container(value, self._object if kind is dict else self._array)
        if value is None or isinstance(value, str | int | float):  # bool is an int
            return self._scalar(value)
        for reduced, reduce in self.reducers:
            if isinstance(value, reduced):
                return self.plain(reduce(value))
        if isinstance(value, Mapping):
            return self._container(value, self._object)
        if isinstance(value, Sequence) and not isinstance(value, _BINARY):
            return self._container(value, self._array)
        if isinstance(value, BaseModel):
            return self.plain(value.model_dump(mode="json"))
        raise _Refused(value, _hint(value))

    def _scalar(self, value: str | float | None) -> str | float | None:
        if isinstance(value, str):
            self._check_text(value)
        elif isinstance(value, int):
            if value.bit_length() > _LONG_INT_BITS:
                self._check_digits(value)
        elif value is not None and not (self.allow_nan or math.isfinite(value)):
            reason = "NaN and infinity are not JSON numbers"
            raise _Refused(value, reason, noun=f"a float {value}")
        return value

    def _container(self, value: Any, convert: Callable[[Any], Any]) -> Any:
        key = id(value)
        if key in self.open:
            raise _Refused(value, "it holds itself")
        self.open.add(key)
        try:
            return convert(value)
        finally:
            self.open.discard(key)

    def _object(self, value: Mapping[Any, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                noun = f"a key of type {_type_name(type(key))} ({key!r})"
                reason = "JSON object keys are strings; convert the key to str yourself"
                raise _Refused(key, reason, noun=noun)
            self._check_text(key)
            try:
                out[key] = self.plain(item)
            except _Refused as refused:
                refused.steps.append(_step(key))
                raise
        return out

    def _array(self, value: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for index, item in enumerate(value):
            try:
                out.append(self.plain(item))
            except _Refused as refused:
                refused.steps.append(_step(index))
                raise
        return out

    def _check_text(self, value: str) -> None:
        if self.ensure_utf8 and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                reason = f"it has a lone surrogate at index {exc.start}, which UTF-8 cannot encode"
                raise _Refused(value, reason) from None

    @staticmethod
    def _check_digits(value: int) -> None:
        try:
            int.__repr__(value)
        except ValueError:
            reason = "it has more digits than Python writes (sys.set_int_max_str_digits)"
            raise _Refused(value, reason) from None


def to_plain(
    value: Any,
    *,
    allow_nan: bool,
    ensure_utf8: bool = False,
    reducers: Reducers = (),
    what: str = "value",
    error: type[CanonicalJSONError] = CanonicalJSONError,
) -> Any:
    """``value`` as plain JSON data: dicts with str keys, lists, str, int, float, bool, None.

    Args:
        value: What to convert (see the module docstring for the rules).
        allow_nan: Let NaN and infinity through (else they are an error).
        ensure_utf8: Refuse strings UTF-8 cannot encode (lone surrogates).
        reducers: Types of the caller's domain and how to make them plain first.
        what: What ``value`` is, for the error message ("the arguments of 'refund'").
        error: The :class:`CanonicalJSONError` subclass to raise.

    Raises:
        CanonicalJSONError: ``value`` holds something canonical JSON cannot encode.
    """
    try:
        return _Walk(allow_nan, ensure_utf8, reducers).plain(value)
    except _Refused as refused:
        path = "$" + "".join(reversed(refused.steps))
        raise error(what, refused.type_name, path, refused.reason, refused.noun) from None


def canonical_json(
    value: Any,
    *,
    ensure_ascii: bool,
    allow_nan: bool,
    reducers: Reducers = (),
    what: str = "value",
    error: type[CanonicalJSONError] = CanonicalJSONError,
) -> str:
    """The canonical JSON text of ``value``.

    Args:
        ensure_ascii: Escape every non-ASCII character (``True``, step inputs) or
            keep it (``False``, approval arguments, hashed as UTF-8).
        allow_nan: Write NaN and infinity as ``NaN``/``Infinity`` (else refuse them).
        reducers, what, error: As for :func:`to_plain`.

    Raises:
        CanonicalJSONError: ``value`` holds something canonical JSON cannot encode.
    """
    plain = to_plain(
        value,
        allow_nan=allow_nan,
        ensure_utf8=not ensure_ascii,
        reducers=reducers,
        what=what,
        error=error,
    )
    return json.dumps(
        plain,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=ensure_ascii,
        allow_nan=allow_nan,
    )
