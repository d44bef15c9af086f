"""The container backends' programs run as uids no user or process of the host has, where those are host uids;
and the server refuses to start where they are in use."""

from __future__ import annotations

import asyncio
import os
import pwd
import socket
import subprocess
from pathlib import Path

import pytest
from codegym_sandbox.backends import choose, program_users
from codegym_sandbox.backends.host import CannotIsolate
from codegym_sandbox.config import Settings


def test_the_default_range_is_past_every_users_where_ids_are_the_hosts() -> None:
    settings = Settings(backend="docker")
    host = program_users.container_user(settings, mapped=False)
    uids = choose.program_uids(settings, host, 4096)
    assert uids is not None and uids[0] >= 1_000_000_000  # past distributions' 1000 up and LDAP/HPC ranges
    assert set(uids).isdisjoint(range(settings.host_uid, settings.host_uid + 4096))  # and the local backend's
    # In a user namespace of the engine's (usually 65536 ids from 0), the image's own user.
    assert program_users.container_user(settings, mapped=True) == "1000:1000"
    assert program_users.container_user(Settings(backend="docker", container_user="3000:3001"), False) == "3000:3001"
    with pytest.raises(ValueError):
        Settings(backend="docker", container_user="sandbox")


def test_podman_maps_ids_when_rootless_or_given_a_user_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = {"true": True, "false": False}
    for answer, mapped in answers.items():
        info = f'{{"host": {{"security": {{"rootless": {answer}}}}}}}'
        done = subprocess.CompletedProcess([], 0, info, "")
        monkeypatch.setattr(program_users.subprocess, "run", lambda *a, done=done, **k: done)
        assert program_users.engine_maps_ids("podman", Settings(backend="podman")) is mapped
    assert program_users.engine_maps_ids("podman", Settings(backend="podman", podman_args=["--userns=auto"]))

    def absent(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError("podman")

    monkeypatch.setattr(program_users.subprocess, "run", absent)
    for euid, mapped in ((0, False), (1000, True)):  # podman run by anyone but root is rootless
        monkeypatch.setattr(program_users.os, "geteuid", lambda euid=euid: euid)
        assert program_users.engine_maps_ids("podman", Settings(backend="podman")) is mapped


def test_docker_maps_ids_with_userns_remap(monkeypatch: pytest.MonkeyPatch) -> None:
    import docker

    class Client:
        def __init__(self, options: list[str]) -> None:
            self.options = options

        def info(self) -> dict[str, list[str]]:
            return {"SecurityOptions": self.options}

        def close(self) -> None:
            pass

    for options, mapped in ((["name=seccomp,profile=default"], False), (["name=userns"], True)):
        monkeypatch.setattr(docker, "from_env", lambda timeout, options=options: Client(options))
        assert program_users.engine_maps_ids("docker", Settings(backend="docker")) is mapped


def test_users_and_processes_of_the_range_are_found(tmp_path: Path) -> None:
    me = os.getuid()
    found = program_users.in_use(range(me, me + 1))
    assert f"uid {me} is the user {pwd.getpwuid(me).pw_name}" in found
    assert f"uid {me} owns process {os.getpid()} (" in "\n".join(found)
    # Any of a process's uids counts: a program that kept its saved uid still shares the user's counts.
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "status").write_text("Name:\tworker\nUid:\t0\t0\t1700000003\t0\n")
    (tmp_path / "self").mkdir()
    first = program_users.HOST_FIRST
    assert program_users.in_use(range(first, first + 8), str(tmp_path)) == [f"uid {first + 3} owns process 77 (worker)"]


def test_refusal_says_what_has_the_uids_and_how_to_fix_it() -> None:
    assert program_users.refusal(range(5, 9), []) is None
    found = [f"uid {uid} is the user u{uid}" for uid in range(5, 11)]
    message = program_users.refusal(range(5, 11), found)
    assert message is not None
    assert "5..10" in message and "uid 8 is the user u8" in message and "and 2 more" in message
    assert "does not start" in message and "CODEGYM_SANDBOX_CONTAINER_USER" in message and "userns-remap" in message
    assert "podman's containers of theirs" in str(program_users.refusal(range(5, 11), found, "podman"))


