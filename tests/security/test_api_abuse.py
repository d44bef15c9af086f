"""Hostile requests: each gets a clear client error (never a 500, never a dead worker), and the server goes on.

The bodies are raw bytes, as an attacker would send them: JSON that Python's parser accepts but no input of a
task's can hold (lone surrogates, NaN), nesting deep enough to exhaust a recursive parser, file names that climb
out of the scratch directory or overflow a path, and requests that ask for far more work than one request should.
A lone surrogate in a program's text is no request's error: the program is judged as its bytes (a compile error).
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

from .suite import hostile_settings

MAX_BODY = 1 << 20
DEEP = b"[" * 100_000 + b"]" * 100_000


def _execute(**fields: object) -> bytes:
    return json.dumps({"language": "python", "code": "print(1)", **fields}).encode()


def _wide_names(n: int) -> list[str]:
    """``n`` distinct names of 800 bytes each, in characters that take 12 bytes each as escaped JSON (a
    surrogate pair): about 2.4 KB each on the way to the worker, three times what they take in the body."""
    part = "\U0001f600" * 60  # 240 bytes: a path component holds at most 255
    return [f"{i}/{part}/{part}/{part}" for i in range(n)]


def _jupyter(**fields: object) -> bytes:
    return json.dumps({"cells": ["print(1)"], **fields}, ensure_ascii=False).encode()


def _fusion(**fields: object) -> bytes:
    return json.dumps({"language": "python", "code": "print(1)", **fields}, ensure_ascii=False).encode()


# (id, route, raw body, acceptable statuses, a word the answer must contain)
REQUESTS: list[tuple[str, str, bytes, set[int], str]] = [
    ("body-over-limit", "/run_code", b'{"code": "#' + b"x" * MAX_BODY + b'", "language": "python"}', {413}, "larger"),
    ("not-json", "/v1/execute", b"{not json", {400, 422}, ""),
    ("deep-json-fusion", "/run_code", b'{"code": "1", "language": "python", "files": ' + DEEP + b"}", {400, 422}, ""),
    ("deep-json-native", "/v1/execute", b'{"language": "python", "code": "1", "stdin": ' + DEEP + b"}", {400, 422}, ""),
    (
        "deep-json-call-args",
        "/v1/evaluate",
        b'{"language": "python", "programs": ["1"], "function": "f", "tests": [{"call": '
        + DEEP
        + b', "expected": 1}]}',
        {400, 422},
        "",
    ),
    ("lone-surrogate-code", "/v1/execute", b'{"language": "python", "code": "print(\\"\\ud800\\")"}', {200}, "CE"),
    (
        "lone-surrogate-stdin",
        "/v1/execute",
        b'{"language": "python", "code": "1", "stdin": "\\udfff"}',
        {422},
        "Unicode",
    ),
    ("lone-surrogate-fusion", "/run_code", b'{"language": "python", "code": "\\ud800"}', {200}, "SyntaxError"),
    (
        "lone-surrogate-fusion-stdin",
        "/run_code",
        b'{"language": "python", "code": "1", "stdin": "\\udfff"}',
        {422},
        "Unicode",
    ),
    (
        "nan-timeout-native",
        "/v1/execute",
        b'{"language": "python", "code": "1", "limits": {"timeout_s": NaN}}',
        {422},
        "",
    ),
    ("path-traversal", "/v1/execute", _execute(files={"../escape": "eA=="}), {422}, "inside"),
    ("absolute-path", "/v1/execute", _execute(files={"/etc/cron.d/x": "eA=="}), {422}, "inside"),
    ("traversal-through-box", "/v1/execute", _execute(files={"/tmp/box/../../etc/x": "eA=="}), {422}, "inside"),
    ("nul-in-name", "/v1/execute", _execute(files={"a\u0000b": "eA=="}), {422}, "inside"),
    ("long-name", "/v1/execute", _execute(files={"x" * 300: "eA=="}), {422}, "limited"),
    ("deep-name", "/v1/execute", _execute(files={"a/" * 1000 + "x": "eA=="}), {422}, "limited"),
    ("fetch-traversal", "/v1/execute", _execute(fetch_files=["../../etc/passwd"]), {422}, "inside"),
    # Names that fit the body but not the frame that takes them to the worker (it was SE): on every route.
    ("wide-names", "/v1/execute", _fusion(files=dict.fromkeys(_wide_names(300), "eA==")), {422}, "names take"),
    ("wide-names-fusion", "/run_code", _fusion(files=dict.fromkeys(_wide_names(300), "eA==")), {422}, "names take"),
    ("wide-fetch-names-fusion", "/run_code", _fusion(fetch_files=_wide_names(300)), {422}, "names take"),
    ("wide-names-jupyter", "/run_jupyter", _jupyter(files=dict.fromkeys(_wide_names(300), "eA==")), {422}, "names"),
    ("too-many-files", "/v1/execute", _execute(files={f"f{i}": "" for i in range(5000)}), {422}, "at most"),
    ("too-many-fetched", "/run_code", _execute(fetch_files=[f"f{i}" for i in range(5000)]), {422}, "at most"),
    ("bad-base64", "/v1/execute", _execute(files={"x": "!!not base64!!"}), {422}, "base64"),
    ("bad-base64-fusion", "/run_code", _execute(files={"x": "%%%"}), {422}, "base64"),
    # Content beyond ASCII is never base64, and was a 500 (found by services/sandbox/tests/api/test_openapi.py).
    ("non-ascii-base64", "/v1/execute", _fusion(files={"x": "\u00e9A=="}), {422}, "base64"),
    ("non-ascii-base64-fusion", "/run_code", _fusion(files={"x": "\u0080"}), {422}, "base64"),
    ("non-ascii-base64-jupyter", "/run_jupyter", _jupyter(files={"x": "\U0001f600"}), {422}, "base64"),
    (
        "function-is-code",
        "/v1/evaluate",
        json.dumps(
            {
                "language": "python",
                "programs": ["1"],
                "function": "__import__('os').system('id')",
                "tests": [{"call": [], "expected": 1}],
            }
        ).encode(),
        {422},
        "identifier",
    ),
    (
        "too-many-runs",
        "/v1/evaluate",
        json.dumps(
            {"language": "python", "programs": ["print(1)"] * 50, "tests": [{"stdin": "", "expected_stdout": "1"}] * 50}
        ).encode(),
        {422},
        "max_runs_per_request",
    ),
    ("unknown-field", "/v1/execute", _execute(evil=True), {422}, ""),
    ("wrong-types", "/v1/execute", b'{"language": 1, "code": ["x"]}', {422}, ""),
]


@pytest.fixture(scope="module")
def server() -> Iterator[TestClient]:
    settings = hostile_settings("local", max_body_bytes=MAX_BODY, max_runs_per_request=1000)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize(("route", "raw", "statuses", "word"), [r[1:] for r in REQUESTS], ids=[r[0] for r in REQUESTS])
def test_hostile_request(server: TestClient, route: str, raw: bytes, statuses: set[int], word: str) -> None:
    r = server.post(route, content=raw, headers={"content-type": "application/json"})
    assert r.status_code in statuses, r.text[:500]
    assert word in r.text
    # The worker is alive and answers the next request correctly (distinct code: never a cached answer).
    ok = server.post("/v1/execute", json={"language": "python", "code": f"print(6 * 7)  # {route} {len(raw)}"})
    assert ok.status_code == 200 and ok.json()["run"]["stdout"] == "42\n", ok.text
    assert server.get("/readyz").json()["alive"] == 1


def test_unknown_language_is_a_sandbox_error_not_a_path(server: TestClient) -> None:
    r = server.post("/v1/execute", json={"language": "../../../bin/sh", "code": "id"})
    assert r.status_code == 200 and r.json()["verdict"] == "SE" and "not supported" in r.json()["run"]["stderr"]


def test_nan_and_infinite_fusion_timeouts_are_clamped(server: TestClient) -> None:
    """Python's JSON reader takes NaN and Infinity; a NaN deadline used to kill the worker."""
    for value in (b"NaN", b"Infinity", b"-Infinity", b"1e308"):
        raw = b'{"language": "python", "code": "print(%d)", "run_timeout": %s, "compile_timeout": %s}' % (
            len(value),
            value,
            value,
        )
        r = server.post("/run_code", content=raw, headers={"content-type": "application/json"})
        assert r.status_code in (200, 422), r.text
        if r.status_code == 200:
            assert r.json()["status"] == "Success", r.text
            assert r.json()["run_result"]["stdout"] == f"{len(value)}\n"
    assert server.get("/readyz").json()["alive"] == 1


