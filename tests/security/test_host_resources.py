"""Resources that the kernel counts per user of the host, not per run, are no run's to take.

Every worker's namespace belongs to the server's user, and programs map to one host uid: inotify and
fanotify instances, keys, POSIX message queue bytes are charged there. A run that took them all would leave
none to the next run (on any worker) or to the host. Programs never get them: each call is refused, the same
way on every run.
"""

from __future__ import annotations

import ast
import ctypes
import errno
import json
import mmap
import os
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

# Each tries to make one such thing; ``try_it`` prints the errno name it got, or "made".
_TRY = """
import ctypes, errno, json, os, resource, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {"x86_64": {"add_key": 248, "keyctl": 250, "request_key": 249, "inotify_init": 253},
      "aarch64": {"add_key": 217, "keyctl": 219, "request_key": 218, "inotify_init": -1}}[os.uname().machine]
def outcome(result):
    return "made" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
"""
CALLS = {
    "inotify_init1": "libc.inotify_init1(0)",
    "inotify_init": "libc.syscall(NR['inotify_init']) if NR['inotify_init'] > 0 else libc.inotify_init1(0)",
    "fanotify_init": "libc.fanotify_init(0x200, 0)",  # FAN_CLASS_NOTIF | FAN_REPORT_FID: unprivileged
    "add_key": "libc.syscall(NR['add_key'], b'user', b'codegym', b'x', 1, -2)",  # to the process keyring
    "keyctl": "libc.syscall(NR['keyctl'], 0, -2, 1)",  # KEYCTL_GET_KEYRING_ID, created if missing
    "request_key": "libc.syscall(NR['request_key'], b'user', b'codegym', None, -2)",
    "mq_open": "libc.mq_open(b'/codegym', os.O_CREAT | os.O_RDWR, 0o600, None)",
}
# What each call gets: ENOSYS where the kernel is made to look as if built without it, else EPERM.
REFUSED = {"inotify_init1": "ENOSYS", "inotify_init": "ENOSYS", "fanotify_init": "ENOSYS"}


def _program(name: str) -> str:
    return _TRY + f"print(outcome({CALLS[name]}))\nprint(resource.getrlimit(resource.RLIMIT_MSGQUEUE))\n"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_per_user_kernel_objects_are_refused_to_every_run(hostile: TestClient, name: str) -> None:
    expected = f"{REFUSED.get(name, 'EPERM')}\n(0, 0)\n"
    body = {"language": "python", "code": _program(name), "cache": False}
    r = hostile.post("/v1/execute", json=body)
    assert r.status_code == 200 and r.json()["run"]["stdout"] == expected, r.text
    # The same in a series' tests, whose processes are forked another way.
    tests = [{"stdin": str(i), "expected_stdout": expected} for i in range(2)]
    r = hostile.post("/v1/evaluate", json={"language": "python", "programs": [_program(name)], "tests": tests})
    assert r.status_code == 200, r.text
    assert [t["verdict"] for t in r.json()["results"][0]["tests"]] == ["AC", "AC"], r.text


_HOARD = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
made = 0
for _ in range(8):
    if os.fork() == 0:
        for _ in range(60):
            if libc.inotify_init1(0) >= 0:
                made += 1
        print(made, flush=True)
        time.sleep(1.5)
        os._exit(0)