@pytest.mark.parametrize("kind", ["docker", "podman"])
def test_a_server_refuses_host_uids_in_use(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    user = pwd.getpwuid(os.getuid()).pw_name
    settings = Settings(backend=kind, container_user=f"{os.getuid()}:{os.getgid()}", workers=1, max_workers=1)

    async def detect(settings: Settings) -> tuple[str, str]:
        return kind, f"asked for {kind}"

    monkeypatch.setattr(choose, "detect", detect)
    monkeypatch.setattr(choose, "engine_maps_ids", lambda kind, settings: False)
    with pytest.raises(CannotIsolate, match=f"is the user {user}.*does not start"):
        asyncio.run(choose.choose_backend(settings))


@pytest.mark.parametrize("engine", ["docker", "podman"])
def test_what_a_server_that_is_gone_left_does_not_stop_the_next(engine: str) -> None:
    """A server killed outright leaves its containers, whose programs hold their uids until the next server
    removes them: a server started again on the same range (a restart after a crash) must not refuse itself."""
    from sandbox_support import IMAGE, backend_problem, server_uid_range, unavailable

    problem = backend_problem(engine)
    if problem is not None:
        unavailable(engine, problem)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a server's pid that no process has now
    run_as = server_uid_range()
    first = int(run_as.split(":")[0])
    labels = {
        "codegym.sandbox": "1",
        "codegym.sandbox.host": socket.gethostname(),
        "codegym.sandbox.pid": str(gone.pid),
    }
    name = f"codegym-test-left-{os.getpid()}"
    argv = [engine, "run", "-d", "--rm", "--name", name, "--user", f"{first}:{first}", "--network", "none"]
    argv += ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]  # podman cannot apply some hosts' own
    argv += [arg for key, value in labels.items() for arg in ("--label", f"{key}={value}")]
    subprocess.run([*argv, "--entrypoint", "sleep", IMAGE, "300"], capture_output=True, check=True, timeout=120)
    try:
        assert any(f"uid {first} owns process" in found for found in program_users.in_use(range(first, first + 1)))
        settings = Settings(backend=engine, image=IMAGE, container_user=run_as, workers=1, max_workers=1)
        backend, _ = asyncio.run(choose.choose_backend(settings))  # refused before, with the left container's uid
        assert backend.name == engine
        assert not program_users.in_use(range(first, first + 1))
    finally:
        subprocess.run([engine, "rm", "-f", name], capture_output=True, check=False, timeout=120)


def test_a_range_is_reserved_and_the_default_moves_past_a_held_one(tmp_path: Path) -> None:
    """Two servers started at once both found a range free by looking at users and processes: a range is held
    with a lock for the server's life, the default moves on by whole blocks past one held, an explicit one does
    not, and a range given back is free again."""
    uids = range(program_users.HOST_FIRST, program_users.HOST_FIRST + 150)
    first = program_users.take_range(uids, True, lambda _: [], choose.LAST_UID, str(tmp_path))
    assert not isinstance(first, list) and first[0] == uids
    second = program_users.take_range(uids, True, lambda _: [], choose.LAST_UID, str(tmp_path))
    assert not isinstance(second, list)
    assert second[0][0] == uids[0] + program_users.BLOCK and len(second[0]) == len(uids)
    refused = program_users.take_range(uids, False, lambda _: [], choose.LAST_UID, str(tmp_path))
    assert isinstance(refused, list) and "another sandbox server's" in refused[0]
    # What the host already has in a range is passed over too, where the range may move.
    in_use = program_users.take_range(
        uids, True, lambda r: ["busy"] if r[0] < uids[0] + 3 * 4096 else [], 2**32, str(tmp_path)
    )
    assert not isinstance(in_use, list) and in_use[0][0] == uids[0] + 3 * program_users.BLOCK
    for taken in (first, second, in_use):
        taken[1].release()
    again = program_users.take_range(uids, False, lambda _: [], choose.LAST_UID, str(tmp_path))
    assert not isinstance(again, list) and again[0] == uids
    again[1].release()
    assert not list(tmp_path.iterdir())  # a lock file goes with its lock: none piles up in the host's directory


def test_two_local_servers_at_once_run_programs_as_users_of_their_own() -> None:
    """As root, two local servers on one host with the default HOST_UID take ranges apart, and give them back."""
    if os.geteuid() != 0:
        pytest.skip("the local backend runs programs as users of their own only as root")
    from codegym_sandbox.main import create_app
    from fastapi.testclient import TestClient
    from sandbox_support import settings_for

    with (
        TestClient(create_app(settings_for("local", workers=1))) as a,
        TestClient(create_app(settings_for("local", workers=1))) as b,
    ):
        firsts = [client.app.state.executor.backend.config["host_uid"] for client in (a, b)]  # type: ignore[attr-defined]
        assert firsts[0] != firsts[1] and abs(firsts[0] - firsts[1]) % program_users.BLOCK == 0
        for client in (a, b):
            out = client.post("/v1/execute", json={"language": "python", "code": "import os; print(os.getuid())"})
            assert out.status_code == 200, out.text
    with TestClient(create_app(settings_for("local", workers=1))) as c:  # both given back
        assert c.app.state.executor.backend.config["host_uid"] == min(firsts)  # type: ignore[attr-defined]


def test_a_local_server_refused_its_explicit_range_says_which_setting() -> None:
    """An explicit HOST_UID another server of the host holds is refused, naming HOST_UID (no container is involved)."""
    if os.geteuid() != 0:
        pytest.skip("the local backend runs programs as users of their own only as root")
    from codegym_sandbox.main import create_app
    from fastapi.testclient import TestClient

    first = 1_900_000_000 + (os.getpid() % 1000) * 4096
    refused = pytest.raises(CannotIsolate, match=r"HOST_UID and one per worker slot.*CODEGYM_SANDBOX_HOST_UID")
    with TestClient(create_app(Settings(backend="local", workers=1, host_uid=first))), refused:
        asyncio.run(choose.choose_backend(Settings(backend="local", workers=1, host_uid=first)))
