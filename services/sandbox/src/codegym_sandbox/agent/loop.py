"""The agent's main loop: read run requests from the server, run each in the box, answer with results.

Process tree of one worker slot::

    server ──pipe── agent (this module; worker namespaces, never runs untrusted code)
                      └── box (pid 1 of its own pid namespace; holds no request data)
                            └── program (one per run; unprivileged, rlimits, seccomp)

The agent owns deadlines and output: it feeds stdin, drains stdout and stderr as the program runs (a full
pipe never stalls it), stops at the output cap, and at the deadline has the box kill all in the namespace.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from . import (  # noqa: F401 - see main()
    assert_runner,
    cells,
    isolation,
    linux,
    run_cpu,
    run_pause,
    session,
    session_family,
    session_main,
    worker_start,
)
from .box_handle import BoxHandle
from .box_protocol import BoxConfig, OpCommand, RunCommand, read_run_report, read_test_report
from .cell_pause import OPS as PAUSE_OPS
from .channel import take as take_channel
from .protocol import TEST_ENDED, ProtocolError, encode_frame, read_frame, wipe, write_all
from .run_clock import Run, stretched
from .scratch_files import collect, write_files

if TYPE_CHECKING:
    from .protocol import Ended, Report, RunAnswer, RunFrame

GRACE_S = 2.0  # after asking the box to kill a run, how long before the box itself is killed
DRAIN_FACTOR = 8  # output past the cap read and dropped before the run is stopped, in caps


def _run(
    bx: BoxHandle, req: RunFrame, blobs: list[bytearray], series: str | None = None
) -> tuple[RunAnswer | None, bool, list[bytes]]:
    """One run in the box: a fresh process, or with ``series`` ("start" or "test") a test in a test series.

    Its answer (None: the test could not run in its series, which the agent runs again on its own), whether
    the series can take another test, and its stdout and stderr."""
    run = Run(req, blobs)
    run.used_zero = run_cpu.runs_used_s(bx.config.get("run_cgroup"), bx.pid)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    # A program may open its standard streams by path (/dev/stdin, /proc/self/fd/1), which checks the pipe's
    # mode, not its descriptor: it may open each the way it holds it already (whatever its uid), never the other.
    for fd, mode in ((in_r, 0o444), (out_w, 0o222), (err_w, 0o222)):
        os.fchmod(fd, mode)
    cmd: RunCommand | OpCommand
    if series == "test":
        cmd = {"op": "test"}
    else:
        cmd = {
            "argv": req["argv"],
            "env": req["env"],
            "limits": req["limits"],
            "python": req["python"],
            "op": "run",
            "cwd": isolation.SCRATCH,
        }
        if series == "start":
            cmd["series"] = True
    assert bx.ctl is not None
    bx.dirty = True
    # Kills the kernel makes for memory while this run holds the box's memory cgroup are this run's doing.
    memory = bx.config.get("memory_cgroup")
    kills = memory.oom_kills() if memory is not None else 0
    socket.send_fds(bx.ctl, [json.dumps(cmd).encode()], [in_r, out_w, err_w])
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    readers = {out_r: "stdout", err_r: "stderr"}
    sel = selectors.DefaultSelector()
    for fd in readers:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    sel.register(bx.ctl, selectors.EVENT_READ)
    pauses = run_pause.RunPause(bx.pid)  # the server may pause the run: its time stands still meanwhile
    if pauses.server >= 0:
        sel.register(pauses.server, selectors.EVENT_READ, pauses)
    if len(run.stdin):
        os.set_blocking(in_w, False)
        sel.register(in_w, selectors.EVENT_WRITE)
    else:
        os.close(in_w)  # no stdin: the program sees end-of-file at once, never a hang
        in_w = -1
    report: Ended | Report | None = None
    more = broken = False
    try:
        while report is None:
            now = time.monotonic()
            if pauses.paused:
                pass
            elif run.killed_at is None and now >= run.deadline:
                run.deadline = stretched(bx, run, now, plain=series is None)
                if now >= run.deadline:
                    run.timed_out = True
                    _stop(bx, run, now)
            if run.killed_at is not None and now >= run.killed_at + GRACE_S and not pauses.paused:
                # The box did not answer the kill: take it down with everything in its namespace.
                bx.respawn()
                report = {"exit_code": None, "signal": signal.SIGKILL, "wall": now - run.started, "cpu": None}
                break
            wake = run.deadline if run.killed_at is None else run.killed_at + GRACE_S
            for key, _ in sel.select(max(wake - now, 0.0) if not pauses.paused else 1.0):
                fd = key.fd
                if key.data is pauses:
                    if report is None:  # a pause that comes as the run ends is for the exchange's next run
                        shift = pauses.read(sel)
                        run.paused_s, run.deadline = run.paused_s + shift, run.deadline + shift
                        run.killed_at = None if run.killed_at is None else run.killed_at + shift
                elif fd == in_w:
                    try:
                        run.stdin = run.stdin[os.write(in_w, run.stdin[: 1 << 16]) :]
                    except BrokenPipeError:
                        run.stdin = run.stdin[:0]
                    if not len(run.stdin):
                        sel.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                elif fd in readers:
                    data = os.read(fd, 1 << 16)
                    if data:
                        _take(bx, run, readers[fd], data)
                    else:
                        sel.unregister(fd)
                        os.close(fd)
                        del readers[fd]
                else:
                    raw = bx.ctl.recv(1 << 16)
                    if raw:
                        # Read against its type: a report that is not one is the box's failure (SE).
                        if series is None:
                            report = read_run_report(raw)
                        elif "broken" in (got := read_test_report(raw)):
                            report, broken = {"exit_code": None, "signal": None, "wall": 0.0, "cpu": None}, True
                        else:
                            report, more = got, got["more"]
                    elif memory is not None and memory.oom_kills() > kills:
                        # The run filled the memory cgroup with what killing its processes does not free (files
                        # on its tmpfs), and the kernel took the box next: the run ran out of memory.
                        bx.respawn()
                        now = time.monotonic()
                        report = {
                            "exit_code": None,
                            "signal": signal.SIGKILL,
                            "wall": now - run.started,
                            "cpu": None,
                            "max_rss_kb": req["limits"]["memory_bytes"] // 1024,
                            "error": None,
                        }
                    elif bx.config["namespaces"]:
                        raise OSError("the box went away")
                    else:
                        # In a container the program shares the box's uid and can kill it: that is the
                        # program's doing (a crash), not a fault of the sandbox.
                        bx.respawn()
                        now = time.monotonic()
                        report = {
                            "exit_code": None,
                            "signal": signal.SIGKILL,
                            "wall": now - run.started,
                            "cpu": None,
                            "error": None,
                        }
                        run.out["stderr"] += b"\nsandbox: the program killed its supervisor\n"
        # Everything in the namespace is dead, so every write end is closed: read what is left to EOF.
        for fd, stream in readers.items():
            os.set_blocking(fd, True)
            while data := os.read(fd, 1 << 16):
                _take(bx, run, stream, data)
    finally:
        pauses.end()
        sel.close()
        for fd in [*readers, in_w]:
            if fd >= 0:
                os.close(fd)
    outputs = [bytes(run.out["stdout"]), bytes(run.out["stderr"])]
    if broken:
        return None, False, outputs
    # The report's fields in the report's order (a test series' says whether it goes on: returned apart).
    result = cast("RunAnswer", {key: value for key, value in report.items() if key not in ("more", "left")})
    bx.left = bx.left or "left" in report
    result["timed_out"], result["output_exceeded"] = run.timed_out, run.output_exceeded
    result["wall"] = max(result["wall"] - run.paused_s, 0.0)  # the time it stood paused was not its own
    if run.timed_out:
        result["wall"] = max(result["wall"], req["limits"]["wall_s"])
    return result, more, outputs


def _take(bx: BoxHandle, run: Run, stream: str, data: bytes) -> None:
    """Keep output up to the cap; past it, read on and drop it (a program that ends by itself ends as it would
    have, truncated); one that writes past DRAIN_FACTOR times the cap is stopped (it would until its deadline)."""
    room = run.output_cap - len(run.out["stdout"]) - len(run.out["stderr"])
    run.out[stream] += data[: max(room, 0)]
    if len(data) > room:
        run.output_exceeded = True
        run.dropped += len(data) - max(room, 0)
        if run.dropped > DRAIN_FACTOR * run.output_cap:
            _stop(bx, run, time.monotonic())


def _stop(bx: BoxHandle, run: Run, now: float) -> None:
    if run.killed_at is None:
        run.killed_at = now
        bx.stop_run()


def _run_tests(
    bx: BoxHandle, header: RunFrame, blobs: list[bytearray], uid: int, tell: Callable[[bytes], None]
) -> tuple[list[RunAnswer], list[bytes]]:
    """One program on several inputs, each run in a process of its own, in order.

    A Python program runs its tests in a test series (see ``test_series.TestSeries``): one compile, then a fork per
    test. Whatever breaks a test series (a test that leaves something behind, or kills the series' process)
    only costs speed: the next test starts a new one, and a test that broke one runs again on its own.
    """
    files = header.get("files", [])
    # A test series costs one fork more than a run on its own: worth it from two tests on, to go on with the
    # series the last exchange left open when it ran exactly what this one runs, or for a "shared" run (the
    # assert runner, the same file for every program it judges), whose series the next exchange takes up.
    # Only a shared run leaves its series open: otherwise the box is reset while the server reads the
    # answer, not when the next exchange waits.
    as_series = bool(header.get("python")) and all("/" not in n for n, _, _ in files)
    same = _series_of(header, blobs) if as_series else bytearray()
    in_series = bool(same) and same == bx.series
    as_series = as_series and (len(header["stdins"]) > 1 or in_series or bool(header.get("shared")))
    bx.end_series()
    results: list[RunAnswer] = []
    outputs: list[bytes] = []

    def fresh_box() -> None:
        bx.reset()
        write_files(bx, files, blobs, uid)

    for stdin in header["stdins"]:
        req = cast("RunFrame", dict(header, stdin=stdin))
        result: RunAnswer | None = None
        if as_series:
            if not in_series:
                fresh_box()
            result, in_series, outs = _run(bx, req, blobs, "test" if in_series else "start")
            if result is not None:
                result["forked"] = True
        if result is None:
            fresh_box()
            result, _, outs = _run(bx, req, blobs)
            assert result is not None  # only a series' test can be broken
            in_series = False
        results.append(result)
        outputs += outs
        if len(results) < len(header["stdins"]):
            tell(encode_frame({"op": TEST_ENDED}))
    if in_series and header.get("shared"):
        bx.series = same  # clean after its last test, and wanted again: the next exchange may go on with it
    else:
        wipe(same)
    return results, outputs


def _series_of(header: RunFrame, blobs: list[bytearray]) -> bytearray:
    """Everything a series' process depends on: what it runs (files, argv, env, limits), byte for byte."""
    what = {k: v for k, v in header.items() if k not in ("op", "stdins", "files", "blobs")}
    key = bytearray(json.dumps(what, sort_keys=True).encode())
    for name, mode, index in header.get("files", []):
        key += f"\0{name}\0{mode}\0{len(blobs[index])}\0".encode()
        key += blobs[index]
    return key


def handle(
    bx: BoxHandle, frame: dict[str, object], blobs: list[bytearray], uid: int, tell: Callable[[bytes], None]
) -> bytes:
    """Serve one request frame and return the answer frame (``tell``: a frame sent before it, on the way)."""
    op = frame.get("op")
    if op not in ("run", "kernel", "files", "cell"):
        return encode_frame({"op": "pong"} if op == "ping" else {"op": "error", "error": f"unknown op {op!r}"})
    header = cast("RunFrame", frame)  # the server's: trusted to be what it says
    try:
        if op in ("run", "kernel") and not bx.alive():
            bx.spawn()
        if op != "run":
            return session.answer(bx, frame, blobs, uid)  # a session's frame
        if "stdins" in header:
            results, outputs = _run_tests(bx, header, blobs, uid, tell)
            return encode_frame({"op": "results", "results": _settled(bx, results)}, outputs)
        bx.reset()
        write_files(bx, header.get("files", []), blobs, uid)
        result, _, outputs = _run(bx, header, blobs)
        assert result is not None  # only a series' test can be broken
        collected, files = collect(bx, header.get("collect", []), header["limits"]["collect_bytes"])
        return encode_frame({"op": "result", **_settled(bx, [result])[0], "collected": collected}, [*outputs, *files])
    except (OSError, ValueError, RuntimeError) as exc:
        session.drop()  # a session whose frame failed is over
        if not bx.alive():
            bx.respawn()
        return encode_frame({"op": "error", "error": f"{type(exc).__name__}: {exc}"})
    finally:
        for blob in blobs:
            wipe(blob)


def _settled(bx: BoxHandle, answers: list[RunAnswer]) -> list[RunAnswer]:
    """``answers``, the last saying whether the worker is to be replaced: where a run left more of the kernel's
    memory than may stay, the box is reset now, before the server has the answer, and asked again."""
    if bx.left:
        bx.reset()
    if bx.retire:
        answers[-1]["retire"], bx.retire = True, False
    return answers


def main() -> None:
    """Entry point: the first frame is the worker configuration; then one answer per request."""
    linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)
    take_channel()
    in_fd, out_fd = 0, 1
    # Nothing may print on the channel: move it off fd 1 and send stray prints to stderr.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    frame, _ = read_frame(in_fd)
    config = cast(BoxConfig, frame)  # the server's: trusted to be what it says
    try:
        bx, uid = worker_start.start(config)
    except BaseException as exc:
        write_all(out_fd, encode_frame({"op": "error", "error": f"{type(exc).__name__}: {exc}"}))
        raise SystemExit(1) from exc
    hello = {"op": "ready", "pid": os.getpid(), "program_uid": uid, "tools": worker_start.tools(config)}
    write_all(out_fd, encode_frame(hello))
    # The server's modules are not the program's business: drop the agent's own path entries.
    for entry in config.get("drop_sys_path", []):
        while entry in sys.path:
            sys.path.remove(entry)
    session.watch(in_fd)
    run_pause.watch(in_fd)
    while True:
        try:
            header, blobs = session.take_later() or run_pause.take_later() or read_frame(in_fd)
        except ProtocolError:
            header, blobs = {"op": "end"}, []
        if header.get("op") in PAUSE_OPS:  # for a cell that ended as it was sent: what runs stops again
            session.hold(in_fd)
            continue
        if header.get("op") == "fork":  # its session's first fork: from now on, the members' agents serve it
            answer, members, kernels, start = session_family.first(bx, header)
            write_all(out_fd, answer)
            start()  # the members' agents, once the answer is on its way
            if members:
                session_family.serve(in_fd, out_fd, members, kernels, bx.pid)
                header = {"op": "end"}
        if header.get("op") == "end":
            bx.kill()
            if (runs := config.get("run_cgroup")) is not None:
                runs.remove()  # before the memory cgroup, which may hold it
            if (memory := config.get("memory_cgroup")) is not None:
                memory.remove()
            return
        if header.get("op") != "fork":
            write_all(out_fd, handle(bx, header, blobs, uid, lambda frame: write_all(out_fd, frame)))
            run_pause.forget()
        # While the server reads the answer: a session's processes stop until its next cell; else the box's
        # scratch space is renewed, unless a test series is left open for the next exchange (which resets first).
        if session.open_kernel() is not None:
            session.hold(in_fd)
        elif bx.alive() and not bx.series:
            bx.reset()


if __name__ == "__main__":
    main()
