"""The stop between a session's cells (``agent/session_pause.py``): what it takes for every process stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from codegym_sandbox.agent import session_pause


def test_one_round_that_sees_every_process_stopped_is_not_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    # A process that ends meanwhile continues its children (PR_SET_PDEATHSIG, an orphaned process group's
    # SIGCONT) and moves them to the box between two reads of the tree: a round once saw every process stopped
    # while such a child ran, and the idle session computed (3 CPU-s in 3 s).
    state = {"A": True, "C": True}
    rounds: list[list[str]] = [["A"], ["A", "C"]]  # the first round misses C, the next one finds it again

    def members(root: int, tree: bool = False) -> list[str]:
        if len(rounds) > 1:
            if len(rounds) == 2:
                state["C"] = False  # continued by its parent's end, after the first round read it stopped
            return rounds.pop(0)
        return rounds[0]

    def send(proc: str, sig: int) -> None:
        assert sig == signal.SIGSTOP
        state[proc] = True

    monkeypatch.setattr(session_pause, "_members", members)
    monkeypatch.setattr(session_pause, "_stopped", lambda proc, known: state[proc])
    monkeypatch.setattr(session_pause, "_signal", send)
    assert session_pause.stop(1) and state == {"A": True, "C": True}


def test_a_process_that_cannot_be_stopped_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_pause, "_members", lambda root, tree=False: ["A"])
    monkeypatch.setattr(session_pause, "_stopped", lambda proc, known: False)
    monkeypatch.setattr(session_pause, "_signal", lambda proc, sig: None)
    monkeypatch.setattr(session_pause.time, "sleep", lambda s: None)
    assert not session_pause.stop(1)


def test_a_process_slow_to_take_its_stop_is_waited_for_a_while(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a loaded machine a process may not run to take its SIGSTOP within the walks' 200 rounds (a tenth of a
    second); its session then ended at its next cell, a 'killed' no one asked for. The stop now waits for a
    second at least, and still gives up on a process that never stops."""
    started = time.monotonic()
    monkeypatch.setattr(session_pause, "_members", lambda root, listed=None: ["/proc/fake"])
    monkeypatch.setattr(session_pause, "_signal", lambda proc, sig: None)
    monkeypatch.setattr(session_pause, "_stopped", lambda proc, known: time.monotonic() - started > 0.4)
    assert session_pause.stop(1)  # stopped after 0.4 s: some 800 walks
    monkeypatch.setattr(session_pause, "_stopped", lambda proc, known: False)
    began = time.monotonic()
    assert not session_pause.stop(1) and time.monotonic() - began < 5


VFORKER = r"""
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    if (vfork() == 0) {  /* the child stops itself before it executes anything: its parent waits, unstoppable */
        raise(SIGSTOP);
        _exit(0);
    }
    puts("continued");
    return 0;
}
"""

