"""A program's text that holds a lone surrogate (JSON's ``"\\ud800"``) is judged as that program, its bytes as
``surrogatepass`` writes them (``agent/program_bytes.py``), on every route, test kind and language: the other
programs of its request get their own verdicts. A lone surrogate in an input of the task's (a test's stdin) is
the request's error."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

HONEST = "def f(x):\n    return x + 1\n\n\nif __name__ == '__main__':\n    print(f(int(input())))\n"
LITERAL = "print('\ud800')\n"  # bytes Python cannot decode in a string: a compile error, as python3 main.py's
COMMENT = HONEST + "# \ud800\n"  # the same bytes in a comment: whatever Python makes of them, alike everywhere
KINDS: dict[str, dict[str, Any]] = {
    "stdio": {"tests": [{"stdin": "1", "expected_stdout": "2"}, {"stdin": "5", "expected_stdout": "6"}]},
    "assert": {"tests": [{"assert_code": "assert f(1) == 2"}, {"assert_code": "assert f(5) == 6"}]},
    "call": {"tests": [{"call": [1], "expected": 2}, {"call": [5], "expected": 6}], "function": "f"},
}
CPP = "#include <iostream>\nint main(){int a,b;std::cin>>a>>b;std::cout<<%s a+b<<std::endl;}"


def post(client: TestClient, route: str, body: dict[str, Any]) -> httpx.Response:
    """``body`` as JSON with each lone surrogate as its escape, as ``json.dumps`` writes it (httpx refuses one)."""
    return client.post(route, content=json.dumps(body), headers={"content-type": "application/json"})


def verdicts(client: TestClient, language: str, programs: list[str], tests: dict[str, Any]) -> list[str]:
    r = post(client, "/v1/evaluate", {"language": language, "programs": programs, **tests})
    assert r.status_code == 200, r.text
    return [result["verdict"] for result in r.json()["results"]]


def test_a_python_program_with_a_lone_surrogate_is_judged_alike_on_every_test_kind(client: TestClient) -> None:
    found = {kind: verdicts(client, "python", [HONEST, LITERAL, COMMENT], tests) for kind, tests in KINDS.items()}
    assert found["stdio"][:2] == ["AC", "CE"], found
    assert found["stdio"] == found["assert"] == found["call"], found


def test_a_cpp_program_with_a_lone_surrogate_is_judged_as_its_bytes(client: TestClient) -> None:
    tests = {"tests": [{"stdin": "1 2", "expected_stdout": "3"}]}
    honest, printed = CPP % "", CPP % '"\ud800" <<'  # prints its bytes before the sum: a wrong answer
    assert verdicts(client, "cpp", [honest, printed, CPP % "/* \ud800 */"], tests) == ["AC", "WA", "AC"]


def test_a_program_run_alone_with_a_lone_surrogate_is_judged(client: TestClient) -> None:
    run = post(client, "/v1/execute", {"language": "python", "code": LITERAL}).json()
    assert run["verdict"] == "CE" and "SyntaxError" in run["run"]["stderr"]
    fusion = post(client, "/run_code", {"language": "python", "code": LITERAL}).json()
    assert fusion["status"] == "Failed" and "SyntaxError" in fusion["run_result"]["stderr"]


@pytest.mark.parametrize("route", ["/v1/execute", "/run_code", "/v1/evaluate"])
def test_a_lone_surrogate_in_the_tasks_input_is_the_requests_error(client: TestClient, route: str) -> None:
    if route == "/v1/evaluate":
        body: dict[str, Any] = {"programs": [HONEST], "tests": [{"stdin": "\ud800", "expected_stdout": "1"}]}
    else:
        body = {"code": HONEST, "stdin": "\ud800"}
    r = post(client, route, {"language": "python", **body})
    assert r.status_code == 422 and "lone surrogate" in r.text
