"""AES-256-GCM envelopes and the key ring that makes and opens them.

Stable bytes API (other tether packages encrypt their own records with it)::

    ring = KeyRing.from_spec("k2:<base64 32 bytes>,k1:<base64 32 bytes>")
    blob = ring.encrypt(b"plaintext", aad=b"what this record is and where it lives")
    assert ring.decrypt(blob, aad=b"what this record is and where it lives") == b"plaintext"

* ``encrypt(plaintext, aad) -> bytes`` seals under the *active* key (the first
  in the ring) with a fresh 96-bit nonce; ``encrypt_many([(plaintext, aad),
  ...])`` seals several values at once, each with its own fresh nonce.
* ``decrypt(blob, aad, where="") -> bytes`` opens a blob written under any key
  in the ring; ``aad`` must equal the one given to ``encrypt``. ``where`` only
  names the record in error messages.
* ``is_envelope(blob)``, ``key_id_of(blob)``, ``envelope_version(blob)`` and
  ``rewrap(blob, aad)`` (re-seal under the active key and the current version,
  ``None`` when already current) support rotation.
* :func:`aad` builds unambiguous associated data from text parts
  (:func:`aad_part` is one part, for extending a prefix built once); what each
  kind of value is bound to is in :mod:`tether.checkpointing.binding`.

Envelope layout (version 2)::

    b"TENC" | 0x02 | len(key_id) | key_id | key check value (4) | nonce (12) | ciphertext+tag

The header (everything before the nonce) is authenticated too. The key check
value (the first 4 bytes of SHA-256 over a label and the key) tells a wrong key
apart from tampered data; it reveals nothing useful about a 256-bit key.
Version 1 has the same layout; its envelopes were bound to other associated
data for some kinds of value (see :mod:`tether.checkpointing.binding`), so
``decrypt`` takes that data as ``v1_aad`` where it differs.

Version 3 has the same layout again, but is sealed under a thread's own data
key (:class:`DataKey`) instead of a ring key, and names that data key where
version 2 names the ring key. The data key is kept in the store wrapped by the
ring (see :mod:`tether.store._data_keys`); erasing the thread destroys it, so
every copy of the thread's version-3 ciphertext becomes unreadable
(crypto-shredding). ``encrypt(..., data_key=k)`` writes version 3,
``decrypt(..., data_key=k)`` opens it, and ``rewrap`` leaves it alone: rotating
the ring rewraps the data keys, not the values.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tether.errors import ConfigurationError, TetherError

__all__ = [
    "ENV_ALLOW_PLAINTEXT",
    "ENV_KEYS",
    "ENV_LANGGRAPH_KEY",
    "LANGGRAPH_KEY_ID",
    "DataKey",
    "EncryptionError",
    "ErasedDataKeyError",
    "KeyRing",
    "MissingKeyError",
    "PlaintextRefusedError",
    "TamperedCiphertextError",
    "UnknownKeyError",
    "WrongKeyError",
    "aad",
    "aad_part",
    "data_key_named",
    "data_key_named_in_base64",
    "key_ring_for",
]

ENV_KEYS = "TETHER_ENCRYPTION_KEYS"
ENV_LANGGRAPH_KEY = "LANGGRAPH_AES_KEY"
ENV_ALLOW_PLAINTEXT = "TETHER_ENCRYPTION_ALLOW_PLAINTEXT"
LANGGRAPH_KEY_ID = "langgraph"
"""The key id a ``LANGGRAPH_AES_KEY`` gets in the ring."""

MAGIC = b"TENC"
VERSION = 2
DATA_KEY_VERSION = 3
_READABLE = frozenset({1, VERSION, DATA_KEY_VERSION})
KEY_BYTES = 32
NONCE_BYTES = 12
_KCV_BYTES = 4
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_FIX = (
    f"set {ENV_KEYS}='<id>:<base64 of 32 random bytes>[,<older id>:<key>...]' "
    "(`tether keys generate` prints one)"
)
_TRUTHY = {"1", "true", "yes", "on"}


class EncryptionError(TetherError):
    """A value could not be encrypted or decrypted; the message says which and why."""


class MissingKeyError(EncryptionError, ConfigurationError):
    """Encryption was requested but no key is configured."""


class UnknownKeyError(EncryptionError):
    """A ciphertext names a key id the ring does not hold."""


class WrongKeyError(EncryptionError):
    """The ring holds a key under the ciphertext's key id, but it is a different key."""


