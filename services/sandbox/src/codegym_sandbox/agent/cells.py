"""Notebook cells in a kernel process, recorded by a supervisor that no cell can reach.

``/run_jupyter`` runs a notebook's cells and ``/execute_batch`` a reward script as one cell. The main script
of such a run is :data:`CELLS_MAIN`, which calls :func:`main`; the run's stdin carries the job (the cells, the
cell timeout, how much output to keep). Two processes:

* the **supervisor** (the run's process, :func:`main`) reads the job and gives up its stdin, forks the
  kernel, sends it one cell at a time and records what each cell did: the bytes the kernel and its children
  wrote on the kernel's stdout and stderr (pipes to the supervisor) while the cell ran, then the kernel's
  answer (the display and the error). Only the supervisor holds the run's stdout, where it writes that
  record as frames (``cell_frames.read_record`` reads them in the server). It is not dumpable, so no process of
  the run can read its memory or its descriptors;
* the **kernel** (``kernel.py``) runs each cell in one shared ``__main__`` (:func:`run_cell`: the
  statements, then the value of the last one when it is an expression). It is not dumpable either, so the
  programs it starts (a reward script's ``python3 -c code``) cannot read the cells it holds (a reward
  script holds the expected outputs), and its channel to the supervisor is close-on-exec.

Neither imports from anywhere a program of the run can write (``import_path.isolate``): the working
directory, where the programs a cell starts run, is not on their path, so a module a program writes there
(``difflib.py``) is never what a later cell imports. A cell that wants to import a file of its own adds the
directory itself.

What this guarantees: no result comes from a file, from the kernel's stdout or from an exit status, and a
cell that ends the kernel (``os._exit``, a signal, ``exec``) before the kernel answers ends the record
there: the cells after it did not run (the server answers Failed). An answer for a cell that was not sent
yet, a second answer, or one from another process than the kernel (a child it forked) ends it too. What it
does not: the cells share one interpreter, so a cell can change how later cells of the same kernel run and
what the kernel answers for them, as in any notebook. A test cell beside a program's cell judges nothing
the program could not forge; ``/v1/evaluate`` does.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
from typing import Any, NoReturn

from . import import_path, kernel, linux
from .cell_frames import (
    CELL,
    CUT,
    DEAD,
    END,
    ERR,
    OUT,
    KernelRequest,
    answer_for,
    receive_answer,
)
from .kernel import message, take, write_all

CELLS_MAIN = "from codegym_sandbox.agent.cells import main\n\nmain()\n"
_CHUNK = 1 << 16


# --- the supervisor -----------------------------------------------------------------------------------


_later = b""  # a frame that goes out with the next one (see frame_later)


def frame(kind: bytes, cell: int, data: bytes) -> None:
    global _later
    out, _later = _later + b"%s %d %d\n" % (kind, cell, len(data)) + data, b""
    write_all(1, out)


def frame_later(kind: bytes, cell: int, data: bytes) -> None:
    """A frame written with the next one, in one write: a cell's answer and the ``end`` (or the output after it)
    behind it reach the reader at once, which a session's every cell waits for. Every record ends with a frame
    (``end``, or why the kernel ended), and :func:`flush` writes it before a next cell could outlast the run."""
    global _later
    _later += b"%s %d %d\n" % (kind, cell, len(data)) + data


def flush() -> None:
    global _later
    if _later:
        out, _later = _later, b""
        write_all(1, out)


class Relay:
    """The kernel's stdout and stderr, passed on as frames of the cell that runs, up to ``cap`` bytes."""

    def __init__(self, fds: dict[int, bytes], cap: int) -> None:
        self.fds = dict(fds)
        self.left = cap
        self.cut = False
        for fd in fds:
            os.set_blocking(fd, False)

    def read(self, fd: int, cell: int) -> bool:
        """Pass on what ``fd`` holds now; False when it held nothing (or every writer closed it)."""
        try:
            data = os.read(fd, _CHUNK)
        except BlockingIOError:
            return False
        if not data:
            del self.fds[fd]
            return False
        kept = data[: max(self.left, 0)]
        self.left -= len(data)
        if kept:
            frame(self.fds[fd], cell, kept)
        if len(kept) < len(data) and not self.cut:
            self.cut = True
            frame(CUT, cell, b"")
        return True

    def drain(self, cell: int) -> None:
        """What the kernel wrote before it answered is in the pipes by now: pass all of it on."""
        for fd in list(self.fds):
            while fd in self.fds and self.read(fd, cell):
                pass


def _ended(cell: int, pid: int, exited: int, why: str = "") -> int | None:
    """Record that the kernel stopped answering at ``cell``; the signal that killed it, if one did."""
    sig = None
    if exited >= 0:  # its channel closes a moment before it can be waited for
        select.select([exited], [], [], 0.5)
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        done, status = 0, 0
    if why:
        pass
    elif done == 0:
        why = "the kernel closed its channel (it ran another program, or gave the channel away)"
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        why = f"the kernel was killed by signal {sig}"
    else:
        why = f"the kernel exited with status {os.WEXITSTATUS(status)}"
    frame(DEAD, cell, why.encode())
    return -1 if sig is None else sig