def test_many_files_within_the_body_limit(server: TestClient) -> None:
    files = {f"dir{i % 10}/f{i}": base64.b64encode(b"x").decode() for i in range(2000)}
    r = server.post(
        "/v1/execute",
        json={
            "language": "python",
            "code": "import os\nprint(sum(len(f) for _, _, f in os.walk('.')))",
            "files": files,
        },
    )
    assert r.status_code == 200 and r.json()["run"]["stdout"] == "2001\n", r.text[:500]


def test_language_names_cannot_grow_the_metrics(server: TestClient) -> None:
    """Each language name a client made up was a Prometheus series for good: /metrics grew without bound."""

    def unknown(n: int) -> None:
        for _ in range(n):
            name = secrets.token_hex(8)
            r = server.post("/v1/execute", json={"language": name, "code": "1"})
            assert r.status_code == 200 and r.json()["verdict"] == "SE"
            tests = [{"stdin": "", "expected_stdout": ""}]
            r = server.post("/v1/evaluate", json={"language": name, "programs": ["1"], "tests": tests})
            assert r.status_code == 200, r.text

    unknown(10)
    before = server.get("/metrics").text
    unknown(1000)
    after = server.get("/metrics").text
    assert len(after) - len(before) < 200, len(after) - len(before)
    assert 'codegym_sandbox_runs_total{language="unknown",verdict="SE"}' in after


