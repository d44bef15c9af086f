"""A program's text that holds a lone surrogate (JSON's ``"\\ud800"``) is judged as that program, its bytes as
``surrogatepass`` writes them (``agent/program_bytes.py``), on every route, test kind and language: the other
programs of its request get their own verdicts. A lone surrogate in an input of the task's (a test's stdin) is
the request's error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

HONEST = "def f(x):\n    return x + 1\n\n\nif __name__ == '__main__':\n    print(f(int(input())))\n"
LITERAL = "print('\ud800')\n"  # bytes Python cannot decode in a string: a compile error, as python3 main.py's
COMMENT = HONEST + "# \ud800\n"  # the same bytes in a comment: python3 main.py's tokenizer rejects them there too
# Each judged as ``python3 main.py`` judges the same bytes: a declared encoding (a cookie, a byte-order mark) is
# the file's, where a file with none must be UTF-8 throughout; the bytes are the text's UTF-8 (program_bytes).
DECLARED = {
    "first line": "\ud800 = 1\n" + HONEST,  # bad bytes where compile decodes them anyway
    "first comment": "# \ud800\n" + HONEST,  # before any code: no encoding declared
    "latin-1": "# -*- coding: latin-1 -*-\n" + COMMENT,  # the same bytes are Latin-1 text
    "latin-1 second": "#!/usr/bin/env python3\n# coding=latin-1\n" + COMMENT,
    "late cookie": "x = 1\n# coding: latin-1\n" + COMMENT,  # no declaration after a line of code
    "utf-8 cookie": "# coding: utf-8\n" + COMMENT,
    "ascii cookie": "# coding: ascii\n" + HONEST + "# caf\u00e9\n",
    "byte-order mark": "\ufeff" + COMMENT,
    "valid UTF-8": HONEST + "# caf\u00e9 \U0001f600\n",
    "CR lines": COMMENT.replace("\n", "\r"),
}
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
    assert found["stdio"] == ["AC", "CE", "CE"], found
    assert found["stdio"] == found["assert"] == found["call"], found


def python3_main_py(program: str, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    """``python3 main.py`` run on the stdin ``1``, the program's file its text's UTF-8 (surrogatepass) bytes."""
    (tmp_path / "main.py").write_bytes(program.encode("utf-8", "surrogatepass"))
    return subprocess.run([sys.executable, "main.py"], cwd=tmp_path, input=b"1", capture_output=True, timeout=30)


def reference(program: str, tmp_path: Path) -> str:
    """The verdict ``python3 main.py`` earns on the stdin test ``1`` -> ``2``."""
    done = python3_main_py(program, tmp_path)
    if done.returncode == 0:
        return "AC" if done.stdout.strip() == b"2" else "WA"
    last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1]
    return "CE" if last.startswith("SyntaxError") else "RE"


def test_a_python_program_is_judged_as_python3_main_py_judges_its_bytes(client: TestClient, tmp_path: Path) -> None:
    expected = [reference(program, tmp_path) for program in DECLARED.values()]
    assert reference(COMMENT, tmp_path) == "CE"  # the case itself: the interpreter reads every line of the file
    found = {kind: verdicts(client, "python", list(DECLARED.values()), tests) for kind, tests in KINDS.items()}
    for kind, judged in found.items():
        assert dict(zip(DECLARED, judged, strict=True)) == dict(zip(DECLARED, expected, strict=True)), kind


def test_a_cpp_program_with_a_lone_surrogate_is_judged_as_its_bytes(client: TestClient) -> None:
    tests = {"tests": [{"stdin": "1 2", "expected_stdout": "3"}]}
    honest, printed = CPP % "", CPP % '"\ud800" <<'  # prints its bytes before the sum: a wrong answer
    assert verdicts(client, "cpp", [honest, printed, CPP % "/* \ud800 */"], tests) == ["AC", "WA", "AC"]


@pytest.mark.parametrize("program", [LITERAL, COMMENT], ids=["literal", "comment"])
def test_a_program_run_alone_with_a_lone_surrogate_is_judged(client: TestClient, program: str, tmp_path: Path) -> None:
    run = post(client, "/v1/execute", {"language": "python", "code": program, "stdin": "1"}).json()
    assert run["verdict"] == "CE" and "SyntaxError" in run["run"]["stderr"] and not run["run"]["stdout"], run
    fusion = post(client, "/run_code", {"language": "python", "code": program, "stdin": "1"}).json()
    assert fusion["status"] == "Failed" and "SyntaxError" in fusion["run_result"]["stderr"], fusion
    if program == COMMENT:  # the interpreter's own words, no frame of the sandbox's; the file's path, the box's
        expected = python3_main_py(program, tmp_path).stderr.decode()
        for stderr in (run["run"]["stderr"], fusion["run_result"]["stderr"]):
            assert stderr.replace("/tmp/box/", f"{tmp_path}/") == expected


@pytest.mark.parametrize("route", ["/v1/execute", "/run_code", "/v1/evaluate"])
def test_a_lone_surrogate_in_the_tasks_input_is_the_requests_error(client: TestClient, route: str) -> None:
    if route == "/v1/evaluate":
        body: dict[str, Any] = {"programs": [HONEST], "tests": [{"stdin": "\ud800", "expected_stdout": "1"}]}
    else:
        body = {"code": HONEST, "stdin": "\ud800"}
    r = post(client, route, {"language": "python", **body})
    assert r.status_code == 422 and "lone surrogate" in r.text
