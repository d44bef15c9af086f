"""A session's copies, attacked: a copy cannot reach its session, its siblings, another session or the host,
and what it holds counts against its own limits.

The families a copy adds to a session's: what it inherited (a shared mapping, a pipe or socket, open files, the
working directory), its siblings' processes and files, the stopped kernel it was copied from (which its
session's own continuation can see), and its memory beside its siblings'. Each copy is a host user of its own
(``agent/kernel_copy.py``), on the local, podman and docker backends.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.backends.containers import CopyCgroups
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

from .host_state import HostState
from .suite import PROGRAM_HOST_UID, hostile_settings


@pytest.fixture(scope="module")
def server(backend: str, host: HostState) -> Iterator[TestClient]:
    if backend not in ("local", "podman", "docker") or os.geteuid() != 0:
        pytest.skip("sessions fork on the local, podman and docker backends, as root")
    settings = hostile_settings(backend, main=True)
    settings.sessions.memory_mb = 128
    settings.sessions.warm = 0
    settings.sessions.max_sessions = 24
    settings.sessions.max_sessions_per_client = 24
    settings.sessions.cpu_s = 2.5
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c
    assert host.problems() == []
    # A container's copies' cgroups (the host's, bound into it: backends/containers.py) go with the server.
    cgroups = CopyCgroups.find()
    for root in cgroups.roots if cgroups is not None and backend == "podman" else ():
        parent = f"{root}/{CopyCgroups.PARENT}"
        left = [name for name in os.listdir(parent) if f"-{settings.server_id}-" in name]
        assert left == [], (parent, left)


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
def live(p):
    try:
        with open(f'/proc/{p}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False
seen = [p for p in os.listdir('/proc') if p.isdigit() and p != me and live(p)]
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
for p in range(2, 4096):  # the box's pid namespace: its own and the zombie of the session's kernel aside
    if str(p) == me or not live(p):
        continue
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


def test_a_copy_learns_nothing_of_its_siblings_through_a_pidfd(
    server: TestClient, family: tuple[str, list[str]]
) -> None:
    # pidfd_open takes any pid of the namespace, hidepid or not; pidfs's PIDFD_GET_INFO (Linux 6.13) then answered a
    # sibling's parent and host ids, whatever size its request said.
    sid, ids = family
    probe = """
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
me, told = os.getpid(), []
for p in range(1, 4096):
    fd = libc.syscall(434, p, 0)  # pidfd_open
    if fd < 0:
        continue
    for size in (0x40, 0x50, 0x60):
        buf = ctypes.create_string_buffer(size)
        struct.pack_into('Q', buf, 0, 7)
        if libc.ioctl(fd, 0xC000FF0B | size << 16, buf) == 0:
            told.append((p, size))
    os.close(fd)
