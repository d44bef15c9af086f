"""A client is the address it connects from: an X-Forwarded-For header names it only from a proxy the settings
trust. uvicorn believes the header from 127.0.0.1 unless told not to, and any local process could then name
itself any client: read another client's sessions and NeMo-Skills ids, and pass the per-client cap."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench"))

from load_bench import ServerProcess  # the real-server helper the load and security tests use too

_ENV = {"CODEGYM_SANDBOX_BACKEND": "local", "CODEGYM_SANDBOX_SESSIONS__MAX_SESSIONS_PER_CLIENT": "1"}


def _created(url: str, forwarded_for: str) -> int:
    body = {"language": "python", "ttl_s": 30}
    return httpx.post(
        f"{url}/v1/sessions", json=body, headers={"X-Forwarded-For": forwarded_for}, timeout=60
    ).status_code


def test_a_forwarded_for_header_names_no_client_unless_its_proxy_is_trusted() -> None:
    for trusted, second in ((None, 429), ("127.0.0.1", 201)):
        env = _ENV if trusted is None else {**_ENV, "CODEGYM_SANDBOX_TRUSTED_PROXIES": f'["{trusted}"]'}
        server = ServerProcess(env, ["--workers", "1", "--log-level", "warning"]).start()
        try:
            assert _created(server.url, "10.0.0.1") == 201
            assert _created(server.url, "10.0.0.2") == second, trusted  # another client only behind its proxy
        finally:
            server.stop()
