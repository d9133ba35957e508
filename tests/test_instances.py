"""Caches keyed by an object's identity: a freed object's number is never reused."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest

from tether import _instances as instances
from tether._instances import instance_key


class _Box:
    pass


class _Slotted:
    __slots__ = ("value",)  # takes no weak reference

    def __init__(self) -> None:
        self.value = 1


def test_a_live_object_keeps_its_number() -> None:
    box = _Box()
    assert instance_key(box) == instance_key(box)
    assert instance_key(box) != instance_key(_Box())


def test_a_freed_objects_number_is_never_given_to_another() -> None:
    seen: set[int] = set()
    addresses: set[int] = set()
    for _ in range(500):
        box = _Box()
        addresses.add(id(box))
        number = instance_key(box)
        assert number not in seen
        seen.add(number)
        del box
        gc.collect(0)
    # id() was reused (what made the old caches wrong); the numbers were not.
    assert len(addresses) < 500


def test_an_object_without_weak_references_is_held_and_keeps_its_number() -> None:
    thing = _Slotted()
    number = instance_key(thing)
    del thing
    assert instance_key(_Slotted()) != number


def test_a_weak_callback_fired_while_a_number_is_made_does_not_deadlock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The garbage collector may run inside :func:`instance_key` (making the weak reference
    allocates) and free another keyed object there: its callback ran on the same thread,
    waited for the lock that thread held, and the process hung (seen in CI)."""
    doomed = [_Box()]
    instance_key(doomed[0])
    real_ref = weakref.ref

    def collecting_ref(obj: object, callback: Any = None) -> Any:
        doomed.clear()  # the other object dies here, as a collection would free it
        return real_ref(obj, callback)

    monkeypatch.setattr(instances.weakref, "ref", collecting_ref)
    done: list[int] = []
    worker = threading.Thread(target=lambda: done.append(instance_key(_Box())), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert done, "instance_key deadlocked on a weak reference callback"
