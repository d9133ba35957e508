"""Envelopes exactly as tether wrote them before envelope version 2 (for compatibility tests).

Version 1, as documented then: ``b"TENC" | 0x01 | len(key id) | key id | key check value
(4) | nonce (12) | AES-256-GCM(ciphertext + tag)``, the header authenticated before the
associated data. Records were bound to ``"thread|kind|key"``, steps to
``"thread|step|index"``, and sealed metadata to ``aad("metadata", thread, ns, checkpoint)``.
"""

from __future__ import annotations

import base64
import hashlib
import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tests.checkpointing.encryption_helpers import key


def seal_v1(key_id: str, plaintext: bytes, aad: bytes) -> bytes:
    """A version-1 envelope of ``plaintext`` under the session key ``key_id``."""
    secret = key(key_id)
    kcv = hashlib.sha256(b"tether-key-check-value\x00" + secret).digest()[:4]
    header = b"TENC" + bytes([1, len(key_id)]) + key_id.encode() + kcv
    nonce = os.urandom(12)
    return header + nonce + AESGCM(secret).encrypt(nonce, plaintext, header + aad)


def record_payload_v1(key_id: str, json_text: str, thread_id: str, kind: str, k: str) -> str:
    """A record's stored text as version 1 wrote it."""
    blob = seal_v1(key_id, json_text.encode(), f"{thread_id}|{kind}|{k}".encode())
    return "enc1:" + base64.b64encode(blob).decode()


def step_payload_v1(key_id: str, json_text: str, thread_id: str, index: int) -> str:
    """A step's stored text as version 1 wrote it."""
    blob = seal_v1(key_id, json_text.encode(), f"{thread_id}|step|{index}".encode())
    return "enc1:" + base64.b64encode(blob).decode()


def envelope_version(stored: str | bytes) -> int:
    """The version byte of an envelope, or of a record's ``enc1:`` text."""
    if isinstance(stored, str):
        stored = base64.b64decode(stored.removeprefix("enc1:"))
    assert stored[:4] == b"TENC", stored[:8]
    return stored[4]
