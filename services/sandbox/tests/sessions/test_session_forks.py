"""A session's fork through the native API on a real server: exact copies (memory, files, random state),
each a session of its own that goes its own way, the session itself unchanged, and clear answers for what
cannot be forked, on the local, podman and docker backends (as root)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import settings_for


@contextlib.contextmanager
def _server(backend: str, **limits: int) -> Iterator[TestClient]:
    """A server on ``backend`` that starts no kernel ahead, with these sessions' settings."""
    settings = settings_for(backend)
    settings.sessions.warm = 0
    for name, value in limits.items():
        setattr(settings.sessions, name, value)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module")
def sessions(backend: str) -> Iterator[TestClient]:
    with _server(backend, memory_mb=128, max_sessions=8, max_fork=4) as c:
        yield c


def _new(client: TestClient, **body: Any) -> str:
    r = client.post("/v1/sessions", json={"language": "python", **body})
    assert r.status_code == 201, r.text
    session_id: str = r.json()["session_id"]
    return session_id


def _cell(client: TestClient, sid: str, code: str, **body: Any) -> dict[str, Any]:
    r = client.post(f"/v1/sessions/{sid}/execute", json={"code": code, **body})
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def _fork(client: TestClient, sid: str, n: int, **body: Any) -> list[str]:
    r = client.post(f"/v1/sessions/{sid}/fork", json={"n": n, **body})
    assert r.status_code == 200, r.text
    ids: list[str] = r.json()["session_ids"]
    assert len(ids) == n and sid not in ids and len(set(ids)) == n
    return ids


def _forks(backend: str) -> bool:
    return backend in ("local", "podman", "docker") and os.geteuid() == 0


@pytest.fixture
def forking(backend: str, sessions: TestClient) -> TestClient:
    if not _forks(backend):
        pytest.skip("forks are the local, podman and docker backends', as root")
    return sessions


STATE = (
    "import random, os\nrandom.seed(7)\nrandom.random()\nx = 41\nopen('made.txt', 'w').write('by a cell')\n"
    "os.makedirs('sub/deeper')\nopen('/dev/shm/shared.bin', 'wb').write(b'shm')\nhandle = open('data.txt')\n"
)
LOOK = (
    "(x, random.random(), open('data.txt').read(), open('made.txt').read(), open('sub/deeper/../../made.txt').read(),"
    " open('/dev/shm/shared.bin', 'rb').read(), os.getcwd(), os.getuid())"
)


REACH = """
def reached():
    hits = []
    for p in range(1, 4096):
        if p == os.getpid():
            continue
        try:
            os.kill(p, 0)
        except OSError:
            continue
        try:  # a zombie (the session's kernel before the fork, of its user) answers, and is nothing
            with open(f'/proc/{p}/stat') as f:
                if f.read().rsplit(')', 1)[1].split()[0] == 'Z':
                    continue
        except FileNotFoundError:  # of another user namespace's: the kernel before the fork, a zombie
            continue
        hits.append(p)
    return hits
reached()
"""


def test_copies_hold_the_sessions_memory_files_and_random_state(forking: TestClient) -> None:
    sid = _new(forking, files={"data.txt": "seven"})
    ids: list[str] = []
    try:
        assert _cell(forking, sid, STATE)["error"] is None
        uid = _cell(forking, sid, "os.getuid()")["display"]  # the programs' uid: each copy's its own, as it was
        ids = _fork(forking, sid, 3)
        expected = _cell(forking, sid, LOOK)["display"]
        assert expected.startswith("(41, 0."), expected
        assert expected.endswith(f"'seven', 'by a cell', 'by a cell', b'shm', '/tmp/box', {uid})"), expected
        for copy in ids:
            assert _cell(forking, copy, LOOK)["display"] == expected  # every copy draws what the session draws
            info = forking.get(f"/v1/sessions/{copy}").json()
            assert info["cells"] == 3 and info["memory_mb"] == 128, info
        # A copy's descriptors are not the session's (it shares nothing with it): reading one is an error. The
        # session keeps its own.
        out = _cell(forking, ids[0], "handle.read()")
        assert out["error"]["type"] in ("OSError", "ValueError"), out
        assert _cell(forking, sid, "handle.read()")["display"] == "'seven'"
    finally:
        for s in (sid, *ids):
            forking.delete(f"/v1/sessions/{s}")


