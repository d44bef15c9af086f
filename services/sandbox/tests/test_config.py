"""Settings validation."""

from __future__ import annotations

import pytest
from codegym_sandbox.config import Settings
from pydantic import ValidationError


def test_loopback_needs_no_token() -> None:
    for host in ("127.0.0.1", "localhost", "::1"):
        assert Settings(host=host).api_token is None


def test_other_addresses_need_a_token() -> None:
    with pytest.raises(ValidationError, match="API_TOKEN"):
        Settings(host="0.0.0.0")
    assert Settings(host="0.0.0.0", api_token="s3cret").api_token is not None


def test_unknown_settings_are_refused() -> None:
    with pytest.raises(ValidationError):
        Settings(wrokers=2)  # type: ignore[call-arg]


def test_defaults() -> None:
    s = Settings()
    assert s.limits.output_bytes == 8 << 20 and s.limits.run_timeout_s == 10.0
    # Programs see an allow-list of the host (agent/runtime.py): nothing needs hiding but what a site says.
    assert s.hide_paths == [] and s.runtime_packages is None


def test_trusted_proxies_are_addresses() -> None:
    """Every hop trusted ("*") would take whatever a client writes in X-Forwarded-For for its address."""
    assert Settings(trusted_proxies=["10.0.0.5", "10.1.0.0/16"]).trusted_proxies == ["10.0.0.5", "10.1.0.0/16"]
    for bad in ("*", "proxy.example.org"):
        with pytest.raises(ValidationError, match="TRUSTED_PROXIES"):
            Settings(trusted_proxies=[bad])