time.sleep(1.2)
"""


def test_a_run_that_hoards_inotify_instances_leaves_the_host_its_own(hostile: TestClient) -> None:
    # 480 instances tried while the run lasts (the host's default is 128 for the server's user); meanwhile
    # the host makes its own.
    answer: dict[str, Any] = {}

    def hoard() -> None:
        body = {"language": "python", "code": _HOARD, "limits": {"timeout_s": 3}, "cache": False}
        answer.update(hostile.post("/v1/execute", json=body).json())

    thread = threading.Thread(target=hoard)
    thread.start()
    threading.Event().wait(0.8)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    got = errno.errorcode.get(ctypes.get_errno(), "") if fd < 0 else "made"
    if fd >= 0:
        os.close(fd)
    thread.join()
    assert answer["verdict"] == "AC", answer
    assert json.loads("[" + ",".join(answer["run"]["stdout"].split()) + "]") == [0] * 8, answer
    assert got == "made"


# Locks a page of memory, then asks the kernel to drop the host's page cache of a file every run reads (PATH),
# then flushes the host's file systems 2,000 times and a host file 2,000 times: what each got.
_REACH = """
import ctypes, errno, mmap, os, resource
libc = ctypes.CDLL(None, use_errno=True)
buf = mmap.mmap(-1, 4096)
locked = libc.mlock(ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(buf))), ctypes.c_size_t(4096))
got = "made" if locked == 0 else errno.errorcode[ctypes.get_errno()]
print("mlock", got, resource.getrlimit(resource.RLIMIT_MEMLOCK))
fd = os.open(PATH, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
print("fadvise answered")
for _ in range(2000):
    os.sync()
for name in ("/etc/hosts", PATH):  # docker and podman bind the host's /etc/hosts into each container
    if os.path.exists(name):
        held = os.open(name, os.O_RDONLY)
        for _ in range(1000):
            os.fsync(held)
            os.fdatasync(held)
print("synced")
"""


def _resident_pages(path: str) -> int:
    """How many of ``path``'s pages are in the host's page cache (mincore, as the host's root sees it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    size = os.path.getsize(path)
    pages = (size + 4095) // 4096
    vec = (ctypes.c_ubyte * pages)()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mapped:  # never written
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
        assert libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(size), vec) == 0, ctypes.get_errno()
    return sum(1 for v in vec if v & 1)


def _disk_flushes() -> int:
    """Flush requests the host's block devices completed (the 16th field of each /proc/diskstats line)."""
    total = 0
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 20:
                total += int(fields[18])
    return total


def test_a_run_locks_no_memory_and_reaches_neither_the_hosts_cache_nor_its_disks(
    hostile: TestClient, backend: str
) -> None:
    """Locked pages of a file every run reads stayed in the memory of the worker that read it first (its honest
    run: MLE); fadvise dropped the host's cache of any file a run can read; sync flushed the host's disks
    thousands of times a second. A run gets no locked memory, and the other two do nothing."""
    # A file of the runtime's that a run reads; on the local backend the host's own (the worker sees /usr).
    where = {"language": "python", "code": "import os; print(os.__file__)", "cache": False}
    path = hostile.post("/v1/execute", json=where).json()["run"]["stdout"].strip()
    on_host = backend == "local" and os.path.isfile(path)
    if on_host:
        with open(path, "rb") as f:
            f.read()
    cached = _resident_pages(path) if on_host else 0
    flushes = _disk_flushes()
    code = _REACH.replace("PATH", repr(path))
    answer = hostile.post("/v1/execute", json={**where, "code": code, "limits": {"timeout_s": 10}}).json()
    assert answer["verdict"] == "AC", answer
    lines = answer["run"]["stdout"].splitlines()
    assert lines[0].startswith("mlock E") and lines[0].endswith("(0, 0)"), lines
    assert lines[1:] == ["fadvise answered", "synced"], lines
    assert _disk_flushes() - flushes < 500, "the run's syncs reached the host's disks"
    if on_host:
        assert _resident_pages(path) >= cached > 0, "the run dropped the host's page cache of a file"


# What a run gets when it tries to hold a file's page cache in a pipe or a socket (splice, sendfile, vmsplice,
# tee), or to read a file past the cache (O_DIRECT, at open or later); and a copy of a file, which falls back.
_PINS = """
import ctypes, errno, fcntl, os, shutil, socket
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": {"tee": 276, "vmsplice": 278, "openat2": 437}, "aarch64": {"tee": 77, "vmsplice": 75, "openat2": 437}}
nr = NR[os.uname().machine]
def name(call):
    try:
        call()
        return "made"
    except OSError as exc:
        return errno.errorcode[exc.errno]
def raw(*args):
    if libc.syscall(*args) < 0:
        raise OSError(ctypes.get_errno(), "")
src = os.open(os.__file__, os.O_RDONLY)
r, w = os.pipe()
a, b = socket.socketpair()
direct = getattr(os, "O_DIRECT", 0o40000)
got = {
    "splice": name(lambda: os.splice(src, w, 1, offset_src=0)),
    "sendfile-pipe": name(lambda: os.sendfile(w, src, 0, 1)),
    "sendfile-socket": name(lambda: os.sendfile(a.fileno(), src, 0, 1)),
    "tee": name(lambda: raw(nr["tee"], r, w, 1, 0)),
    "vmsplice": name(lambda: raw(nr["vmsplice"], w, None, 0, 0)),
    "openat2": name(lambda: raw(nr["openat2"], -100, b"/etc/hosts", None, 0)),
    "o-direct": name(lambda: os.open(os.__file__, os.O_RDONLY | direct)),
    "o-direct-later": name(lambda: fcntl.fcntl(src, fcntl.F_SETFL, direct)),
}
shutil.copyfile(os.__file__, "copy.py")
got["copy"] = "made" if open("copy.py", "rb").read() == open(os.__file__, "rb").read() else "differs"
print(sorted(got.items()))
"""


def test_a_run_holds_no_files_page_cache_and_reads_none_past_it(hostile: TestClient) -> None:
    """One byte spliced or sent of each folio of a file every run reads pinned its whole cache, charged to the
    worker that read it first (its honest run: MLE), for the run's life or a session's; O_DIRECT reads took the
    host's disk at no CPU. They are refused (EINVAL, on which libuv and the JDK copy it themselves: not ENOSYS);
    a copy of a file still works."""
    body = {"language": "python", "code": _PINS, "limits": {"timeout_s": 10}, "cache": False}
    answer = hostile.post("/v1/execute", json=body).json()
    assert answer["verdict"] == "AC", answer
    got = dict(ast.literal_eval(answer["run"]["stdout"]))  # a list of pairs the run printed
    refused = ("splice", "sendfile-pipe", "sendfile-socket", "tee", "vmsplice", "o-direct", "o-direct-later")
    assert {k: got[k] for k in refused} == dict.fromkeys(refused, "EINVAL"), got  # runtimes copy it themselves
    assert got["openat2"] == "ENOSYS" and got["copy"] == "made", got