def test_copies_get_their_own_streams_whatever_the_session_closed(forking: TestClient) -> None:
    # A kernel that closed its standard streams: a copy's new channels land where they were, and are moved past
    # them before they are put in place. Its print, input and next cells work as a new session's would.
    sid = _new(forking)
    ids: list[str] = []
    try:
        assert _cell(forking, sid, "import os, sys\nos.close(0)\nos.close(2)\nx = 5")["error"] is None
        ids = _fork(forking, sid, 2)
        for copy in ids:
            out = _cell(forking, copy, "print('out', x)\nprint('err', file=sys.stderr)\ninput()", stdin="typed\n")
            assert out["stdout"] == "out 5\n" and "err" in out["stderr"], out
            assert out["display"] == "'typed'" and out["error"] is None, out
            assert _cell(forking, copy, "x + 1")["display"] == "6"
    finally:
        for s in (sid, *ids):
            forking.delete(f"/v1/sessions/{s}")


def test_a_copys_files_are_the_sessions_holes_links_and_times_included(backend: str, forking: TestClient) -> None:
    # A sparse file costs a copy what it costs the session (a dense copy once held its holes as memory); two names
    # of one file stay one file; a directory keeps its times (once set again by the entries copied into it).
    sid = _new(forking)
    ids: list[str] = []
    files = (
        "import os\nwith open('sparse', 'wb') as f:\n    f.truncate(48 << 20)\n    f.write(b'head')\n"
        "os.makedirs('d')\nopen('d/one', 'w').write('1')\nos.link('d/one', 'two')\nos.utime('d', (1e9, 1e9))\n"
        "os.makedirs('order')\nfor name in 'ybqam':\n    open(f'order/{name}', 'w').close()\n"
    )
    look = (
        "(os.stat('sparse').st_size, os.stat('sparse').st_blocks < 64, open('sparse', 'rb').read(4),"
        " os.stat('two').st_nlink, int(os.stat('d').st_mtime), oct(os.stat('/tmp/box').st_mode & 0o7777),"
        " int(os.stat('/tmp/box').st_mtime), ''.join(os.listdir('order')))"
    )
    try:
        assert _cell(forking, sid, files)["error"] is None
        expected = _cell(forking, sid, look)["display"]
        assert expected.startswith("(50331648, True, b'head', 2, 1000000000, '0o") and expected.endswith(", 'maqby')")
        # The scratch directory is the supervisors' on every backend, mode 1777: no program changes its mode or times.
        assert "'0o1777'" in expected, expected
        ids = _fork(forking, sid, 2)
        # The scratch directory's own mode and times too, and the order a directory lists its entries in.
        for member in (sid, *ids):
            assert _cell(forking, member, look)["display"] == expected
        _cell(forking, ids[0], "open('two', 'w').write('changed')")
        assert _cell(forking, ids[0], "open('d/one').read()")["display"] == "'changed'"
        assert _cell(forking, ids[1], "open('d/one').read()")["display"] == "'1'"
    finally:
        for s in (sid, *ids):
            forking.delete(f"/v1/sessions/{s}")


MAPPED = (
    "import mmap, os\nf = open('data.bin', 'w+b')\nf.write(b'a' * 8192)\nf.flush()\n"
    "shared = mmap.mmap(f.fileno(), 8192)\ntwin = mmap.mmap(f.fileno(), 8192)\n"
    "private = mmap.mmap(f.fileno(), 8192, mmap.MAP_PRIVATE)\nprivate[0:1] = b'P'\nshared[4096:4097] = b'S'\n"
    "g = open('/dev/shm/m', 'w+b')\ng.write(b'z' * 4096)\ng.flush()\nshm = mmap.mmap(g.fileno(), 4096)\n"
    "h = open('short.bin', 'w+b')\nh.write(b'q' * 8192)\nh.flush()\ntail = mmap.mmap(h.fileno(), 8192)\n"
    "h.truncate(100)\n"
)


