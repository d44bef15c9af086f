"""Resources that the kernel counts per user of the host, not per run, are no run's to take.

Every worker's namespace belongs to the server's user, and programs map to one host uid: inotify and
fanotify instances, keys, POSIX message queue bytes are charged there. A run that took them all would leave
none to the next run (on any worker) or to the host. Programs never get them: each call is refused, the same
way on every run.
"""

from __future__ import annotations

import ctypes
import errno
import json
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
