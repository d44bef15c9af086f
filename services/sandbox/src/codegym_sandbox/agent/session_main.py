"""A session's program: its kernel, the run itself, kept between calls.

A session is one long run in its worker's box, of :data:`SESSION_MAIN`: the kernel of ``kernel.py``
(:func:`kernel.serve`), whose ``__main__`` lives between cells: what a cell defines, imports or opens, the next
one sees. The agent holds the other end of each of its channels (``session_record.py``): its stdout and stderr
(pipes the agent reads, as ``cells.py``'s supervisor reads a notebook kernel's), its requests (a pipe on
:data:`REQUESTS_FD`: one cell at a time) and its answers (a socket on :data:`ANSWERS_FD`, on which the agent
learns which process wrote each answer). Its stdin is ``/dev/null``: a cell reads the stdin it was given.

Like a notebook's kernel it imports nothing from where a program can write, and its channels are close-on-exec,
so a program a cell runs never holds them unless the cell hands them on (a process the kernel forks holds them:
nothing it writes passes for the kernel's answer, see ``session_record.py``). Unlike a notebook's kernel, which
holds a reward script's expected outputs, it stays dumpable: it holds nothing its own cells may not see, and the
box reads what its processes share (their proportional set sizes) only from processes that are.
"""

from __future__ import annotations

import os
import socket
from typing import NoReturn

from . import import_path, kernel

SESSION_MAIN = "from codegym_sandbox.agent.session_main import main\n\nmain()\n"
REQUESTS_FD = 3  # the cells, from the agent
ANSWERS_FD = 4  # the kernel's answers, to the agent
# The kernel's first word, before any cell: it runs, so its box has taken its command (and armed its parent-death
# signal): the agent may stop the session's processes from then on.
READY = b"ready\n"


def main() -> NoReturn:
    """The session's kernel: a cell per request, until the agent hangs up."""
    import_path.isolate()
    for fd in (REQUESTS_FD, ANSWERS_FD):
        os.set_inheritable(fd, False)  # the box wires a run's descriptors inheritable: these are not a program's
    os.write(ANSWERS_FD, READY)
    kernel.serve(REQUESTS_FD, socket.socket(fileno=ANSWERS_FD))