# A clone with CLONE_VFORK but not CLONE_VM: its parent waits as uninterruptibly, with a memory of its own.
CLONE_VFORKER = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static char stack[1 << 16];
static int child(void *arg) { raise(SIGSTOP); _exit(0); return 0; }
int main(void) {
    clone(child, stack + sizeof stack, CLONE_VFORK | SIGCHLD, 0);
    puts("continued");
    return 0;
}
"""


@pytest.mark.parametrize("source", [VFORKER, CLONE_VFORKER], ids=["vfork", "clone-vfork-without-vm"])
def test_a_vfork_parent_waiting_for_its_stopped_child_stands_stopped(tmp_path: Path, source: str) -> None:
    """``posix_spawn`` and Python's ``subprocess`` vfork: a stop that finds the child before it executes leaves the
    parent waiting in the kernel, where no stop reaches. It runs nothing until its child is continued: the stop
    holds it. The walk once spun for its whole second and said the process could not be stopped, which cost a
    session its next cell and a paused run the whole credit of its pause. A clone with ``CLONE_VFORK`` but not
    ``CLONE_VM`` waits the same way and read as running (round 56: every stop walk of a run that left 120 of them
    ran to its end, 1.7 CPU-seconds of the agent's a pause, charged to no run)."""
    parent = subprocess.Popen([_built(tmp_path, "vforker", source)], stdout=subprocess.PIPE)
    try:
        _settled(parent.pid)
        began = time.monotonic()
        assert session_pause.stop(parent.pid), "a vfork parent of a stopped child was taken for running"
        assert time.monotonic() - began < 0.5
        session_pause.resume(parent.pid)
        out, _ = parent.communicate(timeout=10)
        assert out == b"continued\n"
    finally:
        for child in session_pause.descendants(parent.pid):  # a stopped child would hold the pipe open
            os.kill(child, signal.SIGKILL)
        parent.kill()
        parent.communicate()


class _Clock:
    """The walk's time alone: a loaded machine's sleeps and reads run long, and a wall-clock bound failed under CI's
    load where the walk kept to its rounds."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_walk_over_processes_that_never_stop_ends_with_its_second(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each round reads every process: 200 rounds at least, over 255 processes that could not stop, took the walk
    1.9 s (round 56). Past its quick rounds it ends with its second, each round waiting as long as the last took."""
    clock, rounds = _Clock(), []

    def members(root: int, listed: object) -> list[str]:
        rounds.append(clock.now)
        return [f"/proc/{n}" for n in range(250)]

    def slow(proc: str, known: dict[str, bool]) -> bool:
        clock.sleep(0.0002)  # a process's entries read
        return False

    monkeypatch.setattr(session_pause, "time", clock)
    monkeypatch.setattr(session_pause, "_members", members)
    monkeypatch.setattr(session_pause, "_stopped", slow)
    monkeypatch.setattr(session_pause, "_signal", lambda proc, sig: None)
    monkeypatch.setattr(session_pause, "_stop_threads", lambda root, running: None)
    assert not session_pause.stop(1)
    assert clock.now < 1.6
    assert len(rounds) < 30


# A leader that waits in vfork for a child that stopped itself, and a thread beside it that computes: the stop sent
# to the process goes to the leader, which cannot take it, and the group stop never starts (round 55: an idle
# session computed 6 CPU-s in 6 s; a paused run grew on).
SPINNER = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
static volatile unsigned long spins;
static void *spin(void *arg) { for (;;) spins++; return arg; }
int main(void) {
    pthread_t thread;
    pthread_create(&thread, 0, spin, 0);
    if (syscall(SYS_vfork) == 0) {
        syscall(SYS_kill, syscall(SYS_getpid), SIGSTOP);
        syscall(SYS_exit, 0);
    }
    for (;;) pause();
}
"""

# A chain of processes each waiting in vfork for the next, the last stopped: each is held by the one after it.
CHAIN = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int depth = atoi(argv[1]);
    for (int i = 0; i < depth; i++)
        if (syscall(SYS_vfork) != 0) syscall(SYS_exit, 0);  /* waits here until its child execs or ends */
    syscall(SYS_kill, syscall(SYS_getpid), SIGSTOP);
    syscall(SYS_exit, 0);
}
"""


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _built(tmp_path: Path, name: str, source: str, *flags: str) -> str:
    (tmp_path / f"{name}.c").write_text(source)
    subprocess.run(["cc", "-O1", "-o", str(tmp_path / name), str(tmp_path / f"{name}.c"), *flags], check=True)
    return str(tmp_path / name)


def _settled(pid: int, timeout_s: float = 10) -> None:
    """Until every process under ``pid`` stands stopped (each vfork child stops itself)."""
    deadline = time.monotonic() + timeout_s
    while True:
        children = session_pause.descendants(pid)
        if children and all(session_pause._stopped(f"/proc/{child}", {}) for child in children):
            return
        assert time.monotonic() < deadline, "the vfork children never stopped themselves"
        time.sleep(0.01)


def test_a_thread_beside_a_leader_waiting_in_vfork_is_stopped_too(tmp_path: Path) -> None:
    spinner = subprocess.Popen([_built(tmp_path, "spinner", SPINNER, "-pthread")])
    try:
        _settled(spinner.pid)
        assert session_pause.stop(spinner.pid), "a thread that computes beside a leader in vfork was not stopped"
        before = _cpu_ticks(spinner.pid)
        time.sleep(0.5)
        assert _cpu_ticks(spinner.pid) == before, "the process computed while the walk said it stood stopped"
    finally:
        for child in session_pause.descendants(spinner.pid):
            os.kill(child, signal.SIGKILL)
        spinner.kill()
        spinner.wait()


def test_a_deep_chain_of_vforks_is_read_once_a_round_and_held(tmp_path: Path) -> None:
    """Read as a recursion, one wait a frame, a chain of 250 passed Python's stack: the agent answered SE."""
    chain = subprocess.Popen([_built(tmp_path, "chain", CHAIN), "400"])
    try:
        _settled(chain.pid, timeout_s=30)
        assert len(session_pause.descendants(chain.pid)) == 400
        began = time.monotonic()
        assert session_pause.stop(chain.pid)
        assert time.monotonic() - began < 2.0  # a round reads each process once: not each chain below each
    finally:
        for child in session_pause.descendants(chain.pid):
            os.kill(child, signal.SIGKILL)
        chain.kill()
        chain.wait()
