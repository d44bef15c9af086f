"""The docker and podman backends: hardening, names, healing, cleanup, and start-up errors.

Every test runs against each container engine that answers here with the runtime image; the rest of the
suite (``client`` fixture) already runs the same API tests on them for identical verdicts.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from codegym_sandbox.agent.isolation import MASKED
from codegym_sandbox.backends.base import SandboxFault
from codegym_sandbox.backends.choose import choose_backend
from codegym_sandbox.backends.containers import CopyCgroups
from codegym_sandbox.backends.program_users import container_user, engine_maps_ids
from codegym_sandbox.config import Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import IMAGE, LOOKUPS, backend_problem, run_code, settings_for, stdout


@pytest.fixture(scope="module", params=["docker", "podman"])
def engine(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    settings_for(name)  # skips (loudly) when this engine cannot run here
    return name


def _containers(engine: str, server_id: str) -> list[dict[str, object]]:
    out = subprocess.run(
        [engine, "ps", "-a", "--filter", f"label=codegym.sandbox.server={server_id}", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not out:
        return []
    inspected = subprocess.run([engine, "inspect", *out], capture_output=True, text=True, check=True).stdout
    return list(json.loads(inspected))


def _wait_alive(client: TestClient, n: int) -> None:
    deadline = time.monotonic() + 60
    while client.get("/readyz").json()["alive"] < n:
        assert time.monotonic() < deadline, "the pool did not heal"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def server(engine: str) -> Iterator[tuple[TestClient, Settings]]:
    # The default CONTAINER_USER, that the engine's own choice is tested: the other tests' servers have their own.
    fields = {"container_user": "", "container_cpus": 0.5, "container_memory_mb": 900}
    settings = settings_for(engine, server_id="t" + engine[:3], **fields)
    with TestClient(create_app(settings)) as client:
        yield client, settings


def test_containers_are_hardened_and_named(engine: str, server: tuple[TestClient, Settings]) -> None:
    client, settings = server
    found = _containers(engine, settings.server_id)
    names = sorted(str(c["Name"]).lstrip("/") for c in found)
    assert names == [f"codegym-sandbox-local-t{engine[:3]}-{slot}" for slot in range(2)]
    for c in found:
        host = c["HostConfig"]
        assert isinstance(host, dict)
        assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
        assert any("no-new-privileges" in opt for opt in host["SecurityOpt"] or [])
        assert host["PidsLimit"] == settings.limits.processes + 64
        assert host["Memory"] == 900 << 20 and host["NanoCpus"] == 500_000_000
        # Memory and swap together: a program that pages its memory out holds no more than its limit.
        assert host["MemorySwap"] == 900 << 20, host["MemorySwap"]
    body = run_code(client, "import os, socket; print(os.getuid(), socket.gethostname(), os.access('/', os.W_OK))")
    uid, hostname, writable = stdout(body).split()
    first = int(container_user(settings, engine_maps_ids(engine, settings)).partition(":")[0])
    assert int(uid) in (first, first + 1) and (hostname, writable) == ("sandbox", "False")  # CONTAINER_USER + its slot
    # The container's init (the agent) has only the three capabilities it needs to run programs under their
    # uid: CAP_KILL, CAP_SETGID and CAP_SETUID (0xe0), and no more in its bounding set. The program has none:
    # its bounding set is the agent's (dropping from it needs CAP_SETPCAP), which no_new_privs makes moot.
    caps = "print(' '.join(l.split()[0] + l.split()[1] for l in open('/proc/%s/status') if l.startswith('Cap')))"
    agent = "CapInh:0000000000000000 CapPrm:00000000000000e0 CapEff:00000000000000e0 CapBnd:00000000000000e0"
    program = "CapInh:0000000000000000 CapPrm:0000000000000000 CapEff:0000000000000000 CapBnd:00000000000000e0"
    assert stdout(run_code(client, caps % "1")) == agent + " CapAmb:0000000000000000\n"
    assert stdout(run_code(client, caps % "self")) == program + " CapAmb:0000000000000000\n"
    nnp = "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('NoNewPrivs')])"
    assert stdout(run_code(client, nnp)) == "['1']\n"


def test_docker_masks_its_own_paths_and_the_boxs(engine: str, server: tuple[TestClient, Settings]) -> None:
    """Naming masked paths replaces the daemon's own list: every path of that list stays masked, and the /proc
    files the local backend's box masks (the kernel's command line among them) are masked too."""
    if engine != "docker":
        pytest.skip("podman adds the box's masks to its own (--security-opt mask=)")
    plain = subprocess.run(["docker", "create", IMAGE, "true"], capture_output=True, text=True, check=True)
    container = plain.stdout.strip()
    try:
        shown = ["docker", "inspect", "-f", "{{json .HostConfig.MaskedPaths}}", container]
        defaults = json.loads(subprocess.run(shown, capture_output=True, text=True, check=True).stdout)
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    assert "/proc/kcore" in defaults, defaults
    for c in _containers(engine, server[1].server_id):
        host = c["HostConfig"]
        assert isinstance(host, dict)
        assert set(defaults) | set(MASKED) <= set(host["MaskedPaths"]), host["MaskedPaths"]


def test_each_container_is_charged_its_cost_with_what_it_serves(engine: str) -> None:
    """What a container costs the host beside its limits (its engine's processes, its agent and box) comes off the
    memory budget: the pool's own workers' for good, a session's with its memory, given back as it ends."""
    settings = settings_for(engine, memory_budget_mb=3000, sessions={"warm": 0})
    with TestClient(create_app(settings)) as client:
        ready = client.get("/readyz").json()
        cost = ready["worker_cost_mb"]
        assert cost >= {"docker": 32, "podman": 57}[engine], ready
        assert ready["memory_budget_mb"] == 3000 - 2 * cost, ready  # the two workers of the pool
        held = ready["memory_held_mb"]
        made = client.post("/v1/sessions", json={"limits": {"memory_mb": 16}})
        assert made.status_code == 201, made.text
        assert client.get("/readyz").json()["memory_held_mb"] == held + 16 + cost
        assert client.delete(f"/v1/sessions/{made.json()['session_id']}").status_code == 204
        deadline = time.monotonic() + 30
        while client.get("/readyz").json()["memory_held_mb"] != held:  # given back as its container is removed
            assert time.monotonic() < deadline, client.get("/readyz").json()
            time.sleep(0.1)


# The uid a program has on the host: its own, through its user namespace's map (the identity without one).
HOST_UID = """
import os
uid = os.getuid()
for line in open("/proc/self/uid_map"):
    inside, outside, count = map(int, line.split())
    if inside <= uid < inside + count:
        print(outside + uid - inside)
"""


def test_programs_are_no_user_of_the_host(engine: str, server: tuple[TestClient, Settings]) -> None:
    """A program sharing a host user's uid would share its kernel counts per user (pipe pages, processes)."""
    client, _ = server
    _wait_alive(client, 2)
    # Two at once, held a moment: one on each slot.
    with ThreadPoolExecutor(2) as pool:
        answers = pool.map(lambda _: stdout(run_code(client, HOST_UID + "import time; time.sleep(1)")), range(2))
        seen = {int(answer) for answer in answers}
    assert len(seen) == 2 and os.getuid() not in seen
    for uid in seen:
        with pytest.raises(KeyError):
            pwd.getpwuid(uid)


def test_container_killed_mid_run_is_sandbox_error_and_heals(engine: str, server: tuple[TestClient, Settings]) -> None:
    client, settings = server
    _wait_alive(client, 2)
    names = [str(c["Name"]).lstrip("/") for c in _containers(engine, settings.server_id)]

    def killer() -> None:
        time.sleep(1.0)
        subprocess.run([engine, "kill", *names], capture_output=True)

    thread = threading.Thread(target=killer)
    thread.start()
    body = run_code(client, "import time; time.sleep(4) # killed", run_timeout=8)
    thread.join()
    assert body["status"] == "SandboxError" and "worker" in body["message"], body
    _wait_alive(client, 2)
    assert client.get("/readyz").json()["restarts"] >= 2
    for i in range(3):
        assert stdout(run_code(client, f"print({i}) # after the kill")) == f"{i}\n"


def test_a_worker_whose_runs_left_kernel_memory_is_replaced(server: tuple[TestClient, Settings]) -> None:
    """What the lookups leave stays in the container's memory cgroup once the run is over, and the agent cannot give
    it back there (the cgroup is the engine's): left, the next run would reclaim it on its own CPU time. The run's
    answer stands, and its worker is replaced once it is sent; a run that leaves nothing keeps its worker."""
    client, _ = server
    _wait_alive(client, 2)
    before = client.get("/readyz").json()["restarts"]
    assert stdout(run_code(client, "print('nothing left')")) == "nothing left\n"
    assert client.get("/readyz").json()["restarts"] == before
    assert stdout(run_code(client, LOOKUPS, run_timeout=20)) == "looked\n"
    _wait_alive(client, 2)
    assert client.get("/readyz").json()["restarts"] == before + 1
    assert stdout(run_code(client, "print('on a new worker')")) == "on a new worker\n"


def test_a_worker_whose_runs_kernel_memory_was_their_files_is_kept(server: tuple[TestClient, Settings]) -> None:
    """Most of the kernel's memory a cheap run leaves is its files' (their inodes and names: 60,000 empty files
    hold more than a worker may keep), and the box's reset frees it: the worker stays, and replacing it for each
    such run would cost the host half a second of CPU for a run of milliseconds. The next run sees none of them."""
    client, _ = server
    _wait_alive(client, 2)
    before = client.get("/readyz").json()["restarts"]
    files = "for i in range(60_000):\n    open(f'f{i}', 'w').close()\nprint('made')"
    for _ in range(2):
        assert stdout(run_code(client, files, run_timeout=20)) == "made\n"
        assert stdout(run_code(client, "import os; print(os.path.exists('f0'))")) == "False\n"
    assert client.get("/readyz").json()["restarts"] == before


def test_killing_the_supervisor_is_the_programs_crash(server: tuple[TestClient, Settings]) -> None:
    # In a container the program shares its supervisor's uid: killing it must cost the program (RE),
    # never turn into a SandboxError, which a trainer would mask instead of penalise.
    client, _ = server
    body = client.post(
        "/v1/execute", json={"language": "python", "code": "import os, signal; os.kill(os.getppid(), signal.SIGKILL)"}
    ).json()
    assert body["verdict"] == "RE", body
    assert stdout(run_code(client, "print('next run fine')")) == "next run fine\n"


def test_containers_removed_on_shutdown_and_stale_ones_at_start(engine: str) -> None:
    settings = settings_for(engine, server_id="tgone", workers=1)
    with TestClient(create_app(settings)) as client:
        assert stdout(run_code(client, "print('up')")) == "up\n"
        assert len(_containers(engine, "tgone")) == 1
    assert _containers(engine, "tgone") == []
    # A container left by a server that crashed (its pid no longer exists) on this host.
    dead = subprocess.Popen(["true"])
    dead.wait()
    import socket

    labels = {
        "codegym.sandbox": "1",
        "codegym.sandbox.server": "tstale",
        "codegym.sandbox.host": socket.gethostname(),
        "codegym.sandbox.pid": str(dead.pid),
    }
    argv = [engine, "create", "--name", f"codegym-sandbox-stale-{engine}"]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    subprocess.run([*argv, IMAGE], capture_output=True, check=True)
    assert len(_containers(engine, "tstale")) == 1
    # And the cgroups a forking session's container had on the host (as root), its server gone (named with its pid).
    cgroups = CopyCgroups.find() if CopyCgroups.refusal("") is None else None
    roots = cgroups.roots if cgroups is not None else ()
    left = [f"{root}/{CopyCgroups.PARENT}/codegym-sandbox-local-tdied-70@{dead.pid}" for root in roots]
    for path in left:
        os.makedirs(f"{path}/worker-1-copy")
    with TestClient(create_app(settings_for(engine, server_id="tfresh", workers=1))):
        assert _containers(engine, "tstale") == []
        assert [path for path in left if os.path.exists(path)] == []


def test_a_sweep_on_a_host_where_no_session_forked_yet_finds_nothing(tmp_path: Path) -> None:
    """A fresh host has no parent directory for the copies' cgroups (the first fork makes it): a server starting
    there sweeps nothing, and starts (it failed to before). Beside it, a dead server's directory is removed and a
    live one's kept."""
    roots = tuple(str(tmp_path / kind) for kind in ("memory", "cpuacct", "pids"))
    CopyCgroups(roots).sweep()
    dead = subprocess.Popen(["true"])
    dead.wait()
    os.makedirs(f"{roots[0]}/{CopyCgroups.PARENT}/c@{dead.pid}/worker-1-copy")
    os.makedirs(f"{roots[0]}/{CopyCgroups.PARENT}/c@{os.getpid()}")
    CopyCgroups(roots).sweep()
    assert os.listdir(f"{roots[0]}/{CopyCgroups.PARENT}") == [f"c@{os.getpid()}"]


def test_a_server_starting_keeps_the_copies_cgroups_of_a_live_server_of_the_other_engine(engine: str) -> None:
    """The copies' cgroups of a live server's session (docker's or podman's: one directory on the host for both)
    are no leftover of another server starting beside it on the other engine, which lists only its own
    containers: removed, the live session's fork failed and ended it (410)."""
    other = "podman" if engine == "docker" else "docker"
    if os.geteuid() != 0 or CopyCgroups.refusal("") is not None or backend_problem(other) is not None:
        pytest.skip("forks on both engines, as root, on a cgroup v1 host")
    settings = settings_for(engine, server_id="tlive", workers=1, reserve_workers=0)
    settings.sessions.warm = 0
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/sessions", json={"language": "python"})
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        assert client.post(f"/v1/sessions/{sid}/execute", json={"code": "x = 41"}).status_code == 200
        with TestClient(create_app(settings_for(other, server_id="tbeside", workers=1))):
            pass
        r = client.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
        assert r.status_code == 200, r.text
        for made in (sid, *r.json()["session_ids"]):
            client.delete(f"/v1/sessions/{made}")


def test_missing_image_is_a_clear_start_up_error(engine: str) -> None:
    settings = settings_for(engine, workers=1).model_copy(update={"image": "codegym-no-such-image:1"})
    with pytest.raises(SandboxFault, match="codegym-no-such-image:1"), TestClient(create_app(settings)):
        pass


def test_auto_prefers_a_ready_engine_and_says_why(engine: str) -> None:
    import asyncio

    settings = settings_for(engine).model_copy(update={"backend": "auto"})
    backend, reason = asyncio.run(choose_backend(settings))
    # Outside Slurm docker comes first; podman stands in for podman-hpc where only it is installed.
    expected = "docker" if backend_problem("docker") is None else "podman"
    assert backend.name == expected and "auto" in reason, reason
    missing = settings.model_copy(update={"image": "codegym-no-such-image:1"})
    backend, reason = asyncio.run(choose_backend(missing))
    assert backend.name == "local" and "codegym-no-such-image:1" in reason


def test_an_out_of_memory_container_leaves_nothing_in_the_servers_directory(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # podman's conmon writes a file named "oom" into its working directory when a container hits its
    # memory limit: the server must not litter the directory it was started from.
    monkeypatch.chdir(tmp_path)
    settings = settings_for(engine, workers=1, container_memory_mb=96, server_id="toom")
    with TestClient(create_app(settings)) as client:
        body = run_code(client, "x = bytearray(400 << 20); print(len(x))", memory_limit_MB=1024)
        assert body["status"] != "Success", body
    assert list(tmp_path.iterdir()) == []