told
"""
    for s in (sid, *ids):
        assert _cell(server, s, probe)["display"] == "[]", s


def test_each_copy_is_a_host_user_of_its_own_and_nothing_is_left(server: TestClient) -> None:
    deadline = time.monotonic() + 10
    while _session_uids() and time.monotonic() < deadline:
        time.sleep(0.05)  # earlier tests' sessions end behind their deletes: one ending as this one began stayed
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
    # A delete is answered once the session is out of the store; its worker's end goes on behind the answer.
    deadline = time.monotonic() + 10
    while (left := _session_uids()) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == before


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


# 100 MiB, each page written: a 128 MiB session's memory, then a child's of its own beside it.
TOUCHED = "(lambda b: (b.__setitem__(slice(None, None, 4096), b'\\1' * (len(b) // 4096)), b)[1])(bytearray(100 << 20))"
GROWN = (
    "import os, time\nr, w = os.pipe()\nif os.fork() == 0:\n    try:\n"
    f"        del K\n        import gc; gc.collect()\n        x = {TOUCHED}\n        os.write(w, b'ok')\n"
    "    except MemoryError:\n        os.write(w, b'no')\n    time.sleep(60)\nos.close(w)\ngot = os.read(r, 2)\n"
    "time.sleep(0.5)\ngot"  # the box's sum of a run's memory looks every 50 ms
)


@pytest.mark.parametrize("forked", ["never", "session", "copy"])
def test_what_a_session_held_before_a_fork_stays_within_its_limit(server: TestClient, forked: str) -> None:
    # What a session held as it was forked stays charged where it was (the worker's cgroup, or a copy's own),
    # shared with its copies: its continuation may not get a whole limit's room beside it. A child that lets the
    # session's memory go (its parent keeps it) and takes as much again passes the session's limit, forked or not
    # (a session forked once held 709 MiB of a 512 MiB limit so).
    sid = _new(server)
    ids: list[str] = []
    try:
        held = _fork(server, sid, 1)[0] if forked == "copy" else sid
        ids += [held] if held != sid else []
        assert _cell(server, held, f"K = {TOUCHED}", timeout_s=30)["error"] is None
        if forked != "never":
            ids += _fork(server, held, 1)
            assert server.delete(f"/v1/sessions/{ids[-1]}").status_code == 204
        out = _cell(server, held, GROWN, timeout_s=30)
        assert out["status"] == "memory_limit" or out["display"] in ("b'no'", "b''"), out
    finally:
        for s in (sid, *ids):
            server.delete(f"/v1/sessions/{s}")


# Processes that sleep, made until a fork fails: how many were made.
BOMB = (
    "import os\nmade = 0\ntry:\n    while True:\n        if os.fork() == 0:\n            import time\n"
    "            time.sleep(60)\n            os._exit(0)\n        made += 1\nexcept OSError:\n    pass\nmade"
)


def test_a_copys_fork_bomb_and_its_exit_stay_its_own(server: TestClient) -> None:
    sid = _new(server)
    _cell(server, sid, "import os")
    one, two = _fork(server, sid, 2)
    try:
        out = _cell(server, one, BOMB)
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


_LIMIT = "import resource\nresource.getrlimit(resource.RLIMIT_NPROC)"
_RAISE = (
    "try:\n    resource.setrlimit(resource.RLIMIT_NPROC, (resource.getrlimit(resource.RLIMIT_NPROC)[1],) * 2)\n"
    "    got = 'raised'\nexcept OSError:\n    got = 'refused'\ngot"
)


def test_every_member_keeps_the_sessions_process_limit(server: TestClient) -> None:
    # The kernel raises its own limit for its clones (each copy's user namespace counts under it) and each copy
    # sets the session's back as it is made over: a member left under the hard limit would bound no fork bomb.
    sid = _new(server)
    members = [sid]
    try:
        limit = _cell(server, sid, _LIMIT)["display"]
        assert _cell(server, sid, _RAISE)["display"] == "'refused'"
        members += _fork(server, sid, 2)
        for s in members:
            assert _cell(server, s, _LIMIT)["display"] == limit, s
            assert _cell(server, s, _RAISE)["display"] == "'refused'", s
        for s in _fork(server, members[1], 2):  # a copy's copies too
            assert _cell(server, s, _LIMIT)["display"] == limit, s
            members.append(s)
    finally:
        for s in members:
            server.delete(f"/v1/sessions/{s}")


def test_a_session_that_may_fork_holds_no_more_processes_than_any(server: TestClient) -> None:
    # A session's container that may fork holds its members' agents too: none of that room is its programs'.
    sid = _new(server)
    try:
        out = _cell(server, sid, BOMB)
        assert out["alive"] and int(out["display"]) < 32, out
    finally:
        server.delete(f"/v1/sessions/{sid}")


def test_copies_forked_and_deleted_in_a_loop_leave_room_for_other_clients(server: TestClient) -> None:
    # Each copy's user (a sessions' slot) served no one for a while after the copy ended, counted by no cap: a
    # client forking and deleting copies in a loop held every slot, and others' new sessions were refused.
    sid = _new(server)
    try:
        _cell(server, sid, "x = 1")
        for _ in range(30):  # more than the server's sessions (24 here), within the while
            (copy,) = _fork(server, sid, 1)
            assert server.delete(f"/v1/sessions/{copy}").status_code == 204
        r = server.post("/v1/sessions", json={"language": "python"})  # a slot of its own: one is free
        assert r.status_code == 201, r.text
        server.delete(f"/v1/sessions/{r.json()['session_id']}")
    finally:
        server.delete(f"/v1/sessions/{sid}")


def _alive(client: TestClient, *sids: str) -> None:
    for s in sids:
        out = _cell(client, s, "'alive'")
        assert out["display"] == "'alive'", (s, out)


def test_no_terminal_process_group_or_parent_reaches_a_copy(server: TestClient) -> None:
    # Before the fork the session's kernel took a terminal, and a handler that kills whatever it can on SIGHUP.
    sid = _new(server)
    prefix = (  # a container's session has no terminal to take (its /dev/pts is empty and read-only)
        "import os, signal, fcntl\ntry:\n    m, s = os.openpty()\n    tty = os.open(os.ttyname(s), os.O_RDWR)\n"
        "except FileNotFoundError:\n    m = None\n"
        "def kill_all(*_):\n    for p in range(2, 4096):\n        try:\n            os.kill(p, 9)\n"
        "        except OSError:\n            pass\nsignal.signal(signal.SIGHUP, kill_all)\n"
    )
    assert _cell(server, sid, prefix)["error"] is None
    one, two = _fork(server, sid, 2)
    try:
        # A copy has no terminal of the session's; the session's own one signals nobody but its own group.
        out = _cell(server, one, "open('/dev/tty')")
        assert out["error"] is not None and out["error"]["type"] == "OSError", out
        _cell(server, sid, "m is None or fcntl.ioctl(m, 0x40045436, b'\\x02\\x00\\x00\\x00')")  # TIOCSIG SIGINT
        # An orphaned process group's SIGHUP and SIGCONT (a child that leaves its parent's group, then ends).
        trigger = (
            "pid = os.fork()\nif pid == 0:\n    os.setpgid(0, 0)\n    os._exit(0)\nos.waitpid(pid, 0)\n"
            "m is None or os.close(m)"
        )
        _cell(server, sid, trigger)
        _cell(server, two, trigger.replace("os.close(m)", "None"))
        _alive(server, one, two)
    finally:
        for s in (sid, one, two):
            server.delete(f"/v1/sessions/{s}")


def test_a_copys_own_files_and_mappings_follow_no_one_else(backend: str, server: TestClient) -> None:
    sid = _new(server)
    deep = "d/" * 1100  # a working directory deeper than any path a call takes, on the session's files
    prefix = (
        "import mmap, os, socket\nopen('f.bin', 'wb').write(b'A' * 8192)\nmapped = mmap.mmap(os.open('f.bin', "
        f"os.O_RDONLY), 0, prot=mmap.PROT_READ)\nfor part in {deep!r}.split('/')[:-1]:\n"
        "    os.mkdir(part)\n    os.chdir(part)\n"
    )
    assert _cell(server, sid, prefix)["error"] is None
    one, two = _fork(server, sid, 2)
    try:
        # Its working directory is on its own files, however deep; what one copy writes there no other sees.
        for s in (one, two):
            out = _cell(server, s, "os.stat('.').st_dev == os.stat('/tmp/box').st_dev, os.listdir('.')")
            assert out["display"] == "(True, [])", out
        _cell(server, one, "open('mine', 'w').write('one')")
        assert _cell(server, two, "os.listdir('.')")["display"] == "[]"
        assert _cell(server, sid, "os.listdir('.')")["display"] == "[]"
        # A mapping of the session's file: what the session writes to that file no copy's mapping shows.
        _cell(server, sid, "os.chdir('/tmp/box')\nwith open('f.bin', 'r+b') as f:\n    f.write(b'HACK')")
        for s in (one, two):
            assert _cell(server, s, "mapped[:4]")["display"] == "b'AAAA'"
        # Ports are each copy's own (in a container no program has an internet socket: linux._seccomp_program).
        bind = "b = socket.socket()\nb.bind(('127.0.0.1', 5000))\nb.listen()\n'bound'"
        for s in (one, two):
            out = _cell(server, s, bind)
            assert out["display"] == "'bound'" or (
                backend != "local" and "Address family not supported" in out["error"]["message"]
            ), out
    finally:
        for s in (sid, one, two):
            server.delete(f"/v1/sessions/{s}")


def test_a_copy_ends_as_the_session_would(server: TestClient) -> None:
    sid = _new(server)
    _cell(server, sid, "import os, signal, time")
    one, two, three = _fork(server, sid, 3)
    try:
        out = _cell(server, one, "os.kill(os.getpid(), signal.SIGTERM)\n'after'")
        assert out["status"] == "killed" and not out["alive"], out
        # The session's CPU time over its life (2.5 s here) holds for a copy, from what the session had used.
        spin = "t = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass"
        _cell(server, two, spin)
        out = _cell(server, two, spin)
        assert out["status"] == "time_limit" and not out["alive"], out
        _alive(server, sid, three)
    finally:
        for s in (sid, one, two, three):
            server.delete(f"/v1/sessions/{s}")


def test_a_member_deleted_while_its_cell_runs_is_ended_at_once(server: TestClient) -> None:
    import threading

    sid = _new(server)
    _cell(server, sid, "import time")
    (one,) = _fork(server, sid, 1)
    answers: list[int] = []
    slow = threading.Thread(
        target=lambda: answers.append(
            server.post(f"/v1/sessions/{one}/execute", json={"code": "time.sleep(4)", "timeout_s": 10}).status_code
        )
    )
    slow.start()
    time.sleep(0.7)
    began = time.monotonic()
    assert server.delete(f"/v1/sessions/{one}").status_code == 204
    slow.join()
    assert answers == [410] and time.monotonic() - began < 3, answers
    _alive(server, sid)
    server.delete(f"/v1/sessions/{sid}")


def test_forks_of_two_members_at_once_keep_their_copies_apart(server: TestClient) -> None:
    import threading

    sid = _new(server)
    _cell(server, sid, "who = 's'")
    (other,) = _fork(server, sid, 1)
    _cell(server, other, "who = 't'")
    got: dict[str, list[str]] = {}
    forks = [threading.Thread(target=lambda s=s: got.__setitem__(s, _fork(server, s, 2))) for s in (sid, other)]
    for f in forks:
        f.start()
    for f in forks:
        f.join()
    try:
        for parent, copies in got.items():
            for copy in copies:
                assert _cell(server, copy, "who")["display"] == ("'s'" if parent == sid else "'t'"), (parent, copy)
    finally:
        for s in (sid, other, *got.get(sid, []), *got.get(other, [])):
            server.delete(f"/v1/sessions/{s}")


def test_what_a_family_holds_is_counted_and_given_back(server: TestClient) -> None:
    store = server.app.state.sessions  # type: ignore[attr-defined]
    sid = _new(server)
    _cell(server, sid, "x = 1")
    copies = _fork(server, sid, 16)  # a GRPO group's worth
    try:
        assert _cell(server, copies[-1], "x")["display"] == "1"
        # The session's kernel's memory stays held while the family lives: counted on a member once it is deleted.
        held = sum(x.holds_mb for x in store.sessions.values())
        server.delete(f"/v1/sessions/{sid}")
        assert sum(x.holds_mb for x in store.sessions.values()) == held - 128
        # A deleted copy's host user serves other sessions again (once its processes are gone: here at once),
        # made and deleted past the sessions' slots.
        from codegym_sandbox.backends import session_family

        back, session_family._SLOT_BACK_S = session_family._SLOT_BACK_S, 0.0
        try:
            for _ in range(30):
                (made,) = _fork(server, copies[0], 1)
                assert server.delete(f"/v1/sessions/{made}").status_code == 204
                time.sleep(0.05)
        finally:
            session_family._SLOT_BACK_S = back
        assert server.post("/v1/sessions", json={"language": "python"}).status_code == 201
    finally:
        for s in copies:
            server.delete(f"/v1/sessions/{s}")
        for s in list(store.sessions):
            server.delete(f"/v1/sessions/{s}")


def _agent_pid(worker: Any) -> int:
    """The host's pid of a session's worker's agent: the local backend's process, a container's init."""
    if hasattr(worker, "container"):  # docker's
        worker.container.reload()
        return int(worker.container.attrs["State"]["Pid"])
    if hasattr(worker, "binary"):  # podman's: its process is the engine's client, not the agent
        out = subprocess.run([worker.binary, "inspect", "--format", "{{.State.Pid}}", worker.name], capture_output=True)
        return int(out.stdout)
    return int(worker.pid)