def test_a_copys_mappings_of_the_sessions_files_are_of_its_own_files(forking: TestClient) -> None:
    # A shared mapping of a file of the session's writes the copy's own file, two of one file share, a private one
    # keeps what it wrote and follows its file elsewhere, and past the file's end is SIGBUS, as in the session
    # (a private copy of the bytes once did none of these); and no copy's write reaches another's file.
    sid = _new(forking)
    ids: list[str] = []
    write = (
        "shared[0:1] = b'%s'\nshm[0:1] = b'%s'\n(open('data.bin', 'rb').read(1), twin[0:1], private[0:1],"
        " private[4096:4097], open('/dev/shm/m', 'rb').read(1))"
    )
    try:
        assert _cell(forking, sid, MAPPED)["error"] is None
        ids = _fork(forking, sid, 2)
        for member, mark in ((ids[0], "1"), (ids[1], "2"), (sid, "0")):
            out = _cell(forking, member, write % (mark, mark))
            assert out["display"] == f"(b'{mark}', b'{mark}', b'P', b'S', b'{mark}')", out
        for member, mark in ((ids[0], "1"), (ids[1], "2"), (sid, "0")):  # each wrote only its own files
            look = "open('data.bin', 'rb').read(1), open('/dev/shm/m', 'rb').read(1)"
            assert _cell(forking, member, look)["display"] == f"(b'{mark}', b'{mark}')"
        out = _cell(forking, ids[1], "tail[5000]")
        assert not out["alive"], out
        assert _cell(forking, ids[0], "tail[50]")["display"] == str(ord("q"))
    finally:
        for s in (sid, *ids):
            forking.delete(f"/v1/sessions/{s}")


NAMED = (
    "import ctypes, mmap, os\nos.chdir('/tmp/box')\nmaps = {}\n"
    "for name in ('plain', 'new\\nline', 'back\\\\slash', '\\udcff-not-text', 'gone'):\n"
    "    with open(name, 'wb') as f:\n        f.write(b'a' * 4096)\n"
    "    fd = os.open(name, os.O_RDWR)\n    maps[name] = mmap.mmap(fd, 4096)\n    os.close(fd)\n"
    "os.link('gone', 'kept')\nos.unlink('gone')\nnames = {'gone': 'kept'}\n"
    "fd = os.open('plain', os.O_RDONLY)\nread_only = mmap.mmap(fd, 4096, prot=mmap.PROT_READ)\nos.close(fd)\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "os.makedirs(b'/tmp/box/\\xff')\nos.chdir(b'/tmp/box/\\xff')\n"
)
TOUCH = (
    "for name, m in maps.items():\n    m[0:1] = b'%s'\n"
    "[open(os.path.join('/tmp/box', names.get(n, n)), 'rb').read(1) for n in maps], os.getcwdb()"
)


def test_a_copy_maps_its_own_file_whatever_its_name_and_as_the_session_opened_it(forking: TestClient) -> None:
    # Names maps escapes or cannot write (a newline, a backslash, no text), and a file whose mapped name is gone
    # but which lives on under another: each copy's mapping is of its own file. The directory is kept, no text
    # either. A file opened for reading only and mapped shared stays unwritable in the copy (as in the session).
    sid = _new(forking)
    ids: list[str] = []
    protect = (
        "line = [x for x in open('/proc/self/maps', 'rb')\n"
        "        if x.rstrip().endswith(b' /tmp/box/plain') and b'r--s' in x]\n"
        "libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]\n"
        "(libc.mprotect(int(line[0].split(b'-')[0], 16), 4096, 3), ctypes.get_errno())"
    )
    try:
        assert _cell(forking, sid, NAMED)["error"] is None
        ids = _fork(forking, sid, 2)
        for member, mark in ((ids[0], "1"), (ids[1], "2"), (sid, "0")):
            out = _cell(forking, member, TOUCH % mark)
            assert out["display"] == f"([b'{mark}', b'{mark}', b'{mark}', b'{mark}', b'{mark}'], b'/tmp/box/\\xff')", (
                out
            )
        for member in (sid, *ids):  # read-only as the session opened it: EACCES
            out = _cell(forking, member, protect)
            assert out["display"] == "(-1, 13)", out
    finally:
        for s in (sid, *ids):
            forking.delete(f"/v1/sessions/{s}")


