"""Caches keyed by an object's identity: a freed object's number is never reused."""

from __future__ import annotations

import gc

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