def _zombies_under(root: int) -> list[int]:
    """Zombies among ``root``'s descendants."""
    found = []
    for pid in _descendants(root):
        with contextlib.suppress(FileNotFoundError, ProcessLookupError), open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                found.append(pid)
    return found


def test_ended_members_leave_no_process_behind_them(server: TestClient) -> None:
    # Each member is served by an agent process of its own, which ends with it: the worker's agent takes its
    # end as it passes on the next frame (rounds of forks and deletes once left four zombies each).
    store = server.app.state.sessions  # type: ignore[attr-defined]
    sid = _new(server)
    try:
        _cell(server, sid, "x = 1")
        worker = _agent_pid(store.sessions[sid].lease.worker)
        for _ in range(4):
            for copy in _fork(server, sid, 3):
                server.delete(f"/v1/sessions/{copy}")
        # A deleted member's agent ends behind the delete's answer (later, on a loaded machine): each frame passed
        # takes the ends there are by then.
        deadline = time.monotonic() + 10
        while True:
            time.sleep(0.5)
            assert _cell(server, sid, "x")["display"] == "1"
            if not (zombies := _zombies_under(worker)) or time.monotonic() > deadline:
                break
        assert zombies == []
    finally:
        server.delete(f"/v1/sessions/{sid}")


def test_no_process_of_a_session_holds_what_its_agent_started_with(backend: str, server: TestClient) -> None:
    # Docker's session containers start with CAP_SYS_ADMIN, for the agent to remount their /proc (hidepid): it
    # gives it up before anything runs. No process of a session's container or its copies (agent, box, kernel,
    # copies' agents) may hold it, with a family made and a cell run in each member. (The local backend's agent
    # holds it in its worker's own user namespace, by design: SECURITY.md.)
    if backend == "local":
        pytest.skip("a container's processes: the local backend's agent holds its namespaces' capabilities")
    store = server.app.state.sessions  # type: ignore[attr-defined]
    sid = _new(server)
    try:
        _cell(server, sid, "import os\nx = 1")
        copies = _fork(server, sid, 2)
        for copy in copies:
            _cell(server, copy, "x + 1")
        held = []
        for pid in _descendants(_agent_pid(store.sessions[sid].lease.worker)):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError), open(f"/proc/{pid}/status") as f:
                caps = {
                    k: int(v, 16) for k, v in (line.split(":") for line in f) if k in ("CapPrm", "CapEff", "CapInh")
                }
            held += [(pid, k) for k, v in caps.items() if v & (1 << 21)]
        assert held == [], held
        for copy in copies:
            server.delete(f"/v1/sessions/{copy}")
    finally:
        server.delete(f"/v1/sessions/{sid}")


