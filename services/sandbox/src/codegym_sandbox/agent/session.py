"""A session's kernel, kept in the box of a worker that serves that session alone (a fork's copies: see
``kernel_place.py``). A worker the server leases to a session gets one ``kernel`` frame: the agent writes the
session's files and starts :data:`session_main.SESSION_MAIN` in the box as a run that does not end between calls.
Its limits are the session's (memory for everything it holds, files included; CPU for its whole life), enforced
by the box as for any run. The agent holds the other end of each of the kernel's channels: each ``cell`` frame
sends one cell on its requests pipe, and the agent records what the kernel writes and answers
(``session_record.py``) within the cell's wall-clock bound. The agent never resets the box while the kernel lives.

The session ends, and the frame says so (``alive``: false), when the run ends (its kernel exited, or the box
stopped it at a limit: ``report`` tells which), when the record ends without an answer, or when a cell passes
its bound without an answer: then the agent takes the whole box down, kernel and every process it left.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import signal
import socket
import time
from typing import TYPE_CHECKING, Any, cast

from . import cell_output, isolation, run_cpu, session_pause
from .box_protocol import RunCommand
from .cell_clock import CellClock
from .cell_frames import ERR, OUT, KernelRequest, receive_answer
from .cell_pause import CellPause
from .kernel import message as request_message
from .kernel import take
from .kernel_place import BoxPlace, why_ended
from .protocol import encode_frame
from .scratch_files import write_charged, write_files
from .session_frames import CellDone, CellFrame, FilesWritten, KernelStarted
from .session_main import READY
from .session_record import CellRecord

if TYPE_CHECKING:
    from .box_handle import BoxHandle
    from .kernel_place import KernelPlace
    from .protocol import Report, RunFrame

READY_S = 10.0  # how long a new kernel has to say it runs before its session is left unstopped until its first cell
GRACE_S = 2.0  # after a cell is interrupted, how long its kernel has to answer before the session is ended


class Kernel:
    """The session's run: the agent's ends of its channels, and what it cost so far."""

    def __init__(
        self, place: KernelPlace, requests: int, stdout: int, stderr: int, answers: socket.socket, copied: bool
    ) -> None:
        self.place = place
        self.requests, self.stdout, self.stderr, self.answers = requests, stdout, stderr, answers
        for fd in (self.requests, self.stdout, self.stderr):
            os.set_blocking(fd, False)
        self.answers.setblocking(False)
        self.memory = place.memory
        self.kills = self.memory.oom_kills() if self.memory is not None else 0
        self.report: Report | None = None
        self.held = copied  # a copy starts stopped, until its first cell (kernel_copy.py)
        self.unheld = ""  # why its processes could not all be stopped after a cell, where they could not
        self.closed = False  # the kernel's answers socket closed: it ended, or gave the socket up
        # The kernel said it runs (session_main.READY): its box took its command. A copy never says it: it ran.
        self.ready = copied
        self.early = False  # it wrote something else before its first cell: an answer out of turn
        self.kernel_pid = 0  # found at a cell (see _find_kernel)
        self.reseed = False  # the next cell asks the kernel for random state of its own first (a fork's copy)
        self.later: tuple[dict[str, object], list[bytearray]] | None = None  # a frame that came as a cell ran

    @classmethod
    def started(cls, bx: BoxHandle, header: RunFrame, blobs: list[bytearray], uid: int) -> Kernel:
        """Start the kernel as the run of the worker's box."""
        bx.reset()
        write_files(bx, header.get("files", []), blobs, uid)
        null = os.open(os.devnull, os.O_RDONLY)
        requests_r, requests = os.pipe()
        stdout, out_w = os.pipe()
        stderr, err_w = os.pipe()
        answers, answers_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        answers.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before the kernel can write
        # The kernel's ends: 0 to 4 in the run (``session_main``), each for the one way it goes.
        theirs = [null, out_w, err_w, requests_r, answers_w.fileno()]
        for fd, mode in ((requests_r, 0o444), (out_w, 0o222), (err_w, 0o222)):
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
        kernel = cls(BoxPlace(bx), requests, stdout, stderr, answers, copied=False)
        try:
            socket.send_fds(bx.ctl, [json.dumps(cmd).encode()], theirs)
        finally:
            for fd in (null, out_w, err_w, requests_r):
                os.close(fd)
            answers_w.close()
        return kernel

    def close(self) -> None:
        for fd in (self.requests, self.stdout, self.stderr):
            if fd >= 0:
                os.close(fd)
        self.requests = self.stdout = self.stderr = -1
        self.answers.close()

    def cell(self, message: bytes, wall_s: float, server: int = -1) -> tuple[CellDone, bytes]:
        """Send one cell and record it: the answer frame and the record's bytes. ``server``: the server's channel,
        watched for a pause of the cell (``cell_pause.py``)."""
        place = self.place
        if self.held:  # the session's processes, stopped since its last cell (see hold)
            place.resume()
            self.held = False
        # A kernel still starting (a busy machine) is waited for as long as the cell could run: its start is not
        # the cell's time, and its first word is never read as the cell's answer.
        self._await_ready(wall_s + GRACE_S)
        taken = take(message)
        job: dict[str, Any] = taken[0] if taken is not None else {}  # the server's: trusted to be what it says
        nonce = os.urandom(16).hex()  # an answer written ahead (by an earlier cell) cannot be this cell's
        stdin = job.get("stdin")
        request: KernelRequest = {
            "n": 0,
            "nonce": nonce,
            "source": str(job.get("source") or ""),
            "cell_timeout": float(job.get("cell_timeout") or 0),
            "timer": False,  # the agent interrupts it, past its limit and the time it waited for a CPU
            "stdin": None if stdin is None else str(stdin),
            "answer_bytes": int(job.get("output_bytes") or 1 << 20),
        }
        if self.reseed:  # before the cell, random state of its own (kernel.reseed); not echoed in the answer
            cast("dict[str, object]", request)["reseed"], self.reseed = True, False
        credit = job.get("wait_credit", True) is not False  # False: its caller waits for its limit and no longer
        cell_clock = CellClock(self._find_kernel(), place.meter, place.root, wall_s, credit)
        started = cell_clock.started
        used_zero = cell_clock.used_zero
        record = CellRecord(self.kernel_pid, nonce, int(job.get("output_bytes") or 1 << 20))
        interrupted = False  # the agent interrupted the cell (its kernel's SIGALRM): it ran out of time
        deadline = cell_clock.interrupt_at + GRACE_S
        timed_out = False
        pauses = CellPause(place)
        pending = memoryview(request_message(request))
        sel = selectors.DefaultSelector()
        if server >= 0 and self.later is None:
            sel.register(server, selectors.EVENT_READ, pauses)
        sel.register(self.stdout, selectors.EVENT_READ, OUT)
        sel.register(self.stderr, selectors.EVENT_READ, ERR)
        sel.register(self.answers, selectors.EVENT_READ)
        sel.register(place.reports(), selectors.EVENT_READ)
        if self.early:
            record.end("the kernel answered a cell it was not given")
        elif select.select([self.answers], [], [], 0)[0]:
            # Before this cell was sent: an answer written ahead, or the kernel's channel closed (it ended).
            self._answer(record, sel, late=True)
        else:
            sel.register(self.requests, selectors.EVENT_WRITE)
        try:
            while not record.ended and self.report is None and not self.closed:
                now = time.monotonic()
                if pauses.paused:  # its time stands still (and no process of it runs) until it is continued
                    pass
                elif not interrupted and now >= cell_clock.interrupt_at:
                    # Its limit, moved on by the time its kernel waited for a CPU that others held (see
                    # ``cell_clock.py``): a busy machine never turns a cell into a time-out.
                    if cell_clock.due(now):
                        interrupted = True
                        self._interrupt()
                        deadline = now + GRACE_S
                    else:
                        deadline = cell_clock.interrupt_at + GRACE_S
                if now >= deadline and not pauses.paused:
                    timed_out = True
                    break
                wake = min(deadline if interrupted else cell_clock.interrupt_at, now + place.poll_s)
                wake = now + 1.0 if pauses.paused else wake
                if self.report is None and (out := place.ran_out()) is not None:
                    self.report = out  # the session's CPU time over its life ran out: it ends with this cell
                    break
                for key, _ in sel.select(max(wake - now, 0.0)):
                    if key.data is pauses:
                        before = pauses.total_s
                        if (later := pauses.take(server)) is not None:
                            self.later = later
                            sel.unregister(server)
                        deadline += cell_clock.moved(pauses.shifted(before))
                    elif key.fd == self.requests:
                        try:
                            pending = pending[os.write(self.requests, pending[: 1 << 16]) :]
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:
                            pending = pending[:0]
                        if not len(pending):
                            sel.unregister(self.requests)
                    elif key.fd in (self.stdout, self.stderr):
                        cell_output.take(record, key.fd, key.data, sel)
                    elif key.fd == self.answers.fileno():
                        if self._answer(record, sel):
                            break
                    else:
                        self.report = place.read_report()  # the session's run ended
                        break
        finally:
            sel.close()
        if not record.ended and (self.report is not None or self.closed):
            if self.report is None:
                self._await_report()  # its channel closed: how its run ended comes a moment later
            cell_output.drain(record, self.stdout, self.stderr)
            record.end(why_ended(self.report))
        if pauses.paused:  # stopped as it ended: it goes on at the next cell, as after a hold
            self.held, self.unheld = True, "" if pauses.stopped else session_pause.UNSTOPPED
        alive = self.report is None and not timed_out and record.answered
        used = run_cpu.runs_used_s(place.meter, place.root)
        kills = self.memory.oom_kills() if self.memory is not None else 0
        oom, self.kills = kills > self.kills, kills  # since the last cell's end: between cells counts for this one
        why = ""  # why a session that answered its cell ends after it all the same
        if alive and self.unheld:
            alive, why = False, self.unheld  # its processes could not all be stopped after its last cell
        if alive and oom:
            alive = False  # a process of the session was killed for memory (a child, say): it passed its limit
        if alive and (out := self.place.ran_out()) is not None:
            alive, self.report = False, out  # the session's CPU time over its life ran out
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
            "why": why,
            "blobs": [len(record.record)],
        }
        return done, bytes(record.record)

    def _answer(self, record: CellRecord, sel: selectors.BaseSelector, late: bool = False) -> bool:
        """Read the answers socket into ``record``; True once the record has its answer or ended."""
        try:
            data, sender = receive_answer(self.answers)
        except BlockingIOError:
            return False
        if not data:
            self.closed = True  # the kernel ended (its report follows), or it gave the socket up
            return True
        if late:
            record.end("the kernel answered a cell it was not given")
            return True
        if sender == record.kernel:
            cell_output.drain(record, self.stdout, self.stderr)  # an answer comes after the output of its cell
        return record.answer(data, sender)

    def _await_ready(self, wait_s: float, requests: int | None = None) -> None:
        """Take the kernel's first word (``session_main.READY``), waiting up to ``wait_s`` (or until the server's
        next frame comes on ``requests``)."""
        if self.ready or self.early or self.closed:
            return
        waits = [self.answers.fileno()] if requests is None else [self.answers.fileno(), requests]
        if self.answers.fileno() not in select.select(waits, [], [], wait_s)[0]:
            return
        try:
            data, sender = receive_answer(self.answers)
        except BlockingIOError:
            return
        if not data:
            self.closed = True  # it ended before it ran: the cell says how
        elif data == READY and sender == self._find_kernel():
            self.ready = True
        else:
            self.early = True

    def _find_kernel(self) -> int:
        """The pid of the session's kernel, once found."""
        self.kernel_pid = self.kernel_pid or self.place.find_kernel()
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
        """The kernel's channel closed: the box reports how its run ended (a limit, a kill) a moment later."""
        if select.select([self.place.reports()], [], [], GRACE_S)[0]:
            with contextlib.suppress(OSError):
                self.report = self.place.read_report()

    def hold(self, requests: int) -> None:
        """Stop the session's processes until its next cell (``session_pause``), as soon as a cell's answer went,
        unless its next cell is already there (on ``requests``, the server's channel: it holds a slot of the pool
        by now). Between cells nothing of the session runs, however close they follow each other: a session
        computes only while it holds a slot, as a run does (a child a cell left, a thread, a timer's handler, a
        kernel a cell rewrote). A kernel is stopped once it said it runs (its box has then taken its command:
        see ``box.py``'s ``armed``). One that cannot be stopped ends the session at its next cell."""
        if self.requests < 0:
            return
        self._await_ready(READY_S, requests)  # stopped before, its box might not have armed its parent-death signal
        if not self.ready or self.later is not None or select.select([requests], [], [], 0)[0]:
            return
        self.held = True
        self.unheld = "" if self.place.stop() else session_pause.UNSTOPPED

    def _end(self) -> None:
        """Take the kernel down, and everything it started."""
        self.place.end()
        self.close()


