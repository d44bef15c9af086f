"""What the kernel counts per user of the host is each worker's own (issue 32, family 1).

Pipe pages (``fs.pipe-user-pages-soft``), epoll watches and, where no user namespace separates them, queued
signals are counted per host user: were every worker's programs one user, a run that took its user's whole
count would leave the runs on every other worker none (a pipe of two pages, which an honest program that
writes more than that before it reads blocks on). Each test has a hog on one worker and a victim on the
other at the same time, on every backend; the victim must get what it gets on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.backends.choose import QUEUED_SIGNALS
from codegym_sandbox.config import Limits
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient

from .suite import SUITE_LIMITS, at_once, hostile_settings

HOLD_S = 4  # how long a hog holds what it took: the victim looks while it does


@pytest.fixture(scope="module")
def two(backend: str) -> Iterator[TestClient]:
    """Two workers, and runs of up to 10 s: a hog that holds what it took while the victim beside it runs."""
    limits = Limits.model_validate({**SUITE_LIMITS, "max_run_timeout_s": 10.0})
    settings = hostile_settings(backend, workers=2, limits=limits)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def _at_once(client: TestClient, hog: str, victim: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The hog, and half a second later the victim, at once on the two workers; their answers."""

    def body(code: str) -> dict[str, Any]:
        return {"language": "python", "code": code, "limits": {"timeout_s": HOLD_S + 4}, "cache": False}

    hogged, seen = at_once(client, body(hog), body(victim), lead_s=0.5)
    return hogged, seen


# Takes every pipe page its user may have: pipes of 1 MiB (the most an unprivileged process may ask), in
# five processes (a process may hold only LIMITS__OPEN_FILES descriptors; a pipe lives while one end is open).
PIPE_HOG = f"""
import fcntl, os, time
def hog():
    ends = []
    while True:
        try:
            r, w = os.pipe()
        except OSError:
            return "fds"
        os.close(r)
        try:
            fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
        except OSError:
            os.close(w)
            return "limit"
        ends.append(w)
for _ in range(4):
    if os.fork() == 0:
        print(hog(), flush=True)
        time.sleep({HOLD_S})
        os._exit(0)
print(hog(), flush=True)
time.sleep({HOLD_S})
"""
# A pipe of its own, of the default size, that takes 64 KiB without blocking: looked at for two seconds.
PIPE_VICTIM = """
import fcntl, os, time
seen = []
for _ in range(20):
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        written = os.write(w, b"x" * 65536)
    except BlockingIOError:
        written = 0
    seen.append((fcntl.fcntl(w, 1032), written))  # F_GETPIPE_SZ
    os.close(r)
    os.close(w)
    time.sleep(0.1)
print(min(seen))
"""


def test_a_pipe_hog_leaves_the_run_beside_it_its_pipes(two: TestClient) -> None:
    hog, victim = _at_once(two, PIPE_HOG, PIPE_VICTIM)
    assert "limit" in hog["run"]["stdout"].split(), hog  # it took all its user's pipe pages
    assert victim["verdict"] == "AC" and victim["run"]["stdout"] == "(65536, 65536)\n", victim


# Queues a real-time signal to itself (blocked) until the kernel refuses one; prints how many it queued.
SIGNAL_HOG = f"""
import signal, threading, time
signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGRTMIN}})
me, queued = threading.get_ident(), 0
for _ in range(300_000):
    try:
        signal.pthread_kill(me, signal.SIGRTMIN)
    except OSError:
        break
    queued += 1
print(queued, flush=True)
time.sleep({HOLD_S})
"""
# Queues 16 signals every tenth of a second for two seconds: how many the kernel took.
SIGNAL_VICTIM = """
import signal, threading, time
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
me, queued = threading.get_ident(), 0
for _ in range(20):
    for _ in range(16):
        try:
            signal.pthread_kill(me, signal.SIGRTMIN)
            queued += 1
        except OSError:
            pass
    time.sleep(0.1)
print(queued)
"""


def test_a_signal_hog_leaves_the_run_beside_it_its_signals(two: TestClient) -> None:
    hog, victim = _at_once(two, SIGNAL_HOG, SIGNAL_VICTIM)
    assert victim["verdict"] == "AC" and victim["run"]["stdout"] == "320\n", (victim, hog)
    # A run's share is bounded, so that all workers together stay within what the host has.
    assert hog["verdict"] == "AC" and 0 < int(hog["run"]["stdout"]) <= QUEUED_SIGNALS, hog


# The host uid the program runs as: its uid, through its user namespace's map (where it has one of its own).
WHO = """
import os, time
uid = os.getuid()
for line in open("/proc/self/uid_map"):
    inside, outside, count = map(int, line.split())
    if inside <= uid < inside + count:
        print(outside + uid - inside)
time.sleep(1.5)
"""


def test_runs_on_two_workers_are_two_host_users(two: TestClient) -> None:
    first, second = _at_once(two, WHO, WHO + "# the other\n")
    assert first["verdict"] == "AC" and second["verdict"] == "AC", (first, second)
    assert first["run"]["stdout"] != second["run"]["stdout"], (first, second)