def _descendants(root: int) -> list[int]:
    """``root`` and every process under it."""
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        with contextlib.suppress(FileNotFoundError, ProcessLookupError), open(f"/proc/{pid}/task/{pid}/children") as f:
            stack += [int(x) for x in f.read().split()]
    return found


def test_a_signal_sent_while_a_copy_is_made_is_no_program_of_the_agents(server: TestClient) -> None:
    # A write lease on a file of the session's, breaking with SIGTRAP to the kernel's process group as the agent
    # copies the files: a trap that is not the end of the agent's program, and a lease that would hold the fork
    # for its break time (45 s). Refused at once; nothing of the session's is changed (the agent once took its
    # fd 0 for the copy's channels, and changed /dev/null's mode as root).
    sid = _new(server)
    try:
        lease = (
            "import os, fcntl, signal, stat\nsignal.signal(signal.SIGTRAP, signal.SIG_IGN)\n"
            "fd = os.open('L', os.O_RDWR | os.O_CREAT, 0o644)\nfcntl.fcntl(fd, 1024, fcntl.F_WRLCK)\n"
            "fcntl.fcntl(fd, 10, signal.SIGTRAP)\nfcntl.fcntl(fd, fcntl.F_SETOWN, -os.getpgrp())\n"
            "oct(os.stat('/dev/null').st_mode)"
        )
        mode = _cell(server, sid, lease)["display"]
        started = time.monotonic()
        r = server.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
        assert r.status_code == 409 and time.monotonic() - started < 10, r.text
        assert _cell(server, sid, "oct(os.stat('/dev/null').st_mode)")["display"] == mode
        assert _cell(server, sid, "len(open('/dev/null').read())")["display"] == "0"
        _cell(server, sid, "fcntl.fcntl(fd, 1024, fcntl.F_UNLCK)\nos.close(fd)")
        for copy in _fork(server, sid, 1):
            server.delete(f"/v1/sessions/{copy}")
    finally:
        server.delete(f"/v1/sessions/{sid}")


