"""gVisor (``runsc``) as the container backends' runtime: the setting reaches each engine, and a server whose
runtime cannot host the agent says so at start-up, as ``codegym-sandbox doctor`` does.

Where the runtime runs the agent, its programs see gVisor's kernel; where it cannot (Debian bookworm's runsc has
no ``setfsuid``), the worker refuses to start naming the missing call, which only a container on gVisor would
meet on this host: either way the run proves the container was made on ``runsc``, not on the default.
"""

from __future__ import annotations

import json
import re

import pytest
from codegym_sandbox.agent.linux import NO_FILE_IDS
from codegym_sandbox.backends.base import SandboxFault
from codegym_sandbox.backends.choose import container_spec, runtime_problem
from codegym_sandbox.backends.podman import PodmanBackend
from codegym_sandbox.cli import main
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import IMAGE, backend_problem, run_code, settings_for, stdout, unavailable


def test_podman_runs_containers_on_the_runtime_asked_for() -> None:
    settings = Settings(backend="podman", container_runtime="/usr/bin/runsc")
    backend = PodmanBackend(1, 1, {"namespaces": False}, container_spec(settings), "podman", [])
    argv = backend.run_argv(0)
    # Global flags, before `run`; gVisor with no network stack (the container has no network either).
    assert argv[: argv.index("run")] == ["podman", "--runtime", "/usr/bin/runsc", "--runtime-flag", "network=none"]
    plain = PodmanBackend(1, 1, {"namespaces": False}, container_spec(Settings(backend="podman")), "podman", [])
    assert plain.run_argv(0)[:2] == ["podman", "run"]  # empty: the engine's default runtime


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_a_server_on_gvisor_runs_there_or_says_why_it_cannot(engine: str) -> None:
    settings = settings_for(engine, workers=1, server_id="tgv" + engine[:3])  # skips where the engine cannot run
    problem = runtime_problem(engine, IMAGE, "runsc")
    if problem is not None and NO_FILE_IDS not in problem:
        unavailable(f"{engine}-gvisor", problem)  # runsc is not installed, or not registered with docker
    settings = settings.model_copy(update={"container_runtime": "runsc"})
    if problem is None:
        with TestClient(create_app(settings)) as client:
            # gVisor's kernel answers as Linux 4.4.0, whatever the host's.
            assert stdout(run_code(client, "import os; print(os.uname().release)")).strip() == "4.4.0"
        return
    with pytest.raises(SandboxFault, match=re.escape(NO_FILE_IDS)), TestClient(create_app(settings)):
        pass


def test_doctor_says_when_the_runtime_asked_for_is_not_registered(capsys: pytest.CaptureFixture[str]) -> None:
    problem = backend_problem("docker")
    if problem is not None:
        unavailable("docker", problem)
    settings = Settings(backend="docker", image=IMAGE, container_runtime="codegym-no-such-runtime")
    from codegym_sandbox.doctor import runtime_check

    check = runtime_check(settings, ["docker"])
    assert check.status == "missing" and "not a runtime of the docker daemon" in check.found
    assert "cannot start a worker" in check.costs and "scripts/engines" in check.fix


def test_doctor_reports_gvisor_as_the_server_would_meet_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = backend_problem("docker-gvisor")
    if problem is not None and NO_FILE_IDS not in problem:
        unavailable("docker-gvisor", problem)
    monkeypatch.setenv("CODEGYM_SANDBOX_CONTAINER_RUNTIME", "runsc")
    monkeypatch.setenv("CODEGYM_SANDBOX_IMAGE", IMAGE)
    code = main(["doctor", "--backend", "docker", "--no-run", "--json"])
    report = json.loads(capsys.readouterr().out)
    check = next(c for c in report["checks"] if c["name"] == "gVisor")
    if problem is None:
        assert check["status"] == "ok" and "runs the agent on runsc" in check["found"]
        return
    assert code == 1 and report["healthy"] is False
    assert check["status"] == "missing" and NO_FILE_IDS in check["found"]
    assert "CODEGYM_SANDBOX_CONTAINER_RUNTIME empty" in check["fix"]
