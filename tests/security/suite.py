"""What every security test shares: the backends that run here, the suite's limits and its secrets.

The backends and their skips come from the sandbox's own test support module
(``services/sandbox/tests/sandbox_support.py``), loaded here under another name so that both suites share one
definition of "which backends run here".
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import secrets
import sys
import threading
from pathlib import Path
from typing import Any

from codegym_sandbox.config import Limits, Settings
from fastapi.testclient import TestClient

_SANDBOX_SUPPORT = Path(__file__).resolve().parents[2] / "services" / "sandbox" / "tests" / "sandbox_support.py"


def _load_sandbox_support() -> Any:
    spec = importlib.util.spec_from_file_location("codegym_sandbox_test_backends", _SANDBOX_SUPPORT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_backends = _load_sandbox_support()
BACKENDS: list[str] = _backends.BACKENDS
settings_for = _backends.settings_for
metric_value = _backends.metric_value

# A uid no other test server uses, so that "no process and no file of the program's uid" is about this suite.
PROGRAM_HOST_UID = 1_600_000_000 + os.getpid() % 100_000
_ranges = itertools.count(1)
# A secret the server process holds and no program may ever see.
SERVER_SECRET = f"codegym-secret-{secrets.token_hex(8)}"
os.environ["CODEGYM_SECURITY_TEST_SECRET"] = SERVER_SECRET

# Tight limits: hostile programs hit them in about a second.
SUITE_LIMITS = {
    "run_timeout_s": 1.5,
    "max_run_timeout_s": 3.0,
    "compile_timeout_s": 5.0,
    # What a request may ask for: a test of what a compile makes asks for room for a cold toolchain (rustc read
    # from a disk the whole suite keeps busy took 8 s of wall time for 0.1 s of CPU), a compile bomb gets the 5 s.
    "max_compile_timeout_s": 30.0,
    "memory_mb": 256,
    "max_memory_mb": 512,
    "processes": 64,
    "output_bytes": 1 << 20,
    "file_size_bytes": 16 << 20,
    "scratch_bytes": 32 << 20,
    "open_files": 64,
}


def hostile_settings(backend: str, main: bool = False, **overrides: Any) -> Settings:
    """One worker and none lent or parked beside it (so that every run and every check land in the same box,
    and every process of the programs' uid is that box's), tight limits, no cache. ``main``: its programs' uids
    begin at ``PROGRAM_HOST_UID``, whose processes the suite's host checks look for; others get a range of their
    own, as servers alive at once need (a server refuses uids another holds: ``backends/program_users.py``)."""
    first = PROGRAM_HOST_UID if main else PROGRAM_HOST_UID + 2 * 4096 * next(_ranges)  # two lock blocks apart
    fields: dict[str, Any] = {
        "workers": 1,
        "max_workers": 1,
        "cache_entries": 0,
        "host_uid": first,
        "limits": Limits.model_validate(SUITE_LIMITS),
        "max_body_bytes": 1 << 20,
        **overrides,
    }
    if backend != "local":
        fields.setdefault("container_user", f"{first}:{first}")
    settings: Settings = settings_for(backend, **fields)
    return settings


def at_once(client: TestClient, first: dict[str, Any], second: dict[str, Any], lead_s: float = 0.3) -> list[Any]:
    """Two /v1/execute requests at once on ``client``'s workers, the first ``lead_s`` ahead; their answers."""
    answers: list[Any] = [{}, {}]

    def send(i: int, body: dict[str, Any]) -> None:
        r = client.post("/v1/execute", json=body)
        assert r.status_code == 200, r.text
        answers[i] = r.json()

    threads = [threading.Thread(target=send, args=(i, body)) for i, body in enumerate((first, second))]
    threads[0].start()
    threading.Event().wait(lead_s)
    threads[1].start()
    for t in threads:
        t.join()
    return answers