_open: Kernel | None = None
_server = -1  # the server's channel, watched as a cell runs (see cell_pause.py)


def watch(server: int) -> None:
    global _server
    _server = server


def take_later() -> tuple[dict[str, object], list[bytearray]] | None:
    """A frame of the server's that came as the last cell ran (read then, to be served now)."""
    if _open is None or _open.later is None:
        return None
    later, _open.later = _open.later, None
    return later


def hold(requests: int) -> None:
    """After a cell's answer went out: stop what the session left running (see :meth:`Kernel.hold`)."""
    if _open is not None:
        _open.hold(requests)


def open_kernel() -> Kernel | None:
    return _open


def hand_over() -> None:
    """Forget the open session's kernel, copied for good (``session_family.py``): its box stays as it is."""
    global _open
    if _open is not None:
        _open.close()
        _open = None


def start(bx: BoxHandle, header: RunFrame, blobs: list[bytearray], uid: int) -> KernelStarted:
    """Start the session's kernel (a worker holds one session, once)."""
    global _open
    if _open is not None:
        raise RuntimeError("this worker holds a session already")
    _open = Kernel.started(bx, header, blobs, uid)
    return {"op": "kernel", "started": True, "blobs": []}


def cell(message: bytearray, wall_s: float) -> tuple[CellDone, bytes]:
    """One cell of the open session."""
    global _open
    if _open is None:
        raise RuntimeError("no session is open on this worker")
    done, record = _open.cell(bytes(message), wall_s, _server)
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
        write_charged(bx, files, blobs, uid, _open.memory)  # the session's memory holds them, not the agent's
        written: FilesWritten = {"op": "files", "written": len(files), "blobs": []}
        return encode_frame(written)
    done, record = cell(blobs[0], cast("CellFrame", frame)["wall_s"])
    return encode_frame(done, [record])