class TamperedCiphertextError(EncryptionError):
    """Authentication failed: the bytes or the record they are bound to were changed."""


class ErasedDataKeyError(TamperedCiphertextError):
    """A value was sealed under a thread's data key that the store no longer holds.

    The thread was erased (its data key destroyed: crypto-shredding), or the
    ciphertext was copied in from another store.
    """


class PlaintextRefusedError(EncryptionError):
    """A value stored in clear was read while encryption is on (and migration mode is off)."""


def aad(*parts: str) -> bytes:
    """Associated data from text parts, length-prefixed so no two lists collide.

    ``aad(*a) + aad(*b) == aad(*a, *b)``, so a fixed prefix may be built once
    and extended (the encrypted saver caches one per thread and namespace).
    """
    return b"".join([aad_part(part) for part in parts])


def aad_part(part: str) -> bytes:
    """One length-prefixed part of :func:`aad`."""
    raw = part.encode()
    return len(raw).to_bytes(4, "big") + raw


def _kcv(key: bytes) -> bytes:
    return hashlib.sha256(b"tether-key-check-value\x00" + key).digest()[:_KCV_BYTES]


def _check_key_id(key_id: str) -> str:
    if not _KEY_ID.fullmatch(key_id):
        raise ConfigurationError(
            f"encryption key id {key_id!r} is invalid: use 1-64 characters from "
            "A-Z a-z 0-9 . _ -; " + _FIX
        )
    return key_id


