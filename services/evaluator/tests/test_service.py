"""The evaluation service in-process: start a job, poll it, fetch its results and summary."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from codegym_evaluator.service.app import create_app
from codegym_evaluator.service.settings import EvaluatorSettings
from codegym_evaluator.tasks import load_tasks

from .fake_openai import fake_openai_app

pytestmark = pytest.mark.anyio
TASKS = load_tasks("humaneval", limit=3)


def answer(prompt: str, i: int) -> str:
    task = next(t for t in TASKS if t.prompt.rstrip() in prompt)
    return f"```python\n{task.prompt}{task.metadata['canonical_solution']}```"


async def wait(client: httpx.AsyncClient, job_id: str) -> dict[str, object]:
    for _ in range(300):
        view: dict[str, object] = (await client.get(f"/v1/jobs/{job_id}")).json()
        if view["status"] in ("finished", "failed"):
            return view
        await asyncio.sleep(0.05)
    raise AssertionError("the job did not finish")


async def test_start_poll_and_fetch_a_job(tmp_path: Path, sandbox: httpx.ASGITransport) -> None:
    settings = EvaluatorSettings(sandbox_url=["http://sandbox"], data_dir=str(tmp_path), api_token="s3cret")
    model = httpx.ASGITransport(app=fake_openai_app(answer))
    app = create_app(settings, sandbox_transport=sandbox, model_transport=model)
    headers = {"Authorization": "Bearer s3cret"}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://eval", headers=headers) as client,
    ):
        assert (await client.get("/v1/jobs", headers={"Authorization": "Bearer wrong"})).status_code == 401
        assert (await client.get("/livez", headers={"Authorization": ""})).status_code == 200
        body = {"dataset": "humaneval", "limit": 3, "base_url": "http://model/v1", "model": "m", "n": 2, "k": [1, 2]}
        started = await client.post("/v1/jobs", json=body)
        assert started.status_code == 202, started.text
        job_id = started.json()["id"]
        view = await wait(client, job_id)
        assert view["status"] == "finished", view
        assert view["progress"] == {"done": 6, "total": 6}
        assert view["summary"]["pass_at_k"] == {"pass@1": 1.0, "pass@2": 1.0}  # type: ignore[index]
        results = await client.get(f"/v1/jobs/{job_id}/results")
        rows = [json.loads(line) for line in results.text.splitlines()]
        assert len(rows) == 6 and {r["verdict"] for r in rows} == {"AC"}
        summary = (await client.get(f"/v1/jobs/{job_id}/summary")).json()
        assert len(summary["per_task"]) == 3
        assert [j["id"] for j in (await client.get("/v1/jobs")).json()] == [job_id]
        assert (tmp_path / job_id / "report.md").exists()


async def test_bad_jobs_are_refused_with_a_reason(tmp_path: Path) -> None:
    app = create_app(EvaluatorSettings(data_dir=str(tmp_path)))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://eval") as client,
    ):
        r = await client.post("/v1/jobs", json={"dataset": "humaneval", "n": "many"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["n"]
        r = await client.post("/v1/jobs", json={"dataset": "humaneval", "base_url": "http://m/v1"})
        assert r.status_code == 422 and "no sandbox_url" in r.json()["detail"]
        r = await client.post("/v1/jobs", json={"dataset": "humaneval", "sandbox_url": ["http://s"]})
        assert r.status_code == 422 and "base_url" in r.json()["detail"]
        assert (await client.get("/v1/jobs/nope")).status_code == 404


async def test_what_a_client_sent_is_never_quoted_back_whole(tmp_path: Path) -> None:
    """Round 64: FastAPI's own 422 quoted each error's input (the client's body, twice over), and a 404 a job's id
    whole; the sandbox's 422 and quoting were the sandbox's alone."""
    app = create_app(EvaluatorSettings(data_dir=str(tmp_path)))
    sent = "\x7f" * 100_000
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://eval") as client,
    ):
        for path, body in [("/v1/jobs", [sent]), ("/get_prompts", {"dataset": "humaneval", "config": [sent]})]:
            r = await client.post(path, json=body)
            assert r.status_code == 422 and len(r.content) < 2_000, (path, r.content[:200])
            assert "input" not in r.json()["detail"][0]
        for path in (f"/v1/jobs/{'x' * 60_000}", f"/v1/jobs/{'x' * 60_000}/summary"):
            r = await client.get(path)
            assert r.status_code == 404 and len(r.content) < 200, r.content[:200]


async def test_a_job_on_an_unknown_dataset_fails_with_its_reason(tmp_path: Path, sandbox: httpx.ASGITransport) -> None:
    settings = EvaluatorSettings(sandbox_url=["http://sandbox"], data_dir=str(tmp_path))
    app = create_app(settings, sandbox_transport=sandbox)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://eval") as client,
    ):
        job = (await client.post("/v1/jobs", json={"dataset": "nope", "base_url": "http://m/v1"})).json()
        view = await wait(client, job["id"])
        assert view["status"] == "failed" and "unknown dataset 'nope'" in str(view["error"])
        assert (await client.get(f"/v1/jobs/{job['id']}/summary")).status_code == 409


def test_binding_off_loopback_needs_a_token() -> None:
    with pytest.raises(ValueError, match="needs CODEGYM_EVALUATOR_API_TOKEN"):
        EvaluatorSettings(host="0.0.0.0")


async def test_the_service_serves_sandbox_fusions_dataset_routes(tmp_path: Path, sandbox: httpx.ASGITransport) -> None:
    """``sandbox_fusion.set_dataset_endpoint(<the service>)``: prompts from the task library, and ``/submit``
    judged by the service's sandbox."""
    settings = EvaluatorSettings(sandbox_url=["http://sandbox"], data_dir=str(tmp_path))
    app = create_app(settings, sandbox_transport=sandbox)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://eval") as client,
    ):
        prompts = (await client.post("/get_prompts", json={"dataset": "humaneval", "config": {}, "limit": 2})).json()
        assert [p["id"] for p in prompts] == ["HumanEval/0", "HumanEval/1"]
        body = {"dataset": "humaneval", "id": TASKS[0].task_id, "completion": answer(TASKS[0].prompt, 0), "config": {}}
        result = (await client.post("/submit", json=body)).json()
        assert result["accepted"] is True and result["tests"][0]["passed"] is True
    no_sandbox = create_app(EvaluatorSettings(data_dir=str(tmp_path)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=no_sandbox), base_url="http://eval") as client:
        r = await client.post("/submit", json=body)
        assert r.status_code == 503 and "no sandbox configured" in r.text