STALE = (
    "import mmap, os\nos.makedirs('/tmp/box/a')\nos.makedirs('/tmp/box/c')\n"
    "with open('/tmp/box/a/f', 'wb') as f:\n    f.write(b'a' * 4096)\n"
    "fd = os.open('/tmp/box/a/f', os.O_RDWR)\nm = mmap.mmap(fd, 4096)\nos.close(fd)\n"
    "os.link('/tmp/box/a/f', '/tmp/box/c/f')\nos.unlink('/tmp/box/a/f')\nos.rmdir('/tmp/box/a')\n"
    # maps now names '/tmp/box/a/f (deleted)': a link where its directory was, a fifo by that very name
    "os.symlink('/proc/1/root/tmp/box/c', '/tmp/box/a')\nos.mkfifo('/tmp/box/c/f (deleted)')\n"
    "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.mmap.restype = ctypes.c_void_p\n"
    "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
    "libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]\n"
    "def more(n):\n    fd = os.open('/tmp/box/c/f', os.O_RDWR)\n"
    "    got = [libc.mmap(None, 4096, 3, 1, fd, 0) for _ in range(n)]\n    os.close(fd)\n    return got\n"
    "many = more(200)\n"
)


def test_a_mapped_file_is_found_with_no_link_followed_and_no_name_trusted(forking: TestClient) -> None:
    # The name maps gives a file whose name is gone is not followed (a link a program put where its directory
    # was, a fifo it named as maps would): the file is found by its inode, and each copy maps its own. A file
    # mapped over and over is mapped again as often, up to a bound; more is refused, and the session goes on.
    sid = _new(forking)
    ids: list[str] = []
    try:
        assert _cell(forking, sid, STALE)["error"] is None
        ids = _fork(forking, sid, 2)
        for member, mark in ((ids[0], "1"), (ids[1], "2"), (sid, "0")):
            look = f"m[0:1] = b'{mark}'\nctypes.memmove(many[-1] + 1, b'{mark}', 1)\nopen('/tmp/box/c/f', 'rb').read(2)"
            assert _cell(forking, member, look)["display"] == f"b'{mark}{mark}'"
        assert _cell(forking, sid, "many += more(900)\nlen(many)")["display"] == "1100"
        r = forking.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
        assert r.status_code == 409 and "more than 1000 mappings" in r.text, r.text
        assert _cell(forking, sid, "[libc.munmap(at, 4096) for at in many[200:]]\nm[0:1]")["display"] == "b'0'"
    finally:
        for s in (sid, *ids):
            forking.delete(f"/v1/sessions/{s}")


def test_shared_memory_mapped_past_the_bound_is_refused_and_the_session_goes_on(forking: TestClient) -> None:
    # Anonymous shared mappings are made again in every copy, as a file's are, and counted with them: 60,000 of
    # them (a session may hold 65,530) had each copy's making take a quarter of a second of the agent's CPU.
    sid = _new(forking)
    ids: list[str] = []
    try:
        assert _cell(forking, sid, "import mmap\nkeep = [mmap.mmap(-1, 4096) for _ in range(1100)]")["error"] is None
        r = forking.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
        assert r.status_code == 409 and "more than 1000 mappings" in r.text, r.text
        assert _cell(forking, sid, "keep[0][0:1] = b'k'\ndel keep[10:]\nlen(keep)")["display"] == "10"
        ids = _fork(forking, sid, 2)
        assert [_cell(forking, s, "keep[0][0:1]")["display"] for s in (sid, *ids)] == ["b'k'"] * 3
    finally:
        for s in (sid, *ids):
            forking.delete(f"/v1/sessions/{s}")


