"""The key ring: key material checks, the environment, and the bytes API."""

from __future__ import annotations

import base64

import pytest

from tests.checkpointing.encryption_helpers import key, ring, spec
from tether.checkpointing.encryption import (
    LANGGRAPH_KEY_ID,
    KeyRing,
    MissingKeyError,
    TamperedCiphertextError,
    UnknownKeyError,
    WrongKeyError,
    aad,
)
from tether.errors import ConfigurationError

B64_32 = base64.b64encode(b"k" * 32).decode()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"short:{base64.b64encode(b'x' * 16).decode()}", r"key 'short' is 16 bytes"),
        ("bad:not*base64!", r"key 'bad' is not valid base64"),
        (f"dup:{B64_32},dup:{B64_32}", r"key id 'dup' appears twice"),
        ("", r"entry 1 .* is not '<id>:<base64 key>'"),
        ("noid", r"entry 1 .*\('noid'\) is not '<id>:<base64 key>'"),
        (f"a:{B64_32},:{B64_32}", r"entry 2 .*\('no id'\)"),
        (f"a:{B64_32},b:", r"entry 2 .*\('b'\)"),
        (f"sp ace:{B64_32}", r"key id 'sp ace' is invalid"),
    ],
)
def test_bad_key_material_names_the_key(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        KeyRing.from_spec(text)


def test_empty_ring_and_bad_length_from_code() -> None:
    with pytest.raises(ConfigurationError, match="key ring is empty"):
        KeyRing([])
    with pytest.raises(ConfigurationError, match=r"key 'x' is 31 bytes"):
        KeyRing({"x": b"a" * 31})


def test_round_trip_and_binding() -> None:
    r = ring("k1")
    blob = r.encrypt(b"secret", aad("thread", "t1"))
    assert b"secret" not in blob
    assert r.decrypt(blob, aad("thread", "t1")) == b"secret"
    assert r.key_id_of(blob) == "k1"
    assert r.encrypt(b"secret", b"x") != r.encrypt(b"secret", b"x")  # fresh nonce
    with pytest.raises(TamperedCiphertextError, match=r"\(in t2\) under key 'k1'"):
        r.decrypt(blob, aad("thread", "t2"), where="in t2")
    # aad() cannot be fooled by moving a separator between parts.
    assert aad("ab", "c") != aad("a", "bc")


def test_each_failure_has_its_own_error() -> None:
    blob = ring("k1").encrypt(b"secret", b"ctx")
    with pytest.raises(UnknownKeyError, match=r"key 'k1', which is not in the key ring"):
        ring("k2").decrypt(blob, b"ctx")
    with pytest.raises(WrongKeyError, match=r"under id 'k1'"):
        KeyRing([("k1", b"\0" * 32)]).decrypt(blob, b"ctx")
    flipped = bytearray(blob)
    flipped[-5] ^= 0xFF
    with pytest.raises(TamperedCiphertextError, match="failed authentication"):
        ring("k1").decrypt(bytes(flipped), b"ctx")
    with pytest.raises(TamperedCiphertextError, match="not a tether ciphertext"):
        ring("k1").decrypt(b"hello", b"ctx")
    with pytest.raises(TamperedCiphertextError, match="truncated"):
        ring("k1").decrypt(blob[:20], b"ctx")
    with pytest.raises(TamperedCiphertextError, match="envelope version 9"):
        ring("k1").decrypt(blob[:4] + b"\x09" + blob[5:], b"ctx")


def test_rewrap_moves_to_the_active_key_and_skips_current() -> None:
    old = ring("k1").encrypt(b"v", b"ctx")
    both = ring("k2", "k1")
    new = both.rewrap(old, b"ctx")
    assert new is not None
    assert both.key_id_of(new) == "k2"
    assert both.rewrap(new, b"ctx") is None
    assert ring("k2").decrypt(new, b"ctx") == b"v"


def test_environment() -> None:
    assert KeyRing.from_env({}) is None
    r = KeyRing.from_env({"TETHER_ENCRYPTION_KEYS": spec("k2", "k1")})
    assert r is not None
    assert r.key_ids == ("k2", "k1")
    assert r.active_key_id == "k2"
    assert not r.allow_plaintext
    lg = KeyRing.from_env({"LANGGRAPH_AES_KEY": "x" * 32})
    assert lg is not None
    assert lg.key_ids == (LANGGRAPH_KEY_ID,)
    both = KeyRing.from_env(
        {
            "TETHER_ENCRYPTION_KEYS": spec("k1"),
            "LANGGRAPH_AES_KEY": "x" * 32,
            "TETHER_ENCRYPTION_ALLOW_PLAINTEXT": "1",
        }
    )
    assert both is not None
    assert both.key_ids == ("k1", "langgraph")
    assert both.allow_plaintext
    with pytest.raises(ConfigurationError, match=r"key 'langgraph' is 16 bytes"):
        KeyRing.from_env({"LANGGRAPH_AES_KEY": "x" * 16})
    with pytest.raises(MissingKeyError, match="no encryption key is configured"):
        KeyRing.from_env({"TETHER_ENCRYPTION_ALLOW_PLAINTEXT": "1"})


def test_generated_spec_parses_and_repr_hides_keys() -> None:
    text = KeyRing.generate_spec("fresh")
    assert text.startswith("fresh:")
    r = KeyRing.from_spec(text)
    assert r.key_ids == ("fresh",)
    assert KeyRing.from_spec(KeyRing.generate_spec()).active_key_id.startswith("k")
    assert base64.b64encode(key("k1")).decode() not in repr(ring("k1"))
    assert "k1" in repr(ring("k1"))
