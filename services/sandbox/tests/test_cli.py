"""``codegym-sandbox run``: one program through a running server, with the sandbox client."""

from __future__ import annotations

import functools
import json

import codegym_sandbox.client
import httpx
import pytest
from codegym_sandbox.cli import main

RAN = {
    "status": "Success",
    "message": "",
    "compile_result": None,
    "executor_pod_name": None,
    "files": {},
    "run_result": {"status": "Finished", "execution_time": 0.01, "return_code": 0, "stdout": "olleh\n", "stderr": ""},
}


def test_run_sends_the_program_and_prints_the_answer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sent: list[tuple[str, dict[str, object]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append((str(request.url), json.loads(request.content)))
        return httpx.Response(200, json=RAN)

    client = functools.partial(codegym_sandbox.client.SandboxClient, transport=httpx.MockTransport(handler))
    monkeypatch.setattr(codegym_sandbox.client, "SandboxClient", client)
    assert main(["run", "print(input()[::-1])", "--stdin", "hello", "--url", "http://box:9"]) == 0
    ((url, body),) = sent
    assert url == "http://box:9/run_code"
    assert (body["code"], body["language"], body["stdin"]) == ("print(input()[::-1])", "python", "hello")
    assert json.loads(capsys.readouterr().out)["run_result"]["stdout"] == "olleh\n"
