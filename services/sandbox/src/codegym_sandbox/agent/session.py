"""A session's kernel, kept in the box of a worker that serves that session alone.

A worker the server leases to a session gets one ``kernel`` frame: the agent writes the session's files and
starts :data:`session_main.SESSION_MAIN` in the box as a run that does not end between calls; its limits are
the session's (memory for everything it holds, files included; CPU for its whole life), enforced by the box
as for any run. Each ``cell`` frame then sends one cell to that run's stdin and reads the cell's record from
its stdout, up to the record's ``end``, within the cell's wall-clock bound. The agent never resets the box
while the kernel lives: the box holds the session's state.

The session ends, and the frame says so (``alive``: false), when the run ends (its kernel exited, or the box
stopped it at a limit: ``report`` tells which), or when a cell passes its bound without an answer: then the
agent takes the whole box down, kernel and every process it left. The server ends the worker with the
session: nothing of it outlives that.
"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import socket
import time
from typing import TYPE_CHECKING, cast

from . import isolation, run_cpu, session_pause
from .box_protocol import RunCommand, read_run_report
from .cell_clock import CellClock
from .protocol import encode_frame
from .scratch_files import write_files
from .session_frames import CellDone, CellFrame, FilesWritten, KernelStarted, RecordScanner

if TYPE_CHECKING:
    from .box_handle import BoxHandle
    from .protocol import Report, RunFrame

HOLD_AFTER_S = 0.05  # after a cell's answer, how long the session's processes run on before they are stopped
GRACE_S = 2.0  # after a cell is interrupted, how long its kernel has to answer before the session is ended
STDERR_KEPT = 1 << 16  # what the supervisor itself writes on stderr (its own failure), kept for the report


class Kernel:
    """The session's run: its stdin, stdout and stderr, and what it cost so far."""

    def __init__(self, bx: BoxHandle, header: RunFrame, blobs: list[bytearray], uid: int) -> None:
        self.bx = bx
        self.output_cap = header["limits"]["output_bytes"]
        bx.reset()
        write_files(bx, header.get("files", []), blobs, uid)
        in_r, self.stdin = os.pipe()
        self.stdout, out_w = os.pipe()
        self.stderr, err_w = os.pipe()
        for fd, mode in ((in_r, 0o444), (out_w, 0o222), (err_w, 0o222)):
            os.fchmod(fd, mode)
        cmd: RunCommand = {
            "argv": header["argv"],
            "env": header["env"],
            "limits": header["limits"],
            "python": header["python"],
            "op": "run",
            "cwd": isolation.SCRATCH,
        }
        assert bx.ctl is not None
        bx.dirty = True
        memory = bx.config.get("memory_cgroup")
        self.kills = memory.oom_kills() if memory is not None else 0
        socket.send_fds(bx.ctl, [json.dumps(cmd).encode()], [in_r, out_w, err_w])
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        for fd in (self.stdout, self.stderr):
            os.set_blocking(fd, False)
        self.report: Report | None = None
        self.errors = bytearray()
        self.held = self.unheld = False
        self.kernel_pid = 0  # found at a cell (see _find_kernel)

    def close(self) -> None:
        for fd in (self.stdin, self.stdout, self.stderr):
            if fd >= 0:
                os.close(fd)
        self.stdin = self.stdout = self.stderr = -1

    def cell(self, message: bytes, wall_s: float) -> tuple[CellDone, bytes]:
        """Send one cell and read its record: the answer frame and the record's bytes."""
        bx = self.bx
        assert bx.ctl is not None
        if self.held:  # the session's processes, stopped since its last cell (see hold)
            session_pause.resume(bx.pid)
            self.held = False
        cell_clock = CellClock(self._find_kernel(), bx.config.get("run_cgroup"), bx.pid, wall_s)
        started = cell_clock.started
        used_zero = cell_clock.used_zero
        interrupted = False  # the agent interrupted the cell (its kernel's SIGALRM): it ran out of time
        deadline = cell_clock.interrupt_at + GRACE_S
        scanner = RecordScanner(self.output_cap)
        pending = memoryview(message)
        timed_out = False
        sel = selectors.DefaultSelector()
        os.set_blocking(self.stdin, False)
        sel.register(self.stdin, selectors.EVENT_WRITE)
        sel.register(self.stdout, selectors.EVENT_READ)
        sel.register(self.stderr, selectors.EVENT_READ)
        sel.register(bx.ctl, selectors.EVENT_READ)
        ended = False  # the supervisor ended, or its record stopped being one
        try:
            while not scanner.ended and self.report is None and not ended:
                now = time.monotonic()
                if not interrupted and now >= cell_clock.interrupt_at:
                    # Its limit, moved on by the time its kernel waited for a CPU that others held (see
                    # ``cell_clock.py``): a busy machine never turns a cell into a time-out.
                    if cell_clock.due(now):
                        interrupted = True
                        self._interrupt()
                        deadline = now + GRACE_S
                    else:
                        deadline = cell_clock.interrupt_at + GRACE_S
                if now >= deadline:
                    timed_out = True
                    break
                wake = deadline if interrupted else cell_clock.interrupt_at
                for key, _ in sel.select(max(wake - now, 0.0)):
                    if key.fd == self.stdin:
                        try:
                            pending = pending[os.write(self.stdin, pending[: 1 << 16]) :]
                        except BrokenPipeError:
                            pending = pending[:0]
                        if not len(pending):
                            sel.unregister(self.stdin)
                    elif key.fd == self.stdout:
                        data = self._read(self.stdout)
                        if data is not None and (not data or not scanner.take(data)):
                            ended = True
                            break
                    elif key.fd == self.stderr:
                        data = self._read(self.stderr)
                        if data:
                            self.errors += data[: max(STDERR_KEPT - len(self.errors), 0)]
                        elif data is not None:
                            sel.unregister(self.stderr)
                    else:
                        raw = bx.ctl.recv(1 << 16)
                        if not raw:
                            raise OSError("the box went away")
                        self.report = read_run_report(raw)  # the session's run ended
                        break
        finally:
            sel.close()
        if ended and self.report is None:
            self._await_report()
        alive = self.report is None and not ended and not timed_out and scanner.ended and not scanner.dead
        used = run_cpu.runs_used_s(bx.config.get("run_cgroup"), bx.pid)
        memory = bx.config.get("memory_cgroup")
        oom = memory is not None and memory.oom_kills() > self.kills
        if alive and self.unheld:
            alive = False  # its processes could not all be stopped after its last cell: it is ended now
        if not alive:
            self._end()
        report = self.report
        done: CellDone = {
            "op": "cell",
            "alive": alive,
            "interrupted": interrupted,
            "timed_out": timed_out,
            "oom": oom,
            "cpu_s": None if used is None or used_zero is None else max(used - used_zero, 0.0),
            "wall_s": time.monotonic() - started,
            "exit_code": None if report is None else report["exit_code"],
            "signal": None if report is None else report["signal"],
            "max_rss_kb": None if report is None else report["max_rss_kb"],
            "blobs": [len(scanner.record)],
        }
        return done, bytes(scanner.record)

    def _find_kernel(self) -> int:
        """The pid of the session's kernel (0 while there is none yet): the child of the session's supervisor,
        which is the box's oldest child (what a cell leaves behind comes to the box later, and the supervisor
        forks nothing but its kernel)."""
        if not self.kernel_pid:
            box = self.bx.pid
            by_age = sorted((_started(pid), pid) for pid in _children(box))
            if by_age:
                kernels = sorted((_started(pid), pid) for pid in _children(by_age[0][1]))
                self.kernel_pid = kernels[0][1] if kernels else 0
        return self.kernel_pid

    def _interrupt(self) -> None:
        """Interrupt the running cell: its kernel raises ``CellTimeout`` in it (``kernel.py``)."""
        pid = self._find_kernel()
        if pid:
            try:
                os.kill(pid, signal.SIGALRM)
            except OSError:
                pass  # it ended: the record says so

    def _await_report(self) -> None:
        """The supervisor's output ended: the box reports how its run ended (a limit, a kill) a moment later."""
        ctl = self.bx.ctl
        assert ctl is not None
        if select.select([ctl], [], [], GRACE_S)[0]:
            raw = ctl.recv(1 << 16)
            if raw:
                self.report = read_run_report(raw)

    def hold(self, requests: int) -> None:
        """Stop the session's processes until its next cell (``session_pause``), once no cell came for
        ``HOLD_AFTER_S`` after its answer went (on ``requests``, the server's channel): a caller's next cell
        right behind its last then costs nothing, and what a cell leaves running computes that long at most.
        One that cannot be stopped ends the session at its next cell."""
        if self.stdin < 0 or select.select([requests], [], [], HOLD_AFTER_S)[0]:
            return
        self.held = True
        if not session_pause.stop(self.bx.pid):
            self.unheld = True

    def _read(self, fd: int) -> bytes | None:
        try:
            return os.read(fd, 1 << 16)
        except BlockingIOError:
            return None

    def _end(self) -> None:
        """Take the box down: the kernel, the supervisor and everything they started."""
        self.bx.respawn()
        self.bx.dirty = False  # a fresh box: nothing of the session is left in it
        self.close()


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []


