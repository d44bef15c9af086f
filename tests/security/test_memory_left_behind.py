"""What a run leaves behind is never charged to another run.

A run's files live on a tmpfs, and a tmpfs is memory, charged to the worker's memory cgroup, whose limit is the
next run's. Its files and what the kernel keeps for them (inodes, extended attributes) must be gone, or
left out of the next run's count, before the next run starts: else an honest program near its limit is MLE
after a run that left a lot, and its verdict is cached.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

# Just under what any one test may leave before its files are freed at once: a MiB of data less a little, and
# a thousand (empty) files, in the scratch directory and in /dev/shm.
LEAVER = """
import os
for where in (".", "/dev/shm"):
    with open(os.path.join(where, "data"), "wb") as f:
        f.write(b"x" * (1000 << 10))
    for i in range(1000):
        open(os.path.join(where, f"f{i}"), "wb").close()
def f(x):
    return x
"""
# Holds most of its limit, as an honest program may.
NEAR_LIMIT = "held = bytearray(100 << 20)\nheld[::4096] = b'x' * len(held[::4096])\ndef f(x):\n    return x\n"


def _batch(client: TestClient, groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    r = client.post("/v1/evaluate/batch", json={"requests": groups})
    assert r.status_code == 200, r.text
    return [resp["results"][0] for resp in r.json()["responses"]]


def test_files_a_run_left_count_against_no_later_run(hostile: TestClient) -> None:
    # The assert runner's series runs the programs of a batch (of the same limits) one after the other in one box:
    # each leaver leaves its files, then the honest program runs beside none of them. (30 leavers: fewer than
    # a box may keep in its graveyard, see isolation.Scratch, before it frees them all at once.)
    limits = {"memory_mb": 128, "timeout_s": 3}
    tests = [{"assert_code": "assert f(1) == 1"}]
    leavers = [
        {"language": "python", "programs": [f"{LEAVER}# {i}"], "tests": tests, "limits": limits} for i in range(30)
    ]
    honest = {"language": "python", "programs": [NEAR_LIMIT], "tests": tests, "limits": limits}
    results = _batch(hostile, [*leavers, honest])
    assert [r["verdict"] for r in results] == ["AC"] * 31, results


# Values a program's function returns that the tests hold: the checker's judge of those tests decodes them, and
# frees them after the run, where the C heap keeps most of them resident.
INFLATER = 'def f():\n    return ["x" * 7000000, "y" * 4000000]\n'
# Holds all of its address space but a few MiB (what the interpreter and the sandbox's own modules take of it
# differs between deployments and releases: a fixed size was over the limit on some).
NEAR_LIMIT_CALL = """
import time
def f():
    with open("/proc/self/status") as status:
        size = next(int(line.split()[1]) for line in status if line.startswith("VmSize:")) << 10
    held = bytes([1]) * ((100 << 20) - size - (3 << 20))
    time.sleep(0.3)
    return 0
"""


def test_what_a_program_left_in_the_checker_counts_against_no_later_run(hostile: TestClient) -> None:
    # The checker keeps the judges of the last few tests texts (other tasks' too, other clients'); each judge
    # held what the program sent it, and they all live in the worker's memory cgroup beside the next run. An
    # honest program near its limit, of another task, ran out of memory beside them (MLE, where alone it is AC).
    limits = {"memory_mb": 100, "timeout_s": 10}

    def group(program: str, k: int) -> dict[str, Any]:
        tests = f"def test_a():\n    r = f()\n    assert r == 0, len(r)\n# text {k}\n"
        return {"language": "python", "programs": [program], "tests": [{"assert_code": tests}], "limits": limits}

    inflaters = [group(INFLATER, k) for k in range(4)]
    results = _batch(hostile, [*inflaters, group(NEAR_LIMIT_CALL, 4), group(NEAR_LIMIT_CALL, 5)])
    assert [r["verdict"] for r in results] == ["WA"] * 4 + ["AC", "AC"], [r["verdict"] for r in results]
