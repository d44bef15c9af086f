"""A session's copies, attacked: a copy cannot reach its session, its siblings, another session or the host,
and what it holds counts against its own limits.

The families a copy adds to a session's: what it inherited (a shared mapping, a pipe or socket, open files, the
working directory), its siblings' processes and files, the stopped kernel it was copied from (which its
session's own continuation can see), and its memory beside its siblings'. Each copy is a host user of its own
(``agent/kernel_copy.py``); the container backends fork nothing (501).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

from .host_state import HostState
from .suite import PROGRAM_HOST_UID, hostile_settings


@pytest.fixture(scope="module")
def server(backend: str, host: HostState) -> Iterator[TestClient]:
    if backend != "local" or os.geteuid() != 0:
        pytest.skip("sessions fork on the local backend, as root (the others answer 501: test_session_forks.py)")
    settings = hostile_settings(backend)
    settings.sessions.memory_mb = 128
    settings.sessions.warm = 0
    settings.sessions.max_sessions = 12
    settings.sessions.max_sessions_per_client = 12
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c
    assert host.problems() == []


def _new(client: TestClient) -> str:
    r = client.post("/v1/sessions", json={"language": "python"})
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    return sid


def _cell(client: TestClient, sid: str, code: str, timeout_s: float = 5) -> dict[str, Any]:
    r = client.post(f"/v1/sessions/{sid}/execute", json={"code": code, "timeout_s": timeout_s})
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _fork(client: TestClient, sid: str, n: int) -> list[str]:
    r = client.post(f"/v1/sessions/{sid}/fork", json={"n": n})
    assert r.status_code == 200, r.text
    ids: list[str] = r.json()["session_ids"]
    return ids


def _session_uids() -> set[int]:
    """Host users of every session's processes now (the sessions' slots follow the runs')."""
    return {uid for uid in range(PROGRAM_HOST_UID + 1, PROGRAM_HOST_UID + 24) if HostState.program_processes_of(uid)}


@pytest.fixture
def family(server: TestClient) -> Iterator[tuple[str, list[str]]]:
    sid = _new(server)
    prefix = (
        "import mmap, os, socket, signal\nshared = mmap.mmap(-1, 4096)\nshared[:4] = b'zero'\n"
        "r, w = os.pipe()\na, b = socket.socketpair()\nlog = open('log.txt', 'a')\n"
    )
    assert _cell(server, sid, prefix)["error"] is None
    ids = _fork(server, sid, 3)
    yield sid, ids
    for s in (sid, *ids):
        server.delete(f"/v1/sessions/{s}")


def test_nothing_inherited_is_a_channel_between_copies(server: TestClient, family: tuple[str, list[str]]) -> None:
    sid, (one, two, three) = family
    # A shared mapping written by one copy: private to it now.
    _cell(server, one, "shared[:4] = b'ONE!'")
    assert _cell(server, two, "bytes(shared[:4])")["display"] == "b'zero'"
    assert _cell(server, sid, "bytes(shared[:4])")["display"] == "b'zero'"
    # A pipe and a socket pair made before the fork, and an open file: none of them is there in a copy.
    for code in ("os.write(w, b'x')", "a.send(b'x')", "log.write('x'); log.flush()"):
        out = _cell(server, three, code)
        assert out["error"] is not None and out["error"]["type"] in ("OSError", "ValueError"), (code, out)
    # The session keeps its own: they are no sibling's (each copy was given its own), only the stopped kernel's.
    out = _cell(server, sid, "os.write(w, b'x'), os.read(r, 1), a.send(b'y'), b.recv(1)")
    assert out["display"] == "(1, b'x', 1, b'y')", out


def test_a_copy_reaches_no_process_but_its_own(server: TestClient, family: tuple[str, list[str]]) -> None:
    sid, ids = family
    reach = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
me = os.readlink('/proc/self')
seen = [p for p in os.listdir('/proc') if p.isdigit() and p != me]
hit = []
for p in seen:
    for sig in (0, signal.SIGKILL):
        try:
            fd = os.open(f'/proc/{p}', os.O_RDONLY)
        except OSError:
            continue
        if libc.syscall(424, fd, sig, None, 0) == 0:  # pidfd_send_signal, by its /proc directory
            hit.append(p)
        os.close(fd)
for p in range(2, 400):  # 1 is itself (the init of its pid namespace)
    try:
        os.kill(p, signal.SIGKILL)
        hit.append(p)
    except OSError:
        pass
len(hit), len(seen)
"""
    for s in (sid, *ids):  # the session's own continuation too, which sees the kernel it was copied from
        out = _cell(server, s, reach)
        assert out["display"] == "(0, 0)", (s, out)  # none seen, none signalled
    for s in (sid, *ids):
        assert _cell(server, s, "'alive'")["display"] == "'alive'"


def test_each_copy_is_a_host_user_of_its_own_and_nothing_is_left(server: TestClient) -> None:
    before = _session_uids()
    sid = _new(server)
    _cell(server, sid, "x = 1")
    ids = _fork(server, sid, 3)
    for s in ids:
        _cell(server, s, "x")
    # The session's user (its stopped kernel and its continuation) and one each for three copies.
    assert len(_session_uids() - before) == 4
    for s in (sid, *ids):
        assert server.delete(f"/v1/sessions/{s}").status_code == 204
    assert _session_uids() == before


def test_each_copy_holds_its_own_memory_limit(server: TestClient) -> None:
    # Three copies of a 128 MiB session each fill 80 MiB: within their own limits, not one shared one.
    sid = _new(server)
    _cell(server, sid, "held = None")
    ids = _fork(server, sid, 3)
    try:
        for s in ids:
            out = _cell(server, s, "held = bytearray(80 << 20); len(held) >> 20")
            assert out["display"] == "80" and out["alive"], out
        out = _cell(server, ids[0], "more = bytearray(100 << 20)", timeout_s=10)  # past its own: its failure alone
        failed = out["error"] is not None and out["error"]["type"] == "MemoryError"
        assert out["status"] == "memory_limit" or failed, out
        for s in (sid, *ids[1:]):
            assert _cell(server, s, "'alive'")["display"] == "'alive'"
    finally:
        for s in (sid, *ids):
            server.delete(f"/v1/sessions/{s}")


def test_a_copys_fork_bomb_and_its_exit_stay_its_own(server: TestClient) -> None:
    sid = _new(server)
    _cell(server, sid, "import os")
    one, two = _fork(server, sid, 2)
    try:
        bomb = (
            "made = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            import time\n"
            "            time.sleep(60)\n            os._exit(0)\n        made += 1\nexcept OSError:\n    pass\nmade"
        )
        out = _cell(server, one, bomb)
        assert out["alive"] and int(out["display"]) < 32, out
        # Its processes are its own count: a sibling (and the session) still start theirs.
        for s in (two, sid):
            out = _cell(server, s, "import subprocess\nsubprocess.run(['true']).returncode")
            assert out["display"] == "0", out
        out = _cell(server, two, "os._exit(3)")
        assert not out["alive"], out
        assert _cell(server, sid, "'alive'")["display"] == "'alive'"
        assert server.post(f"/v1/sessions/{two}/execute", json={"code": "1"}).status_code == 410
    finally:
        for s in (sid, one, two):
            server.delete(f"/v1/sessions/{s}")