def test_a_deleted_working_directory_is_refused_and_the_session_goes_on(forking: TestClient) -> None:
    # Its name (as the kernel gives it, with " (deleted)") is any directory a program makes by that name: no copy
    # may be put in it, and none can be in the deleted one.
    sid = _new(forking)
    gone = (
        "import os\nos.makedirs('/tmp/box/D')\nos.chdir('/tmp/box/D')\nos.rmdir('/tmp/box/D')\n"
        "os.makedirs('/tmp/box/D (deleted)')\nopen('/tmp/box/D (deleted)/f', 'w').write('X')\n"
    )
    try:
        assert _cell(forking, sid, gone)["error"] is None
        r = forking.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
        assert r.status_code == 409 and "working directory was deleted" in r.text, r.text
        assert _cell(forking, sid, "os.path.exists('f')")["display"] == "False"
        assert _cell(forking, sid, "os.chdir('/tmp/box/D (deleted)')\nos.getcwd()")["error"] is None
        ids = _fork(forking, sid, 1)
        assert _cell(forking, ids[0], "open('f').read()")["display"] == "'X'"
        forking.delete(f"/v1/sessions/{ids[0]}")
    finally:
        forking.delete(f"/v1/sessions/{sid}")


def test_memory_no_copy_could_have_as_the_session_has_it_is_refused(forking: TestClient) -> None:
    # Memory marked not to be carried into a fork (MADV_DONTFORK) would be missing in every copy (the session's
    # continuation too), and a private mapping of a file given the file's bytes where the session wrote its own;
    # guard pages (MADV_GUARD_INSTALL, Linux 6.13) would be readable memory. Refused, and the session goes on.
    sid = _new(forking)
    marked = (
        "import mmap\nf = open('p.bin', 'w+b')\nf.write(b'P' * 8192)\nf.flush()\n"
        "mp = mmap.mmap(f.fileno(), 8192, mmap.MAP_PRIVATE)\nmp[:5] = b'WRITE'\nmp.madvise(mmap.MADV_DONTFORK)\n"
    )
    guarded = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]\n"
        "sh = mmap.mmap(-1, 3 * 4096)\nsh[0] = sh[8192] = 1\n"
        "at = ctypes.addressof((ctypes.c_char * 1).from_buffer(sh))\n"
        "libc.madvise(at + 4096, 4096, 102)"
    )
    try:
        assert _cell(forking, sid, marked)["error"] is None
        r = forking.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
        assert r.status_code == 409 and "MADV_DONTFORK" in r.text, r.text
        assert _cell(forking, sid, "del mp\nbytes(open('p.bin', 'rb').read(5))")["display"] == "b'PPPPP'"
        installed = _cell(forking, sid, guarded)["display"] == "0"
        print("guard pages installed:", installed)
        r = forking.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
        if installed:
            assert r.status_code == 409 and "MADV_GUARD_INSTALL" in r.text, r.text
        else:  # a kernel without guard pages: nothing to refuse
            assert r.status_code == 200, r.text
            for member in r.json()["session_ids"]:
                forking.delete(f"/v1/sessions/{member}")
        assert _cell(forking, sid, "1 + 1")["display"] == "2"
    finally:
        forking.delete(f"/v1/sessions/{sid}")


def test_a_copy_goes_its_own_way_and_changes_nothing_of_the_session_or_its_siblings(forking: TestClient) -> None:
    sid = _new(forking)
    ids: list[str] = []
    try:
        _cell(forking, sid, "x = [1]\nopen('f.txt', 'w').write('session')\nimport os")
        ids = _fork(forking, sid, 2)
        _cell(forking, ids[0], "x.append(2)\nopen('f.txt', 'w').write('copy 0')\nopen('/dev/shm/z', 'w').write('0')")
        _cell(forking, ids[1], "del x\nos.remove('f.txt')")
        assert _cell(forking, sid, "x, open('f.txt').read(), os.path.exists('/dev/shm/z')")["display"] == (
            "([1], 'session', False)"
        )
        assert _cell(forking, ids[0], "x, open('f.txt').read()")["display"] == "([1, 2], 'copy 0')"
        out = _cell(forking, ids[1], "os.path.exists('f.txt'), os.path.exists('/dev/shm/z'), 'x' in dir()")
        assert out["display"] == "(False, False, False)", out
        # None can signal another's processes (its own user; the session's kernel before the fork, its user's,
        # is gone: a zombie at most).
        for s in (sid, *ids):
            out = _cell(forking, s, REACH)
            assert out["display"] == "[]", out
    finally:
        for s in (sid, *ids):
            forking.delete(f"/v1/sessions/{s}")