def _decode_key(key_id: str, text: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(
            f"encryption key {key_id!r} is not valid base64; " + _FIX
        ) from None
    return key


@dataclass(frozen=True)
class _Key:
    key_id: str
    aead: AESGCM
    kcv: bytes
    header: bytes


class DataKey:
    """One thread's own AES-256 data key (envelope version 3).

    Made by :meth:`generate`, stored wrapped by the ring, and rebuilt from its
    id and bytes (``DataKey(key_id, raw)``) when read back.
    """

    __slots__ = ("aead", "header", "kcv", "key_id", "raw")

    def __init__(self, key_id: str, raw: bytes) -> None:
        _check_key_id(key_id)
        if len(raw) != KEY_BYTES:
            raise TamperedCiphertextError(
                f"data key {key_id!r} is {len(raw)} bytes, not {KEY_BYTES}; its stored record "
                "is corrupt"
            )
        self.key_id = key_id
        self.raw = raw
        self.aead = AESGCM(raw)
        self.kcv = _kcv(raw)
        raw_id = key_id.encode()
        self.header = MAGIC + bytes([DATA_KEY_VERSION, len(raw_id)]) + raw_id + self.kcv

    @classmethod
    def generate(cls) -> DataKey:
        """A fresh random data key with a fresh random id."""
        return cls(f"d{secrets.token_hex(8)}", secrets.token_bytes(KEY_BYTES))

    def __repr__(self) -> str:  # never print key material
        return f"DataKey(key_id={self.key_id!r})"


class KeyRing:
    """Named AES-256 keys; the first is active (encrypts), all of them decrypt.

    Args:
        keys: ``(key_id, 32-byte key)`` pairs, active key first, or a mapping in
            that order.
        allow_plaintext: Migration mode: accept values stored in clear when the
            encrypted saver reads them (they are encrypted when next written).

    Raises:
        ConfigurationError: No key, a key that is not 32 bytes, a bad or
            duplicate key id; the message names the key id.
    """

    def __init__(
        self,
        keys: Iterable[tuple[str, bytes]] | Mapping[str, bytes],
        *,
        allow_plaintext: bool = False,
    ) -> None:
        pairs = list(keys.items() if isinstance(keys, Mapping) else keys)
        if not pairs:
            raise ConfigurationError("the encryption key ring is empty; " + _FIX)
        by_id: dict[str, _Key] = {}
        for key_id, key in pairs:
            _check_key_id(key_id)
            if key_id in by_id:
                raise ConfigurationError(
                    f"encryption key id {key_id!r} appears twice in the key ring; "
                    "give every key its own id"
                )
            if len(key) != KEY_BYTES:
                raise ConfigurationError(
                    f"encryption key {key_id!r} is {len(key)} bytes; AES-256 needs exactly "
                    f"{KEY_BYTES}; " + _FIX
                )
            raw_id = key_id.encode()
            kcv = _kcv(key)
            header = MAGIC + bytes([VERSION, len(raw_id)]) + raw_id + kcv
            by_id[key_id] = _Key(key_id, AESGCM(key), kcv, header)
        self.allow_plaintext = allow_plaintext
        self._pairs: tuple[tuple[str, bytes], ...] = tuple(pairs)
        self._by_id = by_id
        self._active = by_id[pairs[0][0]]
        self.fingerprint = hashlib.sha256(
            b"".join(aad_part(k.key_id) + k.kcv for k in by_id.values())
        ).hexdigest()
        """Names these keys (ids and check values) without revealing them: caches of
        data keys unwrapped by this ring are kept apart from other rings'."""

    def with_allow_plaintext(self, allow: bool = True) -> KeyRing:
        """The same keys with migration mode switched on (or off)."""
        return KeyRing(self._pairs, allow_plaintext=allow)

    def __repr__(self) -> str:  # never print key material
        return f"KeyRing(key_ids={self.key_ids!r}, allow_plaintext={self.allow_plaintext})"

    # -- construction ------------------------------------------------------
    @classmethod
    def from_spec(cls, spec: str, *, allow_plaintext: bool = False) -> KeyRing:
        """Parse ``"id1:base64key,id2:base64key"`` (the ``TETHER_ENCRYPTION_KEYS`` format)."""
        pairs: list[tuple[str, bytes]] = []
        for position, item in enumerate(spec.split(","), start=1):
            key_id, sep, text = item.strip().partition(":")
            if not sep or not key_id or not text.strip():
                raise ConfigurationError(
                    f"entry {position} of the encryption key list "
                    f"({key_id.strip() or 'no id'!r}) is not '<id>:<base64 key>'; " + _FIX
                )
            key_id = _check_key_id(key_id.strip())
            pairs.append((key_id, _decode_key(key_id, text)))
        return cls(pairs, allow_plaintext=allow_plaintext)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> KeyRing | None:
        """The ring ``TETHER_ENCRYPTION_KEYS`` and ``LANGGRAPH_AES_KEY`` describe, if any.

        ``LANGGRAPH_AES_KEY`` (LangGraph's variable: the key's 32 characters
        as-is) joins the ring with key id ``"langgraph"``, after the tether keys,
        so it is active only when it is the sole key.
        ``TETHER_ENCRYPTION_ALLOW_PLAINTEXT=1`` turns migration mode on.
        """
        env = os.environ if environ is None else environ
        allow = env.get(ENV_ALLOW_PLAINTEXT, "").strip().lower() in _TRUTHY
        spec = env.get(ENV_KEYS)
        langgraph_key = env.get(ENV_LANGGRAPH_KEY)
        if spec is not None and not spec.replace(",", "").strip():
            # Set but empty is a mistake (a secret that failed to render), never "off".
            raise ConfigurationError(
                f"{ENV_KEYS} is set but holds no key; " + _FIX + f", or unset {ENV_KEYS} "
                "(and pass encryption=False) to run without encryption"
            )
        if spec is None and langgraph_key is None:
            if allow:
                raise MissingKeyError(
                    f"{ENV_ALLOW_PLAINTEXT} is set but no encryption key is configured; " + _FIX
                )
            return None
        pairs: list[tuple[str, bytes]] = list(cls.from_spec(spec)._pairs) if spec else []
        if langgraph_key is not None:
            pairs.append((LANGGRAPH_KEY_ID, langgraph_key.encode()))
        return cls(pairs, allow_plaintext=allow)

    @staticmethod
    def generate_spec(key_id: str | None = None) -> str:
        """A fresh ``id:base64key`` entry for ``TETHER_ENCRYPTION_KEYS``."""
        key_id = _check_key_id(key_id or f"k{secrets.token_hex(4)}")
        return f"{key_id}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"

    # -- the bytes API -----------------------------------------------------
    @property
    def active_key_id(self) -> str:
        """The id of the key new ciphertexts are written under."""
        return self._active.key_id

    @property
    def key_ids(self) -> tuple[str, ...]:
        """Every key id in the ring, active first."""
        return tuple(self._by_id)

    def encrypt(self, plaintext: bytes, aad: bytes, *, data_key: DataKey | None = None) -> bytes:
        """Seal ``plaintext``, bound to ``aad``, under the active key (or ``data_key``)."""
        key: _Key | DataKey = self._active if data_key is None else data_key
        nonce = os.urandom(NONCE_BYTES)
        return key.header + nonce + key.aead.encrypt(nonce, plaintext, key.header + aad)

    def encrypt_many(
        self, items: Sequence[tuple[bytes, bytes]], *, data_key: DataKey | None = None
    ) -> list[bytes]:
        """Seal each ``(plaintext, aad)`` pair as :meth:`encrypt` would, in order.

        Every envelope still gets its own fresh random 96-bit nonce; they are
        drawn from the OS in one call instead of one call per value.
        """
        key: _Key | DataKey = self._active if data_key is None else data_key
        header, seal = key.header, key.aead.encrypt
        nonces = os.urandom(NONCE_BYTES * len(items))
        return [
            header + nonce + seal(nonce, plaintext, header + data)
            for at, (plaintext, data) in zip(range(0, len(nonces), NONCE_BYTES), items, strict=True)
            for nonce in [nonces[at : at + NONCE_BYTES]]
        ]

    def decrypt(
        self,
        blob: bytes,
        aad: bytes,
        where: str = "",
        *,
        v1_aad: bytes | None = None,
        data_key: DataKey | None = None,
    ) -> bytes:
        """Open ``blob``; raises an :class:`EncryptionError` subclass, never returns garbage.

        Args:
            blob: An envelope made by :meth:`encrypt` with a key in this ring.
            aad: The associated data it was sealed with.
            where: Names the record in error messages (e.g. thread and channel).
            v1_aad: The associated data a version-1 envelope of this value was
                sealed with, where it differs from ``aad``.
            data_key: The thread's data key, for a version-3 envelope.
        """
        place = f" ({where})" if where else ""
        key_id, kcv, body_at = self._parse(blob, place)
        key: _Key | DataKey | None
        if blob[4] == DATA_KEY_VERSION:
            key = data_key
            if key is None:
                raise ErasedDataKeyError(
                    f"value{place} was sealed with its thread's data key {key_id!r}, which this "
                    "store does not hold: the thread was erased (its data key was destroyed, so "
                    "no copy of its values can be read again), or the value was copied in from "
                    "another thread or store; refusing it"
                )
            if key.key_id != key_id:
                raise TamperedCiphertextError(
                    f"value{place} was sealed with data key {key_id!r}, but its thread's data "
                    f"key is {key.key_id!r}: it was copied from another thread, or written "
                    "before the thread was erased; refusing it"
                )
        else:
            key = self._by_id.get(key_id)
        if key is None:
            raise UnknownKeyError(
                f"value{place} was encrypted with key {key_id!r}, which is not in the key ring "
                f"(it holds {', '.join(self.key_ids)}); add that key back to {ENV_KEYS}"
            )
        if kcv != key.kcv:
            raise WrongKeyError(
                f"value{place} was encrypted with a different key than the one the ring holds "
                f"under id {key_id!r}; restore the original key material for {key_id!r}"
            )
        if v1_aad is not None and blob[4] == 1:
            aad = v1_aad
        nonce = blob[body_at : body_at + NONCE_BYTES]
        try:
            return key.aead.decrypt(nonce, blob[body_at + NONCE_BYTES :], blob[:body_at] + aad)
        except InvalidTag:
            which = f"data key {key_id!r}" if blob[4] == DATA_KEY_VERSION else f"key {key_id!r}"
            raise TamperedCiphertextError(
                f"value{place} under {which} failed authentication: it was modified, or "
                "copied from another thread, checkpoint, channel or record (ciphertexts are "
                "bound to where they were written); refusing to use it"
            ) from None

    def is_envelope(self, value: object) -> bool:
        """Whether ``value`` looks like an envelope (bytes with tether's header)."""
        return isinstance(value, bytes) and value[:4] == MAGIC

    def key_id_of(self, blob: bytes) -> str:
        """The key id an envelope names in its header."""
        return self._parse(blob, "")[0]

    def envelope_version(self, blob: bytes) -> int:
        """The format version an envelope names in its header."""
        self._parse(blob, "")
        return blob[4]

    def rewrap(
        self, blob: bytes, aad: bytes, where: str = "", *, v1_aad: bytes | None = None
    ) -> bytes | None:
        """Re-seal ``blob`` under the active key and the current envelope version.

        Returns ``None`` if it already uses both, and for a version-3 envelope
        (sealed under a thread's data key, which rotation rewraps instead).
        ``aad`` and ``v1_aad`` are as for :meth:`decrypt`; the new envelope is
        bound to ``aad``.
        """
        key_id = self.key_id_of(blob)
        if blob[4] == DATA_KEY_VERSION or (key_id == self.active_key_id and blob[4] == VERSION):
            return None
        return self.encrypt(self.decrypt(blob, aad, where, v1_aad=v1_aad), aad)

    def _parse(self, blob: bytes, place: str) -> tuple[str, bytes, int]:
        if not self.is_envelope(blob) or len(blob) < 6:
            raise TamperedCiphertextError(f"value{place} is not a tether ciphertext")
        if blob[4] not in _READABLE:
            raise TamperedCiphertextError(
                f"value{place} has envelope version {blob[4]}; this tether reads versions "
                f"{', '.join(map(str, sorted(_READABLE)))} (upgrade tether, or the value was "
                "modified)"
            )
        id_len = blob[5]
        key_at = 6 + id_len
        body_at = key_at + _KCV_BYTES
        if len(blob) < body_at + NONCE_BYTES + 16:
            raise TamperedCiphertextError(f"value{place} is truncated")
        try:
            key_id = blob[6:key_at].decode("ascii")
        except UnicodeDecodeError:
            raise TamperedCiphertextError(f"value{place} has a corrupt header") from None
        return key_id, blob[key_at:body_at], body_at


# The header (magic, version, id length, an id of at most 64) fits in 70 bytes,
# which are the first 96 characters of the envelope's base64.
_HEADER_BASE64_CHARS = 96


def data_key_named(value: object) -> str | None:
    """The thread data key a version-3 envelope is sealed under.

    ``None`` for a value sealed under a ring key and for anything that is not an
    envelope. It never raises: opening the value reports a damaged header.
    """
    if type(value) is not bytes or len(value) <= 6 or value[:4] != MAGIC:
        return None
    if value[4] != DATA_KEY_VERSION:
        return None
    return value[6 : 6 + value[5]].decode("ascii", "replace")


def data_key_named_in_base64(text: str) -> str | None:
    """:func:`data_key_named` of an envelope stored as base64 text (only its header is read)."""
    head = text[:_HEADER_BASE64_CHARS]
    try:
        return data_key_named(base64.b64decode(head + "=" * (-len(head) % 4)))
    except (binascii.Error, ValueError):
        return None


def key_ring_for(encryption: KeyRing | bool | None) -> KeyRing | None:
    """The ring to encrypt with: the argument, else the environment, else none.

    Args:
        encryption: A :class:`KeyRing`; ``True`` (the environment's, required);
            ``None`` (the environment's, if any); ``False`` (none).

    Raises:
        MissingKeyError: ``True`` and no key in the environment.
        ConfigurationError: Anything else.
    """
    if isinstance(encryption, KeyRing):
        return encryption
    if encryption is None or encryption is True:
        ring = KeyRing.from_env()
        if ring is None and encryption is True:
            raise MissingKeyError(
                f"encryption=True but no key is configured: set {ENV_KEYS} "
                "('<id>:<base64 32-byte key>', see `tether keys generate`) or pass "
                "encryption=KeyRing(...)"
            )
        return ring
    if encryption is False:
        return None
    raise ConfigurationError(
        f"encryption must be a KeyRing, True, False or None, not {type(encryption).__name__}"
    )
