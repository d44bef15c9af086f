"""Runs admitted by what they hold: many runs of a large limit that hold little run at once, and runs that grow
past the budget together stand paused and go on, never run again nor judged for it, never driving the machine out
of memory.

First the budget's leases on their own, then a real server on the local backend (where the kernel counts each
worker's memory in a cgroup of its own; ``reads_memory`` says so, and these tests need it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from codegym_sandbox.backends.base import Saturated
from codegym_sandbox.backends.memory import MemoryBudget
from codegym_sandbox.backends.memory_use import usage_file
from codegym_sandbox.config import Limits, Settings
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import LOOKUPS


def test_a_run_is_admitted_by_its_share_and_charged_what_it_holds() -> None:
    async def main() -> None:
        budget = MemoryBudget(1000)
        leases = [await budget.acquire(800, share_mb=64) for _ in range(15)]  # 15 x 800 MiB declared
        assert budget.held_mb == 15 * 64 and budget.overcommitted
        waiting = asyncio.create_task(budget.acquire(800, share_mb=64))
        await asyncio.sleep(0.01)
        assert budget.waiting == 1  # 15 x 64 + 64 > 1000
        budget.update(leases[0], 10)  # holds less than its share: still charged the share
        assert budget.held_mb == 15 * 64 and budget.over() == []
        budget.update(leases[1], 300)  # grew past its share: charged what it holds; the waiting run waits on
        assert budget.held_mb == 14 * 64 + 300 and budget.waiting == 1
        budget.release(leases.pop())
        budget.release(leases.pop())
        budget.release(leases.pop())
        budget.release(leases.pop())
        budget.release(leases.pop())
        await asyncio.wait_for(waiting, 1)  # 10 x 64 + 300 = 940: one more share fits

    asyncio.run(main())


def test_runs_that_grew_stand_paused_and_go_on_oldest_first_admitted_by_their_limit() -> None:
    async def main() -> None:
        budget = MemoryBudget(990)
        old = await budget.acquire(500, share_mb=64)
        full = await budget.acquire(300)  # admitted by its whole limit: it never stands paused
        middle = await budget.acquire(500, share_mb=64)
        young = await budget.acquire(500, share_mb=64)
        for lease in (old, middle):
            budget.update(lease, 400)
        budget.update(full, 320)  # a little over its limit (its box)
        budget.update(young, 20)
        assert budget.held_mb == 400 + 320 + 400 + 64
        assert budget.over() == [old, middle] and old.paused and middle.paused  # those that grew, not the others
        assert budget.over() == [] and budget.held_mb == 400 + 320 + 400 + 64  # they hold what they held
        assert budget.resumable(going=2) == []  # no room for either grown to its limit: they wait
        with pytest.raises(Saturated):
            await budget.acquire(10, 0.0)  # nothing is admitted while a run stands paused
        budget.release(full)
        budget.release(young)
        # 400 + 400 held: the oldest goes on, admitted by its limit (900 in all); the other (1000) waits for it.
        assert budget.resumable(going=0) == [old] and old.full and budget.held_mb == 900
        assert budget.resumable(going=1) == [] and middle.paused
        budget.release(old)
        assert budget.resumable(going=0) == [middle] and budget.held_mb == 500

    asyncio.run(main())


def test_where_no_run_goes_on_the_oldest_paused_one_does_whatever_room_there_is() -> None:
    async def main() -> None:
        budget = MemoryBudget(600)
        first, second = [await budget.acquire(500, share_mb=64) for _ in range(2)]
        budget.update(first, 350)
        budget.update(second, 350)
        assert budget.over() == [first, second]
        assert budget.resumable(going=1) == []  # a run goes on: they wait for it
        assert budget.resumable(going=0) == [first] and budget.held_mb == 850  # none does: the oldest goes on

    asyncio.run(main())


def test_a_run_whose_limit_is_past_the_machines_margin_is_admitted_by_its_whole_limit() -> None:
    async def main() -> None:
        budget = MemoryBudget(100_000)
        budget.machine_mb = 100_000 + 2 * 1024  # half of what is beyond the budget: 1 GiB
        small, large = await budget.acquire(1024, share_mb=64), await budget.acquire(1025, share_mb=64)
        assert not small.full and large.full and budget.held_mb == 64 + 1025

    asyncio.run(main())


def _server(budget_mb: int, workers: int, memory_mb: int) -> TestClient:
    settings = Settings(
        backend="local",
        workers=workers,
        max_workers=max(workers, 16),
        memory_budget_mb=budget_mb,
        limits=Limits(memory_mb=memory_mb, max_memory_mb=1024),
        cache_entries=0,
    )
    return TestClient(create_app(settings))


def _backend(client: TestClient) -> Any:
    return client.app.state.executor.backend  # type: ignore[attr-defined]


def test_runs_of_a_large_limit_that_hold_little_run_at_once() -> None:
    """A budget of one run's limit (1 GiB, and the output and files the server may hold for it), and twelve runs
    of that limit that sleep: admitted by their limits they would run one after another (12 s); admitted by what
    they hold, together."""
    with _server(1024 + 16, 2, 1024) as client:
        assert _backend(client).reads_memory, "no memory cgroup per worker here (codegym-sandbox doctor)"
        req = {"language": "python", "code": "import time; time.sleep(1); print('slept')"}
        began = time.monotonic()
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda _: client.post("/run_code", json=req), range(12)))
        took = time.monotonic() - began
        assert [a.json()["run_result"]["stdout"] for a in answers] == ["slept\n"] * 12
        assert took < 6, f"twelve sleepers of 1 s took {took:.1f} s"


def _agents_held_mb(server: int) -> int:
    """What the memory cgroups of every worker under ``server`` hold (the kernel's count), in MiB."""
    total = 0
    for usage in _usage_files(server):
        try:
            with open(usage, "rb") as f:
                total += int(f.read()) >> 20
        except OSError:
            pass
    return total


def _usage_files(server: int) -> set[str]:
    """The usage files of the memory cgroups of every worker under ``server``."""
    files, stack = set(), []
    for task in os.listdir(f"/proc/{server}/task"):  # a child is its parent thread's (the server's event loop)
        try:
            with open(f"/proc/{server}/task/{task}/children") as f:
                stack.extend(int(c) for c in f.read().split())
        except OSError:
            pass  # a thread of the server's (a thread pool's) that ended since it was listed
    while stack:
        pid = stack.pop()
        usage = usage_file(pid)
        if usage is not None:
            files.add(usage)
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                stack.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return files


@pytest.fixture
def peak() -> Iterator[list[int]]:
    """The most the workers of this process's server held at once, sampled every 10 ms."""
    seen = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            seen[0] = max(seen[0], _agents_held_mb(os.getpid()))
            time.sleep(0.01)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    yield seen
    done.set()
    thread.join()


GROWER = """
import time
held = []
for _ in range(40):
    held.append(b"x" * (10 << 20))
    time.sleep(0.03)
time.sleep(0.5)
print(sum(map(len, held)) >> 20)
"""


def test_runs_that_grow_past_the_budget_together_stand_paused_and_none_is_judged_for_it(
    peak: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight runs of 512 MiB, each growing to 400 MiB at once, on a budget of 2 GiB with a margin of 600 MiB
    beyond it (a machine of 2048 + 2 x 600 MiB; admitted by their share, all eight start): those that grow stand
    paused as what they hold passes the budget, and go on as there is room, or within the margin once paused a
    tenth of their limit; every run is right, none MLE, TLE or SE, none was run again, and what the workers held
    stayed within the budget and its margin (and what a tick may miss)."""
    monkeypatch.setattr("codegym_sandbox.backends.memory.machine_memory_mb", lambda: 2048 + 2 * 600)
    with _server(2048, 8, 512) as client:
        assert _backend(client).reads_memory, "no memory cgroup per worker here (codegym-sandbox doctor)"
        # A run takes 2 s of its own on a quiet machine, and took 5 s on CI's after an hour of other tests (its own
        # time, pauses left out: a limit of 3 s judged two TLE). A limit of 10 s keeps this test on the budget;
        # that a pause is no part of a run's time is test_run_pause.py's to check, with a pause past the limit.
        req = {"language": "python", "code": GROWER, "memory_limit_MB": 512, "run_timeout": 10}
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: client.post("/run_code", json=req), range(8)))
        results = [a.json()["run_result"] for a in answers]
        assert [(r["status"], r["stdout"]) for r in results] == [("Finished", "400\n")] * 8, results
        assert _backend(client).memory.overcommit_mb == 600
        assert peak[0] <= 2048 + 600 + 256, f"the workers held {peak[0]} MiB at once, on a budget of 2048 + 600"
        status = client.get("/readyz").json()
        assert status["memory_paused"] > 0 and status["restarts"] == 0, status
        assert client.post("/run_code", json={"language": "python", "code": "print(2)"}).json()["status"] == "Success"


def _kernel_mb(usage: str) -> int:
    """The kernel memory that the cgroup of the usage file ``usage`` holds, in MiB."""
    folder = os.path.dirname(usage)
    if usage.endswith(".usage_in_bytes"):
        with open(f"{folder}/memory.kmem.usage_in_bytes") as f:
            return int(f.read()) >> 20
    with open(f"{folder}/memory.stat") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("kernel ")) >> 20


def _sleeping(client: TestClient, usages: set[str]) -> tuple[int, int]:
    """While a run sleeps: the kernel memory of the workers' cgroups, and what the server takes the runs to hold."""
    sleeper = {"language": "python", "code": "import time; time.sleep(1.5)", "memory_limit_MB": 512}
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(client.post, "/run_code", json=sleeper)
        time.sleep(0.8)
        seen = sum(_kernel_mb(u) for u in usages), client.get("/readyz").json()["memory_held_mb"]
        assert answer.result().json()["status"] == "Success"
    return seen


def test_what_a_run_left_in_the_kernel_is_no_later_runs() -> None:
    """A run leaves the kernel's entries for the names it looked up charged to its worker's cgroup (a victim near
    its limit once reclaimed them on its own CPU time, and was TLE; the server took them for the next runs'
    memory): the box gives them back before the next run, and the server counts no page cache as a run's."""
    with _server(4096, 1, 512) as client:
        assert _backend(client).reads_memory, "no memory cgroup per worker here (codegym-sandbox doctor)"
        usages = _usage_files(os.getpid())
        kernel_before, held_before = _sleeping(client, usages)
        run = {"language": "python", "code": LOOKUPS, "memory_limit_MB": 512, "run_timeout": 20}
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(client.post, "/run_code", json=run)
            most = 0
            while not answer.done():  # what the lookups hold as they end is given back before the answer
                most = max(most, sum(_kernel_mb(u) for u in usages))
                time.sleep(0.02)
            assert answer.result().json()["run_result"]["stdout"] == "looked\n"
        left = most - kernel_before
        assert left >= 48, f"the lookups held {left} MiB: too little to tell"
        kernel, held = _sleeping(client, usages)
        assert kernel - kernel_before < left // 2, f"{left} MiB of kernel memory left, {kernel - kernel_before} kept"
        assert held <= held_before + 16, f"the server took the sleeper to hold {held} MiB, {held_before} before"


_READ_STDLIB = """
import os
folder = os.path.dirname(os.__file__)
for name in sorted(os.listdir(folder)):
    if name.endswith(".py"):
        with open(os.path.join(folder, name), "rb") as f:
            f.read()
print(folder)
"""
# 48 MiB of extended attributes: past what a run may leave in its worker (``MemoryCgroup.LEFT_KB``), within what
# the scratch tmpfs's inodes may hold (a KiB an inode, a quarter of its size: ``agent/scratch_cost.tmpfs_options``).
_XATTRS = """
import os
value = b"x" * 25000
for f in range(200):
    open(f"x{f}", "w").close()
    for i in range(10):
        os.setxattr(f"x{f}", f"user.a{i}", value)
print("set")
"""


def _resident_kb(folder: str) -> int:
    """How much of the ``.py`` files of ``folder`` is in the host's page cache (mincore, as root sees it)."""
    import ctypes
    import mmap

    libc, total = ctypes.CDLL(None, use_errno=True), 0
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if not name.endswith(".py") or not os.path.getsize(path):
            continue
        size = os.path.getsize(path)
        vec = (ctypes.c_ubyte * ((size + 4095) // 4096))()
        with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
            libc.mincore(ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(mapped))), size, vec)
        total += sum(4 for v in vec if v & 1)
    return total


def test_a_run_whose_kernel_memory_was_its_files_drops_no_page_cache() -> None:
    """What a run's files hold in the kernel's memory (extended attributes: 114 MiB in 30 ms) goes with the box's
    reset; a reclaim of the worker's cgroup for it dropped the host's page cache of every shared file its runs
    had read first, which every neighbour then read again from disk."""
    with _server(4096, 1, 512) as client:
        assert _backend(client).reads_memory, "no memory cgroup per worker here (codegym-sandbox doctor)"
        run = {"language": "python", "code": _READ_STDLIB, "memory_limit_MB": 512, "run_timeout": 20}
        folder = client.post("/run_code", json=run).json()["run_result"]["stdout"].strip()
        # The local backend's worker sees the host's /usr read-only: the runtime's library is the host's files.
        assert os.path.isdir(folder), f"the runtime's standard library ({folder}) is not the host's"
        for name in os.listdir(folder):  # out of the host's cache, so that the run's read charges its worker
            with contextlib.suppress(OSError), open(os.path.join(folder, name), "rb") as f:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        assert client.post("/run_code", json=run).json()["run_result"]["stdout"].strip() == folder
        cached = _resident_kb(folder)
        assert cached > 1024, f"{cached} KiB of the standard library cached: too little to tell"
        xattrs = {"language": "python", "code": _XATTRS, "memory_limit_MB": 512, "run_timeout": 20}
        assert client.post("/run_code", json=xattrs).json()["run_result"]["stdout"] == "set\n"
        assert _resident_kb(folder) > cached // 2, "the worker's reclaim dropped the host's page cache"


# A wrong program: it needs 3 s of wall time (a sleep) under a 2 s limit. Its thread grows past the run's share
# at once, so that two copies of it pass a small budget together and the younger stands paused: its sleep runs on
# while it is paused, and what the pause is credited, it gains.
PAUSED_SLEEPER = """
import threading, time
def grow():
    time.sleep(0.2)
    held = bytearray(220 << 20)
    for i in range(0, len(held), 4096):
        held[i] = 1
    time.sleep(9)
threading.Thread(target=grow, daemon=True).start()
time.sleep(3.0)
print(2 * int(input()), flush=True)
import os; os._exit(0)
"""


def test_a_program_that_sleeps_through_its_pause_gains_a_tenth_of_its_limit_at_most() -> None:
    """Two copies at once on a 400 MiB budget: one stands paused while the other runs. Paused until the other
    ended (as before), the younger was credited 2 s of a 3 s sleep, AC; now it goes on after a tenth of its limit
    (within the budget's margin), and both are TLE."""
    with _server(400, 2, 380) as client:
        assert _backend(client).reads_memory, "no memory cgroup per worker here (codegym-sandbox doctor)"
        body = {"language": "python", "cache": False, "limits": {"timeout_s": 2, "memory_mb": 380}}
        body |= {"programs": [PAUSED_SLEEPER] * 2, "tests": [{"stdin": "21\n", "expected_stdout": "42\n"}]}
        for _ in range(2):
            paused = client.get("/readyz").json()["memory_paused"]
            answer = client.post("/v1/evaluate", json=body).json()
            verdicts = [t["verdict"] for r in answer["results"] for t in r["tests"]]
            assert verdicts == ["TLE", "TLE"], answer
            assert client.get("/readyz").json()["memory_paused"] > paused, "no copy stood paused"


# Holds 200 MiB, then vforks a child that waits before it exits: parent and child share one address space.
VFORKER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    char *held = (char *)malloc(200 << 20);
    memset(held, 1, 200 << 20);
    if (vfork() == 0) {
        usleep(400000);
        _exit(0);
    }
    printf("%d\n", held[12345]);
    return 0;
}
"""


def test_a_vfork_parent_and_its_child_count_their_one_memory_once() -> None:
    """A run of 200 MiB that vforks (as posix_spawn and Python's subprocess do) is within a 320 MiB limit: its
    parent, waiting for the child, shares the child's address space and is not counted again (it was MLE)."""
    with _server(4096, 1, 320) as client:
        req = {"language": "cpp", "code": VFORKER, "memory_limit_MB": 320, "run_timeout": 5}
        answer = client.post("/run_code", json=req).json()
        assert answer["run_result"]["status"] == "Finished" and answer["run_result"]["stdout"] == "1\n", answer


# Four children of 30 MiB each under a 64 MiB limit, each made by a clone that shares its maker's memory and makes
# it wait as a vfork does, but as a thread of the same process (CLONE_THREAD): no other process counts it.
HIDER = r"""
#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static int worker(void *) {
    size_t n = (size_t)30 << 20;
    char *p = (char *)mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    struct timespec ts = {0, 800000000};
    nanosleep(&ts, 0);
    syscall(SYS_exit_group, 0);
    return 0;
}
int main(void) {
    for (int k = 0; k < 4; k++) {
        if (fork() == 0) {
            size_t size = 1 << 16;
            char *stack = (char *)mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            int flags = CLONE_VM | CLONE_VFORK | CLONE_THREAD | CLONE_SIGHAND | CLONE_FS | CLONE_FILES;
            clone(worker, stack + size, flags, 0);
            _exit(5);
        }
    }
    int status;
    for (int k = 0; k < 4; k++) wait(&status);
    puts("done");
    return 0;
}
"""


def test_a_process_whose_vfork_child_is_a_thread_of_its_own_counts_its_memory() -> None:
    """The memory of a process waiting in a clone of CLONE_VM|CLONE_VFORK is its child's to count only where that
    child is another process, counted: with CLONE_THREAD it is a thread of the same one, and skipping it hid 120 MiB
    under a 64 MiB limit (AC; round 54)."""
    with _server(4096, 1, 64) as client:
        req = {"language": "cpp", "code": HIDER, "memory_limit_MB": 64, "run_timeout": 5}
        answer = client.post("/run_code", json=req).json()
        assert answer["run_result"] is not None and answer["run_result"]["memory_exceeded"], answer