def _started(pid: int) -> int:
    """When ``pid`` started, in clock ticks since boot (``/proc/PID/stat``'s field 22); the latest there is
    where it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return 1 << 62


_open: Kernel | None = None


def hold(requests: int) -> None:
    """After a cell's answer went out: stop what the session left running (see :meth:`Kernel.hold`)."""
    if _open is not None:
        _open.hold(requests)


def is_open() -> bool:
    return _open is not None


def start(bx: BoxHandle, header: RunFrame, blobs: list[bytearray], uid: int) -> KernelStarted:
    """Start the session's kernel (a worker holds one session, once)."""
    global _open
    if _open is not None:
        raise RuntimeError("this worker holds a session already")
    _open = Kernel(bx, header, blobs, uid)
    return {"op": "kernel", "started": True, "blobs": []}


def cell(message: bytearray, wall_s: float) -> tuple[CellDone, bytes]:
    """One cell of the open session."""
    global _open
    if _open is None:
        raise RuntimeError("no session is open on this worker")
    done, record = _open.cell(bytes(message), wall_s)
    if not done["alive"]:
        _open = None
    return done, record


def drop() -> None:
    """Forget the open session after a frame of it failed (its box is taken down by the caller)."""
    global _open
    if _open is not None:
        _open.close()
        _open = None


def answer(bx: BoxHandle, frame: dict[str, object], blobs: list[bytearray], uid: int) -> bytes:
    """Serve a ``kernel``, ``files`` or ``cell`` frame (the server's: trusted to be what it says); the caller
    (``loop.handle``) answers its failure, and wipes its blobs."""
    if frame.get("op") == "kernel":
        return encode_frame(start(bx, cast("RunFrame", frame), blobs, uid))
    if frame.get("op") == "files":
        if _open is None:
            raise RuntimeError("no session is open on this worker")
        files = cast("RunFrame", frame)["files"]
        write_files(bx, files, blobs, uid)
        written: FilesWritten = {"op": "files", "written": len(files), "blobs": []}
        return encode_frame(written)
    done, record = cell(blobs[0], cast("CellFrame", frame)["wall_s"])
    return encode_frame(done, [record])