BIG = 10**400  # valid JSON, and past a float's range


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/execute", {"generated_code": "1", "language": "python", "timeout": BIG}),
        ("/execute", {"generated_code": "1", "language": "python", "timeout": 1, "max_output_characters": BIG}),
        ("/v1/execute", {"language": "python", "code": "1", "limits": {"timeout_s": BIG}}),
        ("/v1/execute", {"language": "python", "code": "1", "limits": {"memory_mb": BIG}}),
        ("/v1/sessions", {"ttl_s": BIG}),
        ("/v1/sessions", {"limits": {"cell_timeout_s": BIG}}),
        ("/execute_batch", {"scripts": ["1"], "timeout": BIG}),
        ("/run_jupyter", {"cells": ["1"], "cell_timeout": BIG}),
        ("/run_jupyter", {"cells": ["1"], "total_timeout": BIG}),
        ("/run_jupyter", {"cells": ["1"], "memory_limit_MB": BIG}),
        ("/run_code", {"code": "1", "language": "python", "run_timeout": BIG}),
        ("/run_code", {"code": "1", "language": "python", "memory_limit_MB": BIG}),
        (
            "/v1/evaluate",
            {"language": "python", "programs": ["1"], "tests": [{"stdin": "", "expected_stdout": ""}], "rel_tol": BIG},
        ),
    ],
)
def test_an_integer_past_a_floats_range_is_a_clear_4xx_or_clamped(
    server: TestClient, route: str, body: dict[str, object]
) -> None:
    """Every numeric field of every route: NeMo's ``timeout`` of 10**400 was a 500 and a traceback."""
    r = server.post(route, content=json.dumps(body).encode(), headers={"content-type": "application/json"})
    assert r.status_code < 500, r.text[:500]
    if r.status_code == 422:
        assert "detail" in r.json()