def test_reseed_gives_each_copy_random_state_of_its_own(forking: TestClient) -> None:
    sid = _new(forking)
    ids: list[str] = []
    try:
        _cell(forking, sid, "import random\nrandom.seed(1)")
        ids = _fork(forking, sid, 3, reseed=True)
        draws = {_cell(forking, s, "random.random()")["display"] for s in (sid, *ids)}
        assert len(draws) == 4, draws
        assert _cell(forking, sid, "random.seed(1); random.random()")["display"] in {
            _cell(forking, s, "random.seed(1); random.random()")["display"] for s in ids
        }
        # A copy forked before its first cell: the random state it was still to be given is given to each of its
        # members, not left as the state it was copied from.
        _cell(forking, sid, "random.seed(2)")
        (copy,) = _fork(forking, sid, 1, reseed=True)
        ids.append(copy)
        grand = _fork(forking, copy, 2)
        ids += grand
        draws = [_cell(forking, s, "random.random()")["display"] for s in (sid, copy, *grand)]
        assert len(set(draws)) == 4, draws
    finally:
        for s in (sid, *ids):
            forking.delete(f"/v1/sessions/{s}")


def test_a_copy_can_be_forked_and_every_member_ends_on_its_own(forking: TestClient) -> None:
    sid = _new(forking)
    first: list[str] = []
    second: list[str] = []
    try:
        _cell(forking, sid, "depth = 0")
        first = _fork(forking, sid, 1)
        _cell(forking, first[0], "depth += 1")
        second = _fork(forking, first[0], 2)
        for s in second:
            assert _cell(forking, s, "depth += 1; depth")["display"] == "2"
        assert _cell(forking, first[0], "depth")["display"] == "1"
        again = _fork(forking, sid, 1)  # the session forks again, after its first fork
        second += again
        assert _cell(forking, again[0], "depth")["display"] == "0"
        assert forking.delete(f"/v1/sessions/{sid}").status_code == 204  # the session ends: its copies live on
        assert forking.delete(f"/v1/sessions/{first[0]}").status_code == 204
        for s in second:
            assert _cell(forking, s, "depth")["display"] in ("2", "0")
    finally:
        for s in (sid, *first, *second):
            forking.delete(f"/v1/sessions/{s}")


