"""Sealing the run store's values that hold what users typed (design §3.14).

With a key ring, these columns are stored as ``enc1:`` plus the base64 of an
AES-256-GCM envelope (:class:`tether.checkpointing.encryption.KeyRing`), each
bound to where it belongs, so a value copied to another run, thread or event
fails authentication instead of being read:

=================================  =======================================
column                             associated data
=================================  =======================================
``tether_runs.input``              ``("tether.run", run_id, "input")``
``tether_runs.error``              ``("tether.run", run_id, "error")``
``tether_runs.kwargs``             ``("tether.run", run_id, "kwargs")``
``tether_crons.payload``           ``("tether.cron", cron_id, "payload")``
``tether_threads.state_values``    ``("tether.thread", thread_id, "values")``
``tether_threads.error``           ``("tether.thread", thread_id, "error")``
``tether_threads.interrupts``      ``("tether.thread", thread_id, "interrupts")``
``tether_run_events.data``         ``("tether.event", run_id, seq)``
=================================  =======================================

A run's options (``kwargs``: its ``config``, ``context``, stream modes, webhook)
are sealed whole, since ``context`` and ``config.configurable`` carry who the
run is for; nothing filters on them. So is a cron's payload (the input and
options of the runs it creates). Options and payloads stored in clear by versions
that did not seal them are still read (they were never authenticated), and the
key rotation pass counts them. Metadata and the threads' config stay in clear:
they are what listings filter on, as in LangGraph. Reading fails closed: an
``enc1:`` value without a key raises
:class:`~tether.checkpointing.encryption.MissingKeyError`, and a value in clear
while a key is set raises
:class:`~tether.checkpointing.encryption.PlaintextRefusedError` unless the ring
is in migration mode (``allow_plaintext``). Events the database itself writes
(``run.created``, ``run.started``: ids and counters, no user data) are
read in clear.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tether.checkpointing import (
    ENV_KEYS,
    KeyRing,
    MissingKeyError,
    PlaintextRefusedError,
    TamperedCiphertextError,
    aad,
)
from tether.runtime.store.encoding import dumps, loads

__all__ = ["NEWEST_RUN", "PLAIN", "SEALED_PREFIX", "SYSTEM_EVENTS", "Sealer", "refuse_sealed"]

SEALED_PREFIX = "enc1:"
SYSTEM_EVENTS = frozenset({"run.created", "run.started"})
"""Event kinds the run store writes in SQL, in clear (no user data)."""


NEWEST_RUN = "SELECT run_id, kwargs, input FROM tether_runs ORDER BY seq DESC LIMIT 1"
"""The newest run's sealable columns: sealed, the store was written with a key."""


def refuse_sealed(newest_run: Any, kwargs: Any, where: str) -> None:
    """Fail closed when a store opened without a key was written with one.

    ``newest_run`` is the row :data:`NEWEST_RUN` read (``None``: no run yet) and
    ``kwargs`` its ``kwargs`` column decoded from JSON. A key ring seals every
    run's options, so the newest run says whether the store is written with a
    key now. Without this check a client that forgot the key would store what
    its users typed in clear beside the ciphertext, and every worker with the
    key would refuse the run.
    """
    if newest_run is None:
        return
    text = newest_run["input"]
    sealed = isinstance(kwargs, str) and kwargs.startswith(SEALED_PREFIX)
    if sealed or (isinstance(text, str) and text.startswith(SEALED_PREFIX)):
        raise MissingKeyError(
            f"the run store at {where} holds encrypted runs (run {newest_run['run_id']} is "
            f"sealed) but no encryption key is configured: set {ENV_KEYS} to the key ring it "
            "was written with; it is not opened without one, so nothing is written in clear"
        )


class Sealer:
    """Seals and opens the run store's private values; a pass-through without keys.

    Args:
        keys: The key ring, or ``None`` to store values in clear.
    """

    def __init__(self, keys: KeyRing | None) -> None:
        self.keys = keys

    @property
    def enabled(self) -> bool:
        return self.keys is not None

    def seal_text(self, text: str, *where: str) -> str:
        """JSON ``text`` sealed for ``where`` (or as it is without keys)."""
        if self.keys is None:
            return text
        blob = self.keys.encrypt(text.encode("utf-8"), aad(*where))
        return SEALED_PREFIX + base64.b64encode(blob).decode("ascii")

    def seal(self, value: Any, *where: str) -> str:
        """``value`` as JSON, sealed for ``where``."""
        return self.seal_text(dumps(value), *where)

    def seal_json_column(self, text: str, *where: str) -> str:
        """JSON ``text`` for a ``jsonb`` column: sealed, it is the envelope as a JSON string."""
        return dumps(self.seal_text(text, *where)) if self.keys is not None else text

    def open(self, stored: str | bytes | None, *where: str, clear_ok: bool = False) -> Any:
        """The value ``stored`` holds (``None`` stays ``None``).

        Args:
            stored: The column's text.
            where: The associated data it was sealed with.
            clear_ok: Accept a value in clear even with keys (system events).
        """
        if stored is None:
            return None
        text = stored.decode("utf-8") if isinstance(stored, bytes) else stored
        place = "/".join(where)
        if not text.startswith(SEALED_PREFIX):
            if self.keys is not None and not clear_ok and not self.keys.allow_plaintext:
                raise PlaintextRefusedError(
                    f"run store value {place} is stored in clear but encryption is on; "
                    "refusing to trust an unauthenticated value (set "
                    "TETHER_ENCRYPTION_ALLOW_PLAINTEXT=1 while migrating a store that was "
                    "written without a key)"
                )
            return loads(text)
        if self.keys is None:
            raise MissingKeyError(
                f"run store value {place} is encrypted but no encryption key is configured; "
                f"set {ENV_KEYS} to the key ring it was written with"
            )
        try:
            blob = base64.b64decode(text[len(SEALED_PREFIX) :], validate=True)
        except (binascii.Error, ValueError):
            raise TamperedCiphertextError(
                f"run store value {place} is not a valid envelope; refusing to use it"
            ) from None
        return loads(self.keys.decrypt(blob, aad(*where), place))

    def rewrap(self, stored: str, *where: str) -> str | None:
        """``stored`` sealed under the active key, or ``None`` if it already is."""
        assert self.keys is not None
        blob = base64.b64decode(stored[len(SEALED_PREFIX) :], validate=True)
        fresh = self.keys.rewrap(blob, aad(*where), "/".join(where))
        if fresh is None:
            return None
        return SEALED_PREFIX + base64.b64encode(fresh).decode("ascii")

    def open_json(self, value: Any, *where: str, clear_ok: bool = False) -> Any:
        """A ``jsonb`` column's value: a sealed string is opened, anything else returned
        (with keys, only in migration mode or with ``clear_ok``)."""
        if isinstance(value, str) and value.startswith(SEALED_PREFIX):
            return self.open(value, *where)
        if self.keys is not None and value and not clear_ok and not self.keys.allow_plaintext:
            raise PlaintextRefusedError(
                f"run store value {'/'.join(where)} is stored in clear but encryption is on; "
                "refusing to trust an unauthenticated value"
            )
        return value


PLAIN = Sealer(None)