def test_what_cannot_be_copied_is_refused_and_the_session_goes_on(server: TestClient) -> None:
    sid = _new(server)
    try:
        _cell(server, sid, "import os\nfor i in range(10_001):\n    open(f'f{i}', 'w').close()\nx = 1", timeout_s=20)
        limit = _cell(server, sid, _LIMIT)["display"]
        r = server.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
        assert r.status_code == 409 and "too many" in r.json()["detail"], r.text
        assert _cell(server, sid, "x + 1")["display"] == "2"
        assert _cell(server, sid, _LIMIT)["display"] == limit  # what it raised for its clones, set back
        # Nothing of the copies it began is left: no zombie of its kernel's, and the next fork is made.
        zombies = (
            "import glob\n"
            "sum(open(p).read().rsplit(')', 1)[1].split()[0] == 'Z' for p in glob.glob('/proc/[0-9]*/stat'))"
        )
        assert _cell(server, sid, zombies)["display"] == "0"
        _cell(server, sid, "for i in range(10_001):\n    os.remove(f'f{i}')", timeout_s=20)
        for copy in _fork(server, sid, 2):
            server.delete(f"/v1/sessions/{copy}")
    finally:
        server.delete(f"/v1/sessions/{sid}")


def test_a_fork_makes_no_one_hold_what_a_mapping_never_touched(server: TestClient) -> None:
    # 64 MiB of shared memory, two pages of it written: the session holds two pages of it, and so does each copy
    # (it was once read whole, which made the session and every copy hold all of it).
    sid = _new(server)
    ids: list[str] = []
    rss = "int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS:')).split()[1])"
    try:
        made = "import mmap\nbig = mmap.mmap(-1, 64 << 20, mmap.MAP_SHARED)\nbig[0] = big[5 << 20] = 7\n" + rss
        before = int(_cell(server, sid, made)["display"])
        ids = _fork(server, sid, 2)
        assert int(_cell(server, sid, rss)["display"]) - before < 8 << 10, "the session holds what it never touched"
        for copy in ids:
            assert int(_cell(server, copy, rss)["display"]) < before + (8 << 10)
            assert _cell(server, copy, "(big[0], big[5 << 20], big[1], big[63 << 20])")["display"] == "(7, 7, 0, 0)"
            _cell(server, copy, "big[1] = 1")  # its own: no one else's
        assert _cell(server, sid, "big[1]")["display"] == "0"
    finally:
        for s in (sid, *ids):
            server.delete(f"/v1/sessions/{s}")


