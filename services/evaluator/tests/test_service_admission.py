"""What a job may name: the service's sandbox token goes only to its own sandbox, no credential of the service's
process goes to a URL a job names, and jobs read only the files and endpoints the operator lends."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from codegym_evaluator.service.admission import Refused, admit
from codegym_evaluator.service.app import create_app
from codegym_evaluator.service.settings import EvaluatorSettings

from .test_service import wait

pytestmark = pytest.mark.anyio
SECRET = "THE-SANDBOX-SECRET"
TASK = {"task_id": "t", "prompt": "p", "kind": "stdio", "tests": [{"stdin": "1\n", "expected_stdout": "2\n"}]}


class Recorder:
    """A server on loopback that notes the Authorization header of every request and answers 503."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []
        seen = self.seen

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                seen.append((self.path, self.headers.get("authorization")))
                self.send_response(503)
                self.send_header("content-length", "0")
                self.end_headers()

            do_GET = do_POST

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorders() -> Iterator[tuple[Recorder, Recorder]]:
    own, other = Recorder(), Recorder()
    yield own, other
    own.close()
    other.close()


@pytest.fixture
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "tasks.jsonl").write_text(json.dumps(TASK) + "\n")
    (tmp_path / "in" / "samples.jsonl").write_text(json.dumps({"task_id": "t", "completion": "print(2)"}) + "\n")
    return tmp_path / "in"


async def run_job(settings: EvaluatorSettings, body: dict[str, Any], **transports: Any) -> tuple[int, Any]:
    """Post ``body`` to a fresh service; wait for the job when it starts. Returns the status and the detail
    (refused) or the job's view (started)."""
    app = create_app(settings, **transports)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://eval") as client,
    ):
        reply = await client.post("/v1/jobs", json=body)
        if reply.status_code != 202:
            return reply.status_code, reply.json()["detail"]
        view = await wait(client, reply.json()["id"])
        return 202, {**view, "summary_file": (await client.get(f"/v1/jobs/{view['id']}/summary")).text}


async def test_the_sandbox_token_goes_only_to_the_services_own_sandbox(
    tmp_path: Path, inputs: Path, recorders: tuple[Recorder, Recorder], monkeypatch: pytest.MonkeyPatch
) -> None:
    own, other = recorders
    # Credentials in the service's environment are its own too: a job names a URL, it gets none of them.
    monkeypatch.setenv("CODEGYM_SANDBOX_API_TOKEN", "THE-ENVIRONMENTS-TOKEN")
    monkeypatch.setenv("OPENAI_API_KEY", "THE-ENVIRONMENTS-KEY")
    settings = EvaluatorSettings(
        sandbox_url=[own.url], sandbox_token=SECRET, data_dir=str(tmp_path / "jobs"), input_dir=str(inputs)
    )
    job = {"dataset": "jsonl", "path": "tasks.jsonl", "samples": "samples.jsonl", "retries": 0}
    status, detail = await run_job(settings, {**job, "sandbox_url": [other.url]})
    assert status == 403 and "not a sandbox of this service" in detail and "JOB_SANDBOX_URLS" in detail
    assert other.seen == []

    allowing = settings.model_copy(update={"job_sandbox_urls": [other.url + "/"]})
    assert (await run_job(allowing, {**job, "sandbox_url": [other.url]}))[0] == 202
    assert other.seen and {auth for _, auth in other.seen} == {None}
    its_own = {**job, "sandbox_url": [other.url], "sandbox_token": "the-jobs-own"}
    assert (await run_job(allowing, its_own))[0] == 202
    assert other.seen[-1][1] == "Bearer the-jobs-own"
    chat = {"dataset": "jsonl", "path": "tasks.jsonl", "base_url": f"{other.url}/v1", "model": "m"}
    assert (await run_job(allowing, {**chat, "model_retries": 0, "retries": 0}))[0] == 202
    assert other.seen[-1] == ("/v1/chat/completions", None)

    for named in ({}, {"sandbox_url": [own.url + "/"]}):  # the service's own sandbox, named or not, gets its token
        assert (await run_job(settings, {**job, **named}))[0] == 202
    assert own.seen and {auth for _, auth in own.seen} == {f"Bearer {SECRET}"}


