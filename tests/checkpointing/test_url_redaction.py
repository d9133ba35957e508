"""Error messages never show a secret that was written into a checkpointer URL."""

from __future__ import annotations

import pytest

from tether import open_checkpointer
from tether.checkpointing._url import redact
from tether.errors import BackendUnavailableError, ConfigurationError

SECRET = "s3cr3t-Pw"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{SECRET}@db.internal:5432/tether",
        f"postgresql://db.internal/tether?password={SECRET}",
        f"postgresql://db.internal/tether?sslmode=require&PASSWORD={SECRET}&application_name=x",
        f"postgresql://db.internal/tether?sslpassword={SECRET}",
        f"postgresql:///tether?host=/var/run&password={SECRET}",
        f"redis://db.internal:6379/0?password={SECRET}",
        f"rediss://default:{SECRET}@cache:6380?ssl_cert_reqs=none",
        f"redis://cache:6379?username=u&password={SECRET}&token={SECRET}",
        f"redis://cache:6379?api_key={SECRET}#frag",
        f"postgresql://app:{SECRET.replace('-', '%2D')}@db.internal/tether",
    ],
)
def test_redact_hides_passwords_in_userinfo_and_query(url: str) -> None:
    shown = redact(url)
    assert SECRET not in shown
    assert SECRET.replace("-", "%2D") not in shown
    assert "***" in shown
    assert shown.partition("://")[0] == url.partition("://")[0]


def test_redact_keeps_what_is_not_secret() -> None:
    url = "postgresql://app@db.internal:5432/tether?sslmode=require&application_name=w1"
    assert redact(url) == url
    assert redact("postgresql://app:pw@db/x?sslmode=require") == (
        "postgresql://app:***@db/x?sslmode=require"
    )


async def test_open_errors_do_not_show_a_query_password() -> None:
    url = f"postgresql://127.0.0.1:1/tether?password={SECRET}&connect_timeout=1"
    with pytest.raises((BackendUnavailableError, ConfigurationError)) as caught:
        async with open_checkpointer(url, encryption=False, connect_timeout=1):
            pass
    assert SECRET not in str(caught.value)
    with pytest.raises(ConfigurationError) as bad_scheme:
        async with open_checkpointer(f"mysql://db/x?password={SECRET}"):
            pass
    assert SECRET not in str(bad_scheme.value)
