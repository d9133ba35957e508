"""Run-scoped worker roles for tests (the fixtures ``role`` and ``admin_url`` are in conftest)."""

from __future__ import annotations


def role_url(admin_url: str, role: str) -> str:
    """``admin_url`` with ``role`` as its user (the test server trusts local logins)."""
    scheme, _, rest = admin_url.partition("://")
    _, _, host = rest.rpartition("@")
    return f"{scheme}://{role}@{host}"
