"""The box: init of a pid namespace that forks one program per run and leaves nothing behind.

The box never reads request data (the agent writes files into its scratch space from outside), so the
program forked from it inherits a clean image. After each program ends the box kills every other process
in its namespace (``kill(-1)`` from a namespace's init reaches exactly those) and reaps them, so a
double-forked daemon cannot outlive its run.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from typing import NoReturn, TypeVar, cast

from . import isolation, linux, pyrun, run_cpu
from .box_protocol import RELEASE, RELEASED, BoxCommand, BoxConfig, Broken, RunCommand, SeriesReport
from .memory_cgroup import MemoryCgroup
from .programs import MAX_FDS, Programs, kill_all, reap_all, rewind_pids
from .protocol import SOURCE_ERROR, Report
from .run_cgroup import RunCgroup
from .run_memory import Held, MemoryWatch, held_at_end
from .test_series import Spare, TestSeries

R = TypeVar("R", Report, SeriesReport | Broken)

__all__ = ["reap_all", "serve"]


def serve(ctl: socket.socket, config: BoxConfig) -> None:
    """Main loop of the box process (pid 1 of its namespace). Exits when the agent goes away."""
    seccomp = config.get("seccomp", True) and linux.seccomp_supported()
    contained = not config["namespaces"]  # in a container: no namespaces of our own, see isolation
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[config["slot"] % len(cpus)] if "slot" in config else None
    programs = Programs(
        config["program_uid"],
        config.get("program_gid", config["program_uid"]),
        seccomp,
        contained,
        cpu,
        len(cpus),
        config.get("run_cgroup"),
    )
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # the agent's channel to the server is not the box's business
        os.dup2(null, fd)
    os.close(null)
    linux.set_dumpable(False)  # the program may not read this process's memory
    # The init of a namespace gets no signal from inside it that it does not handle: handle none.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    scratch: isolation.Scratch | isolation.WipedScratch
    memory: MemoryCgroup | None = None
    if contained:
        # Not a namespace's init here: orphaned daemons must still come to us to be reaped. The container's
        # memory cgroup bounds everything its processes hold; the box reads it.
        linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)
        scratch = isolation.WipedScratch(programs.uid, programs.gid, ipc=not seccomp)
        memory = MemoryCgroup.own()
    else:
        isolation.enter_box()
        scratch = isolation.Scratch(config["tmp_bytes"])
        # A run is one process session (setsid), and so one autogroup: one share of the CPU, however many
        # processes it has.
        with contextlib.suppress(OSError), open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            if f.read().strip() == "0":
                sys.stderr.write("box: kernel.sched_autogroup_enabled is 0: runs share the CPU per process\n")
        memory = config.get("memory_cgroup")
        if memory is not None and not memory.join():
            # Gone from under the worker: its runs would hold memory without a bound. The box does not start,
            # and the server replaces the worker.
            raise RuntimeError("the box could not join its worker's memory cgroup")
    scratch.reset(first=True)
    if memory is not None:
        memory.take_floor(config.get("memory_floor_kb"))
    pyrun.warm_up()
    linux.prepare_seccomp(inet=not contained)  # a container's loopback is up: see linux._seccomp_program
    gc.freeze()  # keep the collector from touching (and so copying) every inherited page in the child
    # Forked after every reset: it must see the new scratch mount and IPC namespace, and nothing older.
    spare: Spare | None = _spare(programs)
    series: TestSeries | None = None
    _ready(ctl, _hello(memory))
    armed = False
    left = False  # a run left more of the kernel's memory here than may stay: see _given_back
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, MAX_FDS)
        except ConnectionError:
            msg, fds = b"", []
        if not msg:
            os._exit(0)  # the agent is gone; the kernel kills everything in this namespace with us
        if not armed:
            # A box stopped between a session's cells (session_pause) cannot read its channel's end when the
            # agent dies (killed with its server): the kernel kills it then, and its namespace with it. Armed at
            # the first command, which the agent sends only once the middle process that forked this box has
            # exited (box_handle._fork_box): armed before, the signal would have come as that process exited.
            linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
            armed = True
        cmd = cast(BoxCommand, json.loads(msg))  # the agent's: trusted to be what it says
        if series is not None and cmd["op"] != "test":
            series.end()  # a test series ends with the first request that is not one of its tests
            series = None
        if cmd["op"] == "reset":
            if spare is not None:
                spare.discard()
            scratch.reset()
            # Asked again only once the run's files are gone: what is still held then (names it looked up,
            # which a container's engine alone can give back) makes the worker go.
            retire = left and memory is not None and not memory.give_back()
            left = False
            spare = _spare(programs)
            _ready(ctl, {"retire": True} if retire else {})
            continue
        report: Report | SeriesReport | Broken
        if cmd["op"] == "run" and cmd.get("series"):
            discarded = 0
            if spare is not None:
                spare.discard(wait=False)  # it has the tests' uid: none of them may find it
                discarded, spare = spare.pid, None
            rewind_pids()
            series = TestSeries(cmd, programs, scratch, memory, discarded)
            report = _given_back(series.test(fds, ctl), memory)
            series = series if report["more"] else None
            left = _answer(ctl, report) or left
        elif cmd["op"] == "run":
            # The agent resets the box between runs; a run without one still gets a fresh process.
            report = _run(cmd, fds, ctl, spare or _spare(programs), memory, programs.cpus, programs.cgroup)
            spare = None
            left = _answer(ctl, _given_back(report, memory)) or left
        elif cmd["op"] == "test" and series is not None:
            report = _given_back(series.test(fds, ctl), memory)
            series = series if report["more"] else None
            left = _answer(ctl, report) or left
        elif cmd["op"] == "test":
            for fd in fds:
                os.close(fd)
            broken: Broken = {"more": False, "broken": True}
            ctl.sendall(json.dumps(broken).encode())
        else:
            for fd in fds:
                os.close(fd)


def _reap_only(ctl: socket.socket) -> NoReturn:
    """A session's kernel, the run, was copied (``agent/session_family.py``): its copies, processes of this
    namespace with limits of their own, are no longer the run's to watch or end. The box only reaps what they
    leave (as the namespace's init, every orphan comes to it) until the agent goes away."""
    ctl.send(RELEASED)
    while True:
        readable = select.select([ctl], [], [], 0.5)[0]
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        if readable and not ctl.recv(1 << 16):
            os._exit(0)


def _given_back(report: R, memory: MemoryCgroup | None) -> R:
    """``report``, once what the run left in the kernel's memory (every process of it is gone) is given back:
    never the next run's. Where the run left too much (see ``MemoryCgroup.give_back``), the report says so
    (``left``): the agent resets the box before it answers, and the reset gives back what is still held, or
    says the worker must be replaced where it cannot (a container). Most of what a cheap run leaves is its files'
    (inodes, extended attributes), which the reset frees: a worker replaced for them would cost the host half a
    second of CPU for a run of milliseconds, and a reclaim of its cgroup drops the host's page cache of every
    shared file its runs read first (a toolchain's), which every neighbour then reads again from disk."""
    if memory is not None and "broken" not in report and memory.holds_left():
        cast(dict[str, object], report)["left"] = True
    return report


def _spare(programs: Programs) -> Spare:
    """The process of the next run, forked with the pid the first process of every run gets."""
    rewind_pids()
    return Spare(programs)


def _hello(memory: MemoryCgroup | None) -> dict[str, object]:
    """What the box says as it starts: the floor of its memory cgroup, for the worker's later boxes, and whether
    the worker must go at once (a run that killed the last box left more there than may stay)."""
    if memory is None or memory.floor_kb is None:
        return {}
    return {"floor_kb": memory.floor_kb, **({} if memory.give_back() else {"retire": True})}


def _answer(ctl: socket.socket, report: Report | SeriesReport | Broken) -> bool:
    """Send a run's report to the agent, and keep nothing of it: every later program (and the spare and
    test series' processes they run in) is forked from the box, and may walk up its stack to the box's frames.
    Whether the report said the run left more than may stay (``left``)."""
    left = "left" in report
    try:
        ctl.sendall(json.dumps(report).encode())
    except OSError:
        os._exit(0)  # the agent went away (its worker was ended): nobody reads the report
    cast(dict[str, object], report).clear()
    return left


def _ready(ctl: socket.socket, said: dict[str, object]) -> None:
    """Tell the agent the box is ready (``box_protocol.Ready``)."""
    # The agent reaches the scratch directory through this descriptor, never through a path.
    scratch = os.open(isolation.SCRATCH, os.O_RDONLY | os.O_DIRECTORY)
    try:
        socket.send_fds(ctl, [json.dumps({"op": "ready", **said}).encode()], [scratch])
    except OSError:
        os._exit(0)  # the agent went away while the box was being reset
    os.close(scratch)


def _run(
    cmd: RunCommand,
    fds: list[int],
    ctl: socket.socket,
    spare: Spare,
    memory: MemoryCgroup | None,
    cpus: int = 1,
    meter: RunCgroup | None = None,
) -> Report:
    # The run as a whole (every process it forked, and what its files hold) gets its memory limit, in every
    # language, checked here; the memory cgroup, where there is one, bounds everything else it can hold. The
    # address-space limit, where the language has one, bounds each process too; a runtime that reserves more
    # than it uses (V8, a JVM) has none, and its heap flag only lets it start within the limit, never bounds
    # the run: its buffers off the heap and its children are the run's memory like any other. (A container's
    # memory cgroup is one more bound, around all of its runs.)
    budget_kb = cmd["limits"]["memory_bytes"] // 1024
    if memory is not None:
        memory.apply(budget_kb * 1024)
    # What it holds as it starts (the files it was given), read before the program can run: a program that
    # fills a tmpfs at once would otherwise be read into its own starting point, and never counted.
    held = Held(memory)
    reaped = run_cpu.reaped_cpu_s()  # the run's processes, once the box reaps them, add to this
    # The kernel's count of the run's cgroup, where there is one, starts here: only the spare is in it, idle.
    cpu_watch = run_cpu.CpuWatch(cmd["limits"], cpus, {"1", str(os.getpid())}, meter)
    start = time.monotonic()
    try:
        socket.send_fds(spare.sock, [json.dumps(cmd).encode()], fds)
    except OSError:
        pass  # the spare died while it waited: its exit status below tells how
    for fd in fds:
        os.close(fd)
    # Wait for the program while listening to the agent: it may ask for a kill, or go away.
    exited = os.pidfd_open(spare.pid)
    poller = select.poll()
    poller.register(exited, select.POLLIN)
    poller.register(ctl, select.POLLIN)
    watch = MemoryWatch(budget_kb, held, cpu_watch)
    while True:
        events = watch.poll(poller)
        if exited in events:
            break
        if ctl.fileno() in events:
            msg = ctl.recv(1 << 16)
            if msg == RELEASE:
                _reap_only(ctl)
            kill_all()
            if not msg:  # the agent is gone: nobody will read a result
                os._exit(0)
    over_budget = watch.over()
    os.close(exited)
    _, status, usage = os.wait4(spare.pid, 0)
    wall = time.monotonic() - start
    kill_all()
    reap_all()
    # Every process of the run is gone by now: reaped by the box, by a process the box reaped, or by the kernel
    # (whose time only the cgroup's count has).
    cpu = cpu_watch.used_at_end(run_cpu.reaped_cpu_s() - reaped)
    if cpu_watch.over_at_end(cpu):
        status = signal.SIGXCPU  # as the per-process limit ends a process: the run is out of CPU time
    # Past its budget the run was killed: its peak is reported as the memory it used, so that it reads as MLE.
    peak_kb = watch.peak_kb if over_budget else 0
    if memory is not None and memory.over():
        status, peak_kb = signal.SIGKILL, max(peak_kb, budget_kb)  # the kernel killed one of its processes
    elif budget_kb and (held_kb := held_at_end(held, usage.ru_maxrss, budget_kb)):
        status, peak_kb = signal.SIGKILL, max(peak_kb, held_kb)
    spare.sock.setblocking(False)
    try:
        error = spare.sock.recv(4096).decode(errors="replace")
    except OSError:
        error = ""
    spare.sock.close()
    code, sig = (None, os.WTERMSIG(status)) if os.WIFSIGNALED(status) else (os.WEXITSTATUS(status), None)
    report: Report = {
        "exit_code": code,
        "signal": sig,
        "wall": wall,
        "cpu": cpu,
        "max_rss_kb": max(usage.ru_maxrss, peak_kb),
        "error": None if error == SOURCE_ERROR else error or None,
    }
    if error == SOURCE_ERROR:
        report["unparsed"] = True
    return report
