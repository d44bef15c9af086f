"""``codegym-sandbox doctor``: what this machine gives the sandbox, what is missing, what that costs, and the
command that fixes it; then one real program through a server's whole path, to show that runs are isolated.

The server runs the same host checks at start-up (``backends.host.host_checks``, logged as one message) and refuses
to start where the local backend cannot isolate (``backends.host.refusal``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from dataclasses import asdict

from .agent.linux import NO_FILE_IDS
from .backends.choose import detect, docker_problem, podman_problem, runtime_problem
from .backends.host import Check, host_checks
from .config import Settings


def engine_checks(settings: Settings) -> list[Check]:
    """The container engines and the runtime image; gVisor's runtime for them."""
    costs = "the {} backend is not available (auto picks the local backend)"
    out = []
    problem = docker_problem(settings.image)
    out.append(
        Check("docker", "ok", f"answers and has {settings.image}")
        if problem is None
        else Check("docker", "missing", problem, costs.format("docker"), "scripts/engines (as root)")
    )
    binary = settings.podman_binary or ("podman-hpc" if shutil.which("podman-hpc") else "podman")
    problem = podman_problem(binary, settings.image)
    out.append(
        Check(binary, "ok", f"answers and has {settings.image}")
        if problem is None
        else Check(binary, "missing", problem, costs.format(binary), "scripts/engines (as root)")
    )
    engines = [name for name, check in (("docker", out[0]), (binary, out[1])) if check.status == "ok"]
    out.append(runtime_check(settings, engines))
    return out


def runtime_check(settings: Settings, engines: list[str]) -> Check:
    """gVisor: whether ``runsc`` is installed and, where ``container_runtime`` asks for a runtime, whether an
    engine that answers (``engines``) runs the agent on it."""
    runtime = settings.container_runtime
    runsc = shutil.which("runsc")
    if not runtime:
        if runsc is None:
            return Check(
                "gVisor",
                "info",
                "runsc is not installed",
                "no user-space kernel for the container engines (not the default; see SECURITY.md)",
                "apt-get install runsc",
            )
        return Check("gVisor", "ok", f"runsc at {runsc}, not in use (CODEGYM_SANDBOX_CONTAINER_RUNTIME=runsc)")
    costs = f"the container backends cannot start a worker: CODEGYM_SANDBOX_CONTAINER_RUNTIME asks for {runtime}"
    if not engines:
        return Check("gVisor", "missing", f"no container engine answers to run {runtime}", costs, "scripts/engines")
    problems = {engine: runtime_problem(engine, settings.image, runtime) for engine in engines}
    found = "; ".join(f"{engine}: {problem or f'runs the agent on {runtime}'}" for engine, problem in problems.items())
    if None in problems.values():
        return Check("gVisor", "ok", found)
    if NO_FILE_IDS in found:
        fix = "leave CODEGYM_SANDBOX_CONTAINER_RUNTIME empty: this gVisor lacks what the agent needs (SECURITY.md)"
    elif runsc is None and os.path.basename(runtime) == "runsc":
        fix = "apt-get install runsc, then scripts/engines (as root) registers it with docker"
    else:
        fix = "scripts/engines (as root) registers runsc with docker; podman takes it as it is"
    return Check("gVisor", "missing", found, costs, fix)


def live_run(settings: Settings) -> Check:
    """One program through a whole server on the chosen backend, in process: proof that runs are isolated."""
    from fastapi.testclient import TestClient

    from .main import create_app

    quiet = settings.model_copy(update={"workers": 1, "reserve_workers": 0})
    began = time.monotonic()
    code = "import os\nprint(os.getuid(), len(os.listdir('/proc')))"
    try:
        with TestClient(create_app(quiet)) as client:
            answer = client.post("/run_code", json={"code": code, "language": "python"}).json()
    except Exception as exc:
        return Check("a run", "missing", f"the server did not start: {exc}", "no program can run", "see above")
    seconds = time.monotonic() - began
    run = answer.get("run_result") or {}
    if answer.get("status") != "Success":
        return Check("a run", "missing", f"a trivial program came back {answer}", "no program can run", "see above")
    uid, seen = run.get("stdout", "").split()
    return Check(
        "a run",
        "ok",
        f"a program ran as uid {uid} seeing {seen} entries of /proc (start-up and run: {seconds:.1f} s)",
    )


def diagnose(settings: Settings, run: bool = True) -> tuple[str, str, list[Check]]:
    """The backend the server would use and why, and every check (the live run last, when ``run``)."""
    kind, reason = asyncio.run(detect(settings))
    checks = [*host_checks(settings, kind), *engine_checks(settings)]
    if run and not any(c.status == "missing" and c.name == "user namespaces" for c in checks):
        checks.append(live_run(settings))
    return kind, reason, checks


def healthy(kind: str, checks: list[Check]) -> bool:
    """Whether the chosen backend can run programs isolated: no check it needs is missing."""
    needed = {"user namespaces", "a run"} if kind == "local" else {"a run", kind, "gVisor"}
    return not any(c.status == "missing" and c.name in needed for c in checks)


def render(kind: str, reason: str, checks: list[Check]) -> str:
    lines = [f"backend: {kind} ({reason})", ""]
    for c in checks:
        lines.append(f"  {c.status:<8} {c.name:<17} {c.found}")
        if c.costs:
            lines.append(f"  {'':<8} {'':<17} costs: {c.costs}")
        if c.fix:
            lines.append(f"  {'':<8} {'':<17} fix: {c.fix}")
    verdict = "programs run isolated" if healthy(kind, checks) else "programs cannot run isolated"
    lines += ["", f"result: {verdict} on the {kind} backend"]
    return "\n".join(lines)


def as_json(kind: str, reason: str, checks: list[Check]) -> str:
    body = {"backend": kind, "reason": reason, "healthy": healthy(kind, checks), "checks": [asdict(c) for c in checks]}
    return json.dumps(body, indent=2)
