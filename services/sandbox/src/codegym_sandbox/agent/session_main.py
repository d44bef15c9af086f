"""A session's program: the notebook supervisor and kernel of ``cells.py``, kept between calls.

A session is one long run in its worker's box, of :data:`SESSION_MAIN`. Its supervisor forks the kernel once
(:func:`cells.start_kernel`), then reads cells one at a time from its stdin, each a message
(``b"<length>\\n"`` and that much JSON: ``{"source", "cell_timeout", "output_bytes"}``), and writes each
cell's record on its stdout exactly as a notebook run writes a one-cell job's: output frames, the kernel's
answer (or why it ended), then ``end``. The agent reads a cell's record up to that ``end``
(``agent/session.py``). Everything ``cells.py`` guarantees holds cell by cell: no answer comes from another
process than the kernel, nor for a cell not sent; a kernel that ends ends the session (the record says why),
and so does a supervisor that ends.

The kernel keeps its ``__main__`` between cells: what a cell defines, imports or opens, the next one sees.
"""

from __future__ import annotations

import json
import os
import signal
from typing import NoReturn

from .cell_frames import END
from .cells import Relay, frame, start_kernel, supervise

SESSION_MAIN = "from codegym_sandbox.agent.session_main import main\n\nmain()\n"
_MAX_CELL = 64 << 20  # a cell's message, at most: the server refuses far smaller bodies


def read_message(fd: int) -> dict[str, object] | None:
    """The next message on ``fd``; None at its end."""
    head = b""
    while not head.endswith(b"\n"):
        part = os.read(fd, 1)
        if not part:
            return None
        head += part
        if len(head) > 20:
            raise ValueError("not a message")
    size = int(head)
    if not 0 <= size <= _MAX_CELL:
        raise ValueError("a message too large")
    body = bytearray()
    while len(body) < size:
        part = os.read(fd, min(size - len(body), 1 << 20))
        if not part:
            return None
        body += part
    job = json.loads(body)
    if not isinstance(job, dict):
        raise ValueError("not a message")
    return job


def main() -> NoReturn:
    """The session's supervisor: a cell per message on stdin, until its end or the kernel's."""
    pid, requests_w, answers, outputs = start_kernel()
    relay = Relay(outputs, 0)
    while (job := read_message(0)) is not None:
        relay.left = int(str(job.get("output_bytes") or 1 << 20))
        relay.cut = False
        stdin = job.get("stdin")
        cell = {
            "cells": [str(job.get("source") or "")],
            "cell_timeout": job.get("cell_timeout") or 0,
            "timer": False,  # the agent interrupts the cell, past its limit and the time it waited for a CPU
            "stdin": None if stdin is None else str(stdin),
        }
        sig = supervise(cell, pid, requests_w, answers, relay)
        if sig is not None:  # the kernel ended: so does the session, as its kernel did
            frame(END, 1, b"")
            if sig > 0:
                signal.signal(sig, signal.SIG_DFL)
                os.kill(os.getpid(), sig)
            os._exit(0)
    os._exit(0)