async def test_a_jobs_report_and_summary_hold_no_credential(
    tmp_path: Path, inputs: Path, sandbox: httpx.ASGITransport
) -> None:
    settings = EvaluatorSettings(
        sandbox_url=["http://sandbox"], sandbox_token=SECRET, data_dir=str(tmp_path / "jobs"), input_dir=str(inputs)
    )
    files = {"path": str(inputs / "tasks.jsonl"), "samples": str(inputs / "samples.jsonl")}
    job = {"dataset": "jsonl", **files, "api_key": "the-jobs-key"}
    status, view = await run_job(settings, job, sandbox_transport=sandbox)
    assert status == 202 and view["status"] == "finished", view
    assert "pass@1" in view["summary_file"] and SECRET not in view["summary_file"]
    report = (tmp_path / "jobs" / view["id"] / "report.md").read_text()
    assert "tasks.jsonl" in report and SECRET not in report and "the-jobs-key" not in report


def test_jobs_read_only_files_under_the_input_directory(tmp_path: Path, inputs: Path) -> None:
    (tmp_path / "secret.jsonl").write_text("{}\n")
    (inputs / "link.jsonl").symlink_to(tmp_path / "secret.jsonl")
    lent = EvaluatorSettings(sandbox_url=["http://sandbox"], input_dir=str(inputs))
    config = admit({"dataset": "jsonl", "path": "tasks.jsonl", "samples": str(inputs / "samples.jsonl")}, lent)
    assert (config.path, config.samples) == (str(inputs.resolve() / "tasks.jsonl"), str(inputs / "samples.jsonl"))
    for name in (str(tmp_path / "secret.jsonl"), "../secret.jsonl", "link.jsonl", "/etc/passwd"):
        with pytest.raises(Refused, match="outside the directory jobs may read") as refused:
            admit({"dataset": "jsonl", "samples": name}, lent)
        assert refused.value.status == 403
    with pytest.raises(Refused, match=r"lets jobs read none.*CODEGYM_EVALUATOR_INPUT_DIR"):
        admit({"dataset": "jsonl", "samples": "samples.jsonl"}, EvaluatorSettings(sandbox_url=["http://sandbox"]))
    with pytest.raises(Refused, match="path names a file"):
        admit(
            {"dataset": "apps", "path": "/data", "base_url": "http://m/v1"}, lent.model_copy(update={"input_dir": None})
        )


def test_model_endpoints_are_those_the_operator_lends() -> None:
    base = {"dataset": "humaneval", "model": "m"}
    anywhere = EvaluatorSettings(sandbox_url=["http://sandbox"])
    assert admit({**base, "base_url": "http://10.0.0.9:8000/v1"}, anywhere).base_url == "http://10.0.0.9:8000/v1"
    lent = anywhere.model_copy(update={"model_urls": ["http://model:8000/v1/"]})
    for url in ("http://model:8000/v1", "http://MODEL:8000/v1/", "http://model:8000/v1/deployments/a"):
        assert admit({**base, "base_url": url}, lent).base_url == url
    for url in ("http://model:8000/v1x", "http://model:8001/v1", "https://model:8000/v1", "http://metadata/v1"):
        with pytest.raises(Refused, match="not under a model endpoint of this service") as refused:
            admit({**base, "base_url": url}, lent)
        assert refused.value.status == 403
    for url in ("http://model:8000/v1?x=", "http://model:8000/v1/../admin", "http://a@model:8000/v1", "file:///x"):
        with pytest.raises(Refused) as refused:
            admit({**base, "base_url": url}, lent)
        assert refused.value.status == 422
