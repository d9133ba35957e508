"""The public API is exactly what ``tether.__all__`` lists; changing it is deliberate."""

import inspect

import tether

EXPECTED = [
    "BackendUnavailableError",
    "ConfigurationError",
    "MissingDependencyError",
    "MissingRedisModuleError",
    "TetherError",
    "__version__",
    "open_checkpointer",
    "open_checkpointer_sync",
]


def test_all_is_locked() -> None:
    assert tether.__all__ == EXPECTED


def test_all_is_sorted_and_importable() -> None:
    assert sorted(tether.__all__, key=str.casefold) == sorted(EXPECTED, key=str.casefold)
    for name in tether.__all__:
        assert getattr(tether, name) is not None, name


def test_no_private_leaks() -> None:
    # Subpackages appear as attributes once imported; everything else must be listed.
    public = {
        n for n in dir(tether) if not n.startswith("_") and not inspect.ismodule(getattr(tether, n))
    }
    assert public - set(tether.__all__) == set()
