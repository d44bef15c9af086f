"""The container backends' channel to each agent: a socket of the server's own, past the engine, or where the agent
cannot reach it, the container's stream (docker's attached stream, podman's client's pipes); and no program can
reach it either way."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from codegym_sandbox.agent.channel import CHANNEL_ENV, NO_CHANNEL
from codegym_sandbox.backends import agent_channel
from codegym_sandbox.backends.docker import DockerBackend
from codegym_sandbox.backends.podman import PodmanBackend
from codegym_sandbox.backends.worker import AgentWorker
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import run_code, settings_for, stdout

_TAKE = "from codegym_sandbox.agent.channel import take; take(); import os; os.write(1, b'over the channel')"


def _take_in_child(path: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, CHANNEL_ENV: path}
    return subprocess.Popen([sys.executable, "-c", _TAKE], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)


def test_an_agent_takes_the_socket_it_is_named_for_its_channel(tmp_path: Path) -> None:
    path = str(tmp_path / "agent.sock")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen(1)
        child = _take_in_child(path)
        conn, _ = listener.accept()
        with conn:
            assert conn.recv(100) == b"over the channel"
        out, _ = child.communicate(timeout=30)
    assert out == b""  # nothing on its own stdout: the socket is its fd 1


def test_an_agent_that_cannot_reach_its_socket_says_so_on_its_stdout(tmp_path: Path) -> None:
    child = _take_in_child(str(tmp_path / "nothing-here.sock"))
    out, _ = child.communicate(timeout=30)
    assert out == NO_CHANNEL + b"over the channel"


@pytest.fixture(params=["docker", "podman"])
def engine(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    settings_for(name)  # skips (loudly) when this engine cannot run here
    return name


def _workers(client: TestClient) -> tuple[DockerBackend | PodmanBackend, list[AgentWorker]]:
    backend = client.app.state.executor.backend  # type: ignore[attr-defined]
    assert isinstance(backend, DockerBackend | PodmanBackend)
    return backend, [w for w in backend._workers if w is not None]


def _on_own_socket(worker: AgentWorker) -> bool:
    """Whether the worker's frames go over a socket of the server's (not docker's attached stream, a socket of the
    daemon's, nor podman's client's pipes)."""
    assert worker.writer is not None
    sock = worker.writer.get_extra_info("socket")
    return sock is not None and sock.family == socket.AF_UNIX and "codegym-agent-" in str(sock.getsockname())


def _left(before: set[str]) -> set[str]:
    return {p.name for p in Path("/tmp").glob("codegym-agent-*")} - before


@pytest.fixture
def dirs() -> Iterator[set[str]]:
    """The channels' directories already here (another server's): those a test's server leaves are the rest."""
    yield {p.name for p in Path("/tmp").glob("codegym-agent-*")}


_REACH = f"""
import os, socket
try:
    os.listdir({agent_channel.INSIDE!r})
    print("listed")
except PermissionError:
    print("refused")
try:
    socket.socket(socket.AF_UNIX).connect({agent_channel.INSIDE!r} + "/agent.sock")
    print("connected")
except OSError:
    print("unreachable")
print(os.environ.get({CHANNEL_ENV!r}, "unnamed"))
"""


def test_agents_talk_over_the_servers_sockets_which_no_program_reaches(engine: str, dirs: set[str]) -> None:
    with TestClient(create_app(settings_for(engine, server_id="tchan"))) as client:
        backend, workers = _workers(client)
        assert backend.channels.on and workers
        assert all(_on_own_socket(worker) for worker in workers)
        assert stdout(run_code(client, _REACH)).split() == ["refused", "unreachable", "unnamed"]
        assert _left(dirs) == set()  # each directory goes once its agent is connected


def test_an_agent_that_cannot_reach_the_socket_talks_over_its_stream(
    engine: str, monkeypatch: pytest.MonkeyPatch, dirs: set[str]
) -> None:
    made = agent_channel.AgentChannel.__init__

    def unreachable(self: agent_channel.AgentChannel, slot: int) -> None:
        made(self, slot)
        os.chown(self.directory, 65534, 65534)  # the container's root, no CAP_DAC_OVERRIDE, cannot enter it

    monkeypatch.setattr(agent_channel.AgentChannel, "__init__", unreachable)
    with TestClient(create_app(settings_for(engine, server_id="tchs"))) as client:
        backend, workers = _workers(client)
        assert not backend.channels.on and workers
        assert not any(_on_own_socket(worker) for worker in workers)  # the engine's stream carries the frames
        assert stdout(run_code(client, "print(6 * 7)")) == "42\n"
        assert _left(dirs) == set()


def test_a_daemon_that_cannot_mount_the_servers_directory_leaves_the_agents_on_their_streams(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dirs: set[str]
) -> None:
    made = agent_channel.AgentChannel.__init__

    def elsewhere(self: agent_channel.AgentChannel, slot: int) -> None:
        made(self, slot)
        self.directory = str(tmp_path / "not-on-the-daemons-host")  # as a server in a container of its own sees

    monkeypatch.setattr(agent_channel.AgentChannel, "__init__", elsewhere)
    with TestClient(create_app(settings_for("docker", server_id="tchm"))) as client:
        backend, workers = _workers(client)
        assert not backend.channels.on and workers
        assert not any(_on_own_socket(worker) for worker in workers)
        assert stdout(run_code(client, "print(6 * 7)")) == "42\n"
    assert not (tmp_path / "not-on-the-daemons-host").exists()  # made on the daemon's host by no one
    for name in _left(dirs):  # the directories this test's channels were bound in, under another name
        shutil.rmtree(Path("/tmp") / name)


_MOUNTED = f"""
print(*[line.split()[3] for line in open("/proc/self/mountinfo") if " {agent_channel.INSIDE} " in line])
"""


def test_a_server_with_a_long_private_tmpdir_binds_its_agents_sockets_in_tmp(
    engine: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, dirs: set[str]
) -> None:
    private = tmp_path / ("private-" * 12)  # past what a socket's path may hold, and the server's own to hide
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    with TestClient(create_app(settings_for(engine, server_id="tchl"))) as client:
        backend, workers = _workers(client)
        assert backend.channels.on and all(_on_own_socket(worker) for worker in workers)
        (source,) = stdout(run_code(client, _MOUNTED)).split()  # what programs see of where it is on the host
        assert source.startswith("/tmp/codegym-agent-") and "private" not in source
        assert _left(dirs) == set()


def test_where_no_socket_can_be_made_the_agents_talk_over_their_streams(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(self: agent_channel.AgentChannel, slot: int) -> None:
        raise PermissionError(13, "Permission denied", "/tmp")  # as mkdtemp answers on a /tmp the server may not write

    monkeypatch.setattr(agent_channel.AgentChannel, "__init__", refused)
    with TestClient(create_app(settings_for(engine, server_id="tchn"))) as client:
        backend, workers = _workers(client)
        assert not backend.channels.on and workers
        assert not any(_on_own_socket(worker) for worker in workers)
        assert stdout(run_code(client, "print(6 * 7)")) == "42\n"
