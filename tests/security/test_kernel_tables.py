"""What the kernel keeps for the whole machine, no run takes, nor reads as another run left it.

A memory cgroup bounds what a run's processes hold, but some of the kernel's tables have one size for the whole
machine whoever fills them: AIO contexts (``fs.aio-max-nr``). And some of its files show the whole machine to
every pid namespace: ``/proc/locks`` lists every open file description lock (those belong to no process), and
``/proc/sys/fs/aio-nr`` and ``file-nr`` count what every process of the machine holds. One run that changes
what they show and another that reads it have a channel between them, whatever worker each runs on.
"""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from .suite import at_once

# Tries each way to hold an entry of a machine-wide table, and says what the kernel answered.
TAKE = """
import ctypes, errno, fcntl, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
IO_SETUP = {"x86_64": 206, "aarch64": 0}[os.uname().machine]
F_OFD_SETLK = 37
def take():
    answers = {}
    ctx = ctypes.c_ulong(0)
    made = libc.syscall(IO_SETUP, 64, ctypes.byref(ctx)) == 0
    answers["aio"] = "held" if made else errno.errorcode[ctypes.get_errno()]
    fd = os.open("locked", os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b"x" * 4096)
    # A lock on a range no other lock has: 123456789 to 123456795 in /proc/locks.
    record = struct.pack("hhqqi", fcntl.F_WRLCK, 0, 123456789, 7, 0)
    try:
        fcntl.fcntl(fd, F_OFD_SETLK, record)
        answers["ofd"] = "held"
    except OSError as e:
        answers["ofd"] = errno.errorcode[e.errno]
    fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 123456789 + 100, 7, 0))
    fcntl.flock(os.open("locked", os.O_RDONLY), fcntl.LOCK_SH)
    return answers
"""
# Reads what the machine-wide files show, a few times over while the run beside it holds its entries.
SEE = """
import json, time
def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as e:
        return "unreadable"
seen = {"locks": [], "aio-nr": set(), "file-nr": set()}
for _ in range(15):
    locks = read("/proc/locks")
    seen["locks"] += [line for line in locks.splitlines() if "123456" in line]
    seen["aio-nr"].add(read("/proc/sys/fs/aio-nr"))
    seen["file-nr"].add(read("/proc/sys/fs/file-nr"))
    time.sleep(0.1)
print(json.dumps({k: sorted(v) for k, v in seen.items()}))
"""


def test_a_run_takes_no_aio_context_nor_open_file_description_lock(hostile: TestClient) -> None:
    # Refused as on a kernel without them: AIO absent (ENOSYS), these locks unknown (EINVAL). Other locks work.
    code = TAKE + "import json\nprint(json.dumps(take()))\n"
    r = hostile.post("/v1/execute", json={"language": "python", "code": code, "cache": False})
    assert r.status_code == 200 and r.json()["verdict"] == "AC", r.text
    assert json.loads(r.json()["run"]["stdout"]) == {"aio": "ENOSYS", "ofd": "EINVAL"}, r.text


def test_a_run_reads_nothing_another_run_holds_in_machine_wide_tables(pair: TestClient) -> None:
    holder = TAKE + "import time\nprint(take(), flush=True)\ntime.sleep(2)\n"
    first = {"language": "python", "code": holder, "limits": {"timeout_s": 3}, "cache": False}
    second = {"language": "python", "code": SEE, "limits": {"timeout_s": 3}, "cache": False}
    held, seen = at_once(pair, first, second)
    assert held["verdict"] == "AC", held
    assert seen["verdict"] == "AC", seen
    shown = json.loads(seen["run"]["stdout"])
    # The machine-wide files read empty on every backend: no count of the machine's, and no lock of the host's.
    assert shown == {"locks": [], "aio-nr": [""], "file-nr": [""]}, shown


def test_a_run_reads_neither_the_kernels_command_line_nor_its_symbols(hostile: TestClient) -> None:
    """The host's kernel command line (a deployment may pass secrets there) and its symbol table."""
    code = (
        "import json, os\nshown = {}\nfor p in ('/proc/cmdline', '/proc/kallsyms'):\n"
        "    try:\n        with open(p) as f:\n            shown[p] = f.read(64)\n"
        "    except OSError as e:\n        shown[p] = 'unreadable'\nprint(json.dumps(shown))\n"
    )
    r = hostile.post("/v1/execute", json={"language": "python", "code": code, "cache": False})
    assert r.status_code == 200 and r.json()["verdict"] == "AC", r.text
    shown = json.loads(r.json()["run"]["stdout"])
    assert all(text in ("", "unreadable") for text in shown.values()), shown