def supervise(job: dict[str, Any], pid: int, requests: int, answers: socket.socket, relay: Relay) -> int | None:
    """Send every cell and record it; a kernel that ends, or answers out of turn, ends the record (and the
    signal that killed the kernel, if one did, is returned: -1 where it ended otherwise)."""
    exited = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else -1
    try:
        return _supervise(job, pid, requests, answers, relay, exited)
    finally:
        if exited >= 0:
            os.close(exited)


def _supervise(
    job: dict[str, Any], pid: int, requests: int, answers: socket.socket, relay: Relay, exited: int
) -> int | None:
    poller = select.poll()
    for fd in (*relay.fds, answers.fileno(), exited):
        if fd >= 0:
            poller.register(fd, select.POLLIN)
    buffer = b""
    cells = [str(c) for c in job["cells"]]
    cell_timeout = max(float(job.get("cell_timeout") or 0), 0.0)
    for n, source in enumerate(cells):
        if buffer or select.select([answers], [], [], 0)[0]:
            late = buffer or receive_answer(answers)[0]
            return _ended(n, pid, exited, "the kernel answered a cell it was not given" if late else "")
        try:
            flush()  # the last cell's answer: this one may run until the run is stopped
            # The nonce: an answer written ahead (by an earlier cell) cannot be this cell's.
            nonce = os.urandom(16).hex()
            cell: KernelRequest = {
                "n": n,
                "nonce": nonce,
                "source": source,
                "cell_timeout": cell_timeout,
                "timer": job.get("timer") is not False,
                "stdin": job.get("stdin"),
                "answer_bytes": int(job.get("output_bytes") or 1 << 20),
            }
            write_all(requests, message(cell))
        except OSError:
            return _ended(n, pid, exited)
        answer: Any = None
        while answer is None:
            events = dict(poller.poll())
            for fd in list(relay.fds):
                if fd in events:
                    relay.read(fd, n)
                    if fd not in relay.fds:
                        poller.unregister(fd)
            if answers.fileno() in events:
                part, sender = receive_answer(answers)
                if part and sender != pid:
                    return _ended(n, pid, exited, "an answer came from another process than the kernel")
                buffer += part
                try:
                    taken = take(buffer)
                except ValueError:
                    return _ended(n, pid, exited, "the kernel's answer is not one")
                if taken is not None:
                    answer, buffer = taken
                elif not part:
                    return _ended(n, pid, exited)
            elif exited in events:
                return _ended(n, pid, exited)
        relay.drain(n)
        checked = answer_for(answer, n, nonce)
        if checked is None or buffer:
            return _ended(n, pid, exited, "the kernel's answer is not one")
        frame_later(CELL, n, json.dumps(checked).encode())
    relay.drain(len(cells))
    frame(END, len(cells), b"")
    return None


def _read_all(fd: int) -> bytes:
    parts = []
    while part := os.read(fd, 1 << 20):
        parts.append(part)
    return b"".join(parts)


def main() -> NoReturn:
    """The run's process: the supervisor. The job, on stdin: ``{"cells", "cell_timeout", "output_bytes"}``."""
    pid, requests_w, answers, outputs = start_kernel()
    job = json.loads(_read_all(0))
    relay = Relay(outputs, int(job.get("output_bytes") or 1 << 20))
    sig = supervise(job, pid, requests_w, answers, relay)
    if sig is not None and sig > 0:  # the run ends as its kernel did, so that a CPU limit or a kill reads as one
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(0)


def start_kernel() -> tuple[int, int, socket.socket, dict[int, bytes]]:
    """Fork the kernel: its pid, the supervisor's ends of its requests and answers, and of its stdout and
    stderr (the frame kind of each)."""
    linux.set_dumpable(False)  # its children too, from the fork on: the kernel's processes cannot read either
    # The programs the cells start write in the working directory, beside this script: the kernel (which
    # judges them) and the supervisor import nothing from there, nor from anywhere else a program can write.
    import_path.isolate()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    requests_r, requests_w = os.pipe()
    answers, answers_w = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    answers.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sys.stdout.flush()
    sys.stderr.flush()
    # The kernel first: it never holds the job, only each cell once it is sent.
    pid = os.fork()
    if pid == 0:
        for fd in (out_r, err_r, requests_w):
            os.close(fd)
        answers.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # the job's way in
        os.dup2(out_w, 1)  # the run's stdout is the supervisor's alone
        os.dup2(err_w, 2)
        for fd in (null, out_w, err_w):
            os.close(fd)
        kernel.serve(requests_r, answers_w)
    for fd in (out_w, err_w, requests_r):
        os.close(fd)
    answers_w.close()
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    return pid, requests_w, answers, {out_r: OUT, err_r: ERR}