def test_what_cannot_be_forked_is_told_and_the_session_goes_on(forking: TestClient) -> None:
    assert forking.post("/v1/sessions/nope/fork", json={"n": 1}).status_code == 404
    sid = _new(forking)
    try:
        _cell(forking, sid, "import threading, time, subprocess\nx = 41")
        for n in (0, -1, 5):  # max_fork is 4 here
            r = forking.post(f"/v1/sessions/{sid}/fork", json={"n": n})
            assert r.status_code == 422, r.text
        _cell(forking, sid, "t = threading.Thread(target=time.sleep, args=(1,), daemon=True); t.start()")
        r = forking.post(f"/v1/sessions/{sid}/fork", json={"n": 1})
        assert r.status_code == 409 and "thread" in r.json()["detail"], r.text
        assert _cell(forking, sid, "t.join(); x + 1")["display"] == "42"  # once it ended, the session forks
        other = _new(forking)
        _cell(forking, other, "import subprocess\np = subprocess.Popen(['sleep', '30'])")
        r = forking.post(f"/v1/sessions/{other}/fork", json={"n": 1})
        assert r.status_code == 409 and "process" in r.json()["detail"], r.text
        # A daemon a cell left (its parent gone: an orphan of the session's box) is a process beside it too.
        lone = _new(forking)
        _cell(forking, lone, "import subprocess\nsubprocess.run(['sh', '-c', 'sleep 30 > /dev/null 2>&1 &'])")
        r = forking.post(f"/v1/sessions/{lone}/fork", json={"n": 1})
        assert r.status_code == 409 and "process" in r.json()["detail"], r.text
        forking.delete(f"/v1/sessions/{lone}")
        # While a cell runs: 409, as a second cell would be.
        slow = threading.Thread(target=_cell, args=(forking, other, "time.sleep(1.5)"))
        slow.start()
        time.sleep(0.5)
        r = forking.post(f"/v1/sessions/{other}/fork", json={"n": 1})
        slow.join()
        assert r.status_code == 409, r.text
        forking.delete(f"/v1/sessions/{other}")
        assert forking.post(f"/v1/sessions/{other}/fork", json={"n": 1}).status_code == 410
        # Past the server's sessions (8 here): 429, and nothing is made.
        made = _fork(forking, sid, 4)
        r = forking.post(f"/v1/sessions/{sid}/fork", json={"n": 4})
        assert r.status_code == 429 and r.headers["retry-after"], r.text
        assert len(forking.get("/v1/sessions").json()["sessions"]) == 5
        assert _cell(forking, sid, "x + 2")["display"] == "43"
        for s in made:
            forking.delete(f"/v1/sessions/{s}")
    finally:
        forking.delete(f"/v1/sessions/{sid}")


def test_a_container_whose_proc_shows_every_user_forks_no_session(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent forks in a container only where its /proc shows each user's processes to that user alone (a copy
    would see its siblings' otherwise): a session's container whose /proc could not be remounted so (docker) or
    made without podman's ``proc-opts`` answers why, and its session goes on."""
    if backend not in ("docker", "podman") or not _forks(backend):
        pytest.skip("the agent's own check of a container's /proc (the local backend's box mounts its own)")
    if backend == "docker":
        # Its agent's remount of /proc refused, as a host's AppArmor profile that denies mount refuses it: the
        # container starts, its sessions work, and a fork says why it cannot be.
        monkeypatch.setattr("codegym_sandbox.backends.docker.PROC_CAPABILITIES", ())
    else:
        from codegym_sandbox.backends.podman import PodmanBackend

        argv = PodmanBackend.run_argv

        def shown(self: PodmanBackend, slot: int) -> list[str]:
            made = argv(self, slot)
            if "proc-opts=hidepid=invisible" not in made:
                return made  # a container of runs
            at = made.index("proc-opts=hidepid=invisible")
            return made[: at - 1] + made[at + 1 :]  # less the option and its flag

        monkeypatch.setattr(PodmanBackend, "run_argv", shown)
    with _server(backend, memory_mb=128, max_sessions=4) as client:
        sid = _new(client)
        _cell(client, sid, "x = 41")
        r = client.post(f"/v1/sessions/{sid}/fork", json={"n": 2})
        assert r.status_code == 409 and "hide each user's processes" in r.json()["detail"], r.text
        assert _cell(client, sid, "x + 1")["display"] == "42"
        assert len(client.get("/v1/sessions").json()["sessions"]) == 1


def test_forks_at_once_are_each_counted_against_the_caps_of_the_other(backend: str) -> None:
    """A fork's copies count against a client's cap from the check until they are sessions: two forks of one
    client's sessions at once each see the other's, and the later one is refused (429)."""
    if not _forks(backend):
        pytest.skip("forks are the local, podman and docker backends', as root")
    with _server(backend, memory_mb=64, max_sessions=12, max_sessions_per_client=4) as client:
        made = [_new(client), _new(client)]
        for sid in made:
            _cell(client, sid, "x = 1")
        start, answers = threading.Barrier(2), []

        def fork(sid: str) -> None:
            start.wait()
            answers.append(client.post(f"/v1/sessions/{sid}/fork", json={"n": 2}))

        threads = [threading.Thread(target=fork, args=(sid,)) for sid in made]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(r.status_code for r in answers) == [200, 429], [r.text for r in answers]
        assert len(client.get("/v1/sessions").json()["sessions"]) == 4