def test_a_copys_processes_end_with_it_however_it_ends(server: TestClient) -> None:
    # Its kernel killed (by itself, or by a delete while a cell runs): what it started was its box's orphans,
    # out of its tree, and ran on after it, as its host user, given to the next copy.
    before = _session_uids()
    sid = _new(server)
    _cell(server, sid, "import os, signal, subprocess, time")
    one, two = _fork(server, sid, 2)
    child = "subprocess.Popen(['sleep', '30'])\n"
    out = _cell(server, one, child + "os.kill(os.getpid(), signal.SIGKILL)")
    assert out["status"] == "killed" and not out["alive"], out
    import threading

    body = {"code": child + "time.sleep(5)", "timeout_s": 10}
    slow = threading.Thread(target=server.post, args=(f"/v1/sessions/{two}/execute",), kwargs={"json": body})
    slow.start()
    time.sleep(1)
    server.delete(f"/v1/sessions/{two}")
    slow.join()
    time.sleep(1.5)  # the box reaps what they left
    family = _session_uids() - before
    assert len(family) == 1, family  # the session's own user alone: nothing of the copies, not even a zombie
    assert len(HostState.program_processes_of(family.pop())) == 1  # and of it, its kernel alone
    server.delete(f"/v1/sessions/{sid}")