class Broken(httpx.AsyncBaseTransport):
    """A transport that fails in a way no client expects of it."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise RuntimeError("the transport broke")


@pytest.mark.parametrize("broken", ["model", "sandbox"])
async def test_a_job_whose_run_fails_ends_failed(tmp_path: Path, sandbox: httpx.ASGITransport, broken: str) -> None:
    # A model endpoint's answer nested 100k deep, or anything else a run raises: the job was left "running" for
    # ever, and its pollers waited for it.
    deep = httpx.MockTransport(lambda request: httpx.Response(200, content=b"[" * 100_000 + b"]" * 100_000))
    settings = EvaluatorSettings(sandbox_url=["http://sandbox"], data_dir=str(tmp_path))
    if broken == "model":
        app = create_app(settings, sandbox_transport=sandbox, model_transport=deep)
    else:
        model = httpx.ASGITransport(app=fake_openai_app(answer))
        app = create_app(settings, sandbox_transport=Broken(), model_transport=model)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://eval") as client,
    ):
        body = {"dataset": "humaneval", "limit": 2, "base_url": "http://model/v1", "model": "m", "model_retries": 0}
        job = (await client.post("/v1/jobs", json=body)).json()
        view = await wait(client, job["id"])
    assert view["status"] == "failed" and view["finished"] is not None
    why = "answer is not a JSON object (RecursionError" if broken == "model" else "RuntimeError: the transport broke"
    assert why in str(view["error"])
