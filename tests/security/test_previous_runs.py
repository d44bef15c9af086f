"""Nothing of an earlier request reaches a later program through the memory it was forked with.

A Python program runs in a process forked from the box (or from a process the box forked ahead of time), and
may look at all it inherited: the frames above its own (``sys._getframe().f_back``...), every object the
collector knows (``gc.get_objects()``, after ``gc.unfreeze()``), and the raw bytes of its heap
(``ctypes.string_at``). None of it may hold another run's input, output or report: here, one run's marks
(in its stdin, stdout and stderr, and its exit code 77), looked for by the next run, after the box was
replaced, as it is when a run breaks it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import signal
import threading
from typing import Any

import pytest
from fastapi.testclient import TestClient

# The marks are known here by their digests only: the seeker's own memory must not hold them.
_LOOK = """
import ctypes, gc, hashlib, re, sys
DIGESTS = {digests!r}
PATTERN = re.compile(rb"codegym-(?:stdin|stdout|stderr)-[0-9a-f]{{12}}")
def marks_in(data):
    if isinstance(data, str):
        data = data.encode(errors="replace")
    return {{m.split(b"-")[1].decode() for m in PATTERN.findall(data) if hashlib.sha256(m).hexdigest() in DIGESTS}}
def report_like(d):
    return isinstance(d, dict) and d.get("exit_code") == 77
found = set()
"""
SEEKERS = {
    "frames": """
f = sys._getframe().f_back
while f is not None:
    for value in f.f_locals.values():
        inside = vars(value) if hasattr(value, "__dict__") and not isinstance(value, type) else {}
        if report_like(value) or marks_in(repr(value)) or marks_in(repr(inside)):
            found.add(f.f_code.co_name)
    f = f.f_back
""",
    "objects": """
gc.unfreeze()
for obj in gc.get_objects():
    if report_like(obj):
        found.add("report")
    elif isinstance(obj, (str, bytes, bytearray, dict, list)):
        found.update(marks_in(repr(obj)))
""",
    "heap": """
with open("/proc/self/maps") as maps:
    for line in maps:
        parts = line.split()
        if parts[1].startswith("rw") and (len(parts) == 5 or parts[5] == "[heap]"):
            low, high = (int(x, 16) for x in parts[0].split("-"))
            data = ctypes.string_at(low, high - low)
            found.update(marks_in(data))
""",
}


def _boxes_of_this_process() -> list[int]:
    """The boxes of the local backend's workers: processes under this one that are the init of a pid namespace."""
    boxes = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except (OSError, ValueError):
            continue
        nspid = fields.get("NSpid", "").split()
        if len(nspid) > 1 and nspid[-1] == "1" and int(fields.get("Uid", "0").split()[0]) == os.geteuid():
            boxes.append(int(name))
    return boxes


def _execute(client: TestClient, code: str, stdin: str = "", **limits: Any) -> dict[str, Any]:
    body = {"language": "python", "code": code, "stdin": stdin, "cache": False, "limits": limits}
    r = client.post("/v1/execute", json=body)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def _in_turn(client: TestClient, code: str, stdin: str, meanwhile: Any) -> dict[str, Any]:
    """Run ``code``, and call ``meanwhile`` half a second into the run."""
    answer: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: answer.update(_execute(client, code, stdin, timeout_s=1)))
    thread.start()
    threading.Event().wait(0.5)
    meanwhile()
    thread.join()
    return answer


def _signal_boxes(sig: int) -> None:
    for pid in _boxes_of_this_process():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


@pytest.mark.parametrize("how", sorted(SEEKERS))
def test_a_program_finds_nothing_of_the_run_before_it(hostile: TestClient, backend: str, how: str) -> None:
    marks = [f"codegym-{where}-{secrets.token_hex(6)}" for where in ("stdin", "stdout", "stderr")]
    marker = "import sys, time\nsys.stdin.read()\nprint({!r}, flush=True)\nprint({!r}, file=sys.stderr, flush=True)\n"
    marker = marker.format(marks[1], marks[2])
    out = _execute(hostile, marker + "raise SystemExit(77)\n", stdin=marks[0])
    assert out["run"]["exit_code"] == 77, out
    digests = [hashlib.sha256(m.encode()).hexdigest() for m in marks]
    seeker = _LOOK.format(digests=digests) + SEEKERS[how] + "print(sorted(found))\n"
    assert _execute(hostile, seeker)["run"]["stdout"] == "[]\n"
    if backend == "local":
        # A box that does not answer when its run is to be stopped is replaced by its worker's agent, in the
        # middle of that run (whose output the agent holds): the new box, and every program forked from it,
        # must hold nothing of it. (A stopped box stands for one the kernel stalls.)
        out = _in_turn(hostile, marker + "time.sleep(30)\n", marks[0], lambda: _signal_boxes(signal.SIGSTOP))
        _signal_boxes(signal.SIGCONT)
        assert out["verdict"] == "TLE", out
    out = _execute(hostile, seeker + "# after\n")
    assert out["verdict"] == "AC" and out["run"]["stdout"] == "[]\n", out