def test_a_copys_cpu_time_over_its_life_holds_within_a_cell(server: TestClient) -> None:
    sid = _new(server)
    _cell(server, sid, "import subprocess, sys")
    (one,) = _fork(server, sid, 1)
    spread = (
        "code = 'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 1.4: pass'\n"
        "ps = [subprocess.Popen([sys.executable, '-c', code]) for _ in range(3)]\n[p.wait() for p in ps]"
    )
    out = _cell(server, one, spread, timeout_s=20)
    assert out["status"] == "time_limit" and not out["alive"] and out["cpu_time"] < 3.3, out  # 2.5 s, and a look
    server.delete(f"/v1/sessions/{sid}")


# A cell that answers for itself (its answer is in its reach: the interpreter is the program's process) and runs on,
# making no system call: the agent takes it for one waiting for its next cell.
_ANSWERED_AND_RUNNING = """
import sys
f = sys._getframe()
while f is not None and not (f.f_code.co_name == 'serve' and 'request' in f.f_locals):
    f = f.f_back
L, G = f.f_locals, f.f_globals
request = L['request']
answer = G['within']([], [], int(request['answer_bytes']))
L['answers'].sendall(G['message']({**request, 'source': None, 'stdin': None, **answer}))
x = 0
while True:
    x += 1
"""


def test_a_fork_of_an_interpreter_that_never_comes_to_its_wait_is_refused(server: TestClient) -> None:
    # The agent steps it to its wait for a while (half a second), not for ever: it was stepped, running in no slot
    # and for no cell, until its session's CPU time ran out (2.5 s here, 600 s by default), and the fork's request
    # waited for it.
    sid = _new(server)
    try:
        _cell(server, sid, _ANSWERED_AND_RUNNING)
        started = time.monotonic()
        r = server.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
        assert r.status_code == 409 and "wait" in r.json()["detail"], r.text
        assert time.monotonic() - started < 2
        # Its next cell is its loop's to finish: past its time, the session ends as for any such cell.
        r = server.post(f"/v1/sessions/{sid}/execute", json={"code": "1", "timeout_s": 1})
        assert r.status_code in (200, 410), r.text
    finally:
        server.delete(f"/v1/sessions/{sid}")


# A cell that swaps the interpreter's read for code of its own: held for a fork, the interpreter runs that code
# under its tracer, and it waits in a vfork (posix_spawn) for a child that blocks opening a fifo before its exec.
# No interrupt stops a process waiting there: the agent waited for its stop for good, and the fork held a slot of
# the pool that every session's cells need, and its session's lock, which kept the session from ever expiring.
_WAITS_IN_A_VFORK = """
import os, time
_real = os.read
FIFO = os.path.join(os.getcwd(), "fifo")
os.mkfifo(FIFO)
def read(fd, n, _real=_real):
    if fd == 3:
        while True:  # stopped between cells (SIGSTOP), until the agent holds it for a fork and steps it
            began = time.monotonic()
            time.sleep(0.02)
            if time.monotonic() - began > 0.5:
                break
        os.read = _real
        os.posix_spawn("/bin/true", ["true"], {}, file_actions=[(os.POSIX_SPAWN_OPEN, 5, FIFO, os.O_RDONLY, 0)])
    return _real(fd, n)
os.read = read
"""


def test_a_fork_of_an_interpreter_that_cannot_be_stopped_ends_it_and_holds_nothing(server: TestClient) -> None:
    sid, other = _new(server), _new(server)
    try:
        _cell(server, sid, _WAITS_IN_A_VFORK)
        time.sleep(2.0)  # idle: stopped, as an idle session is
        started = time.monotonic()
        r = server.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
        # Answered in bounded time: ended where it waits in the vfork, and the answer says the session is over
        # (gone, its fork having run); where the pause between cells had not yet stopped it (a container's, at
        # times), stepped to no wait for half a second, and refused so (the session goes on).
        if r.status_code == 410:
            assert "would not stop" in r.json()["detail"] and r.json()["ran"] is True, r.text
        else:
            assert r.status_code == 409 and "did not come to its wait" in r.json()["detail"], r.text
        assert time.monotonic() - started < 5
        # Its next cell finds it ended, or ends it (it waits in the vfork then): no one else waits.
        r = server.post(f"/v1/sessions/{sid}/execute", json={"code": "1", "timeout_s": 1})
        assert r.status_code == 410 or not r.json()["alive"], r.text
        assert _cell(server, other, "6 * 7")["display"] == "42"
    finally:
        for s in (sid, other):
            server.delete(f"/v1/sessions/{s}")
