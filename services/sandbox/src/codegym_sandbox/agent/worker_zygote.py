"""Agents forked from one warm process, so that the local backend can start many workers quickly.

Starting an agent as a new interpreter costs about 40 ms of CPU, three quarters of it the interpreter's
start and the agent's imports. When runs that sleep or wait on I/O make the pool lend slots, a hundred
agents may be wanted at once; on a small machine that would take seconds while the runs wait. The zygote
is a process that has imported the agent and does nothing else: for each worker the server sends it the
two ends of the new agent's channel (SCM_RIGHTS), it forks, and the child becomes the agent on them, as
``python -m codegym_sandbox.agent`` would on its stdin and stdout. The child holds nothing of the server's:
the zygote never reads a request, and it is started with the agents' own environment.

Protocol on the zygote's socket (SOCK_SEQPACKET): the server sends ``b"fork"`` with two descriptors (the
agent's stdin, its stdout); the zygote answers with the child's pid as 4 bytes, or 0 when it could not fork.
The zygote ends when the server closes the socket, or dies with the server (PDEATHSIG), and its children
then see end-of-file on their channel (or are killed the same way).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import sys

from . import devices, linux, loop

_HELD: list[int] = []  # the device locks this zygote holds (see devices.hold_locks)


def serve(sock: socket.socket, server_pid: int) -> None:
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != server_pid:
        return  # the server died before we asked to die with it (it may be pid 1 itself, in a container)
    # The kernel reaps the zygote's children: the server watches each agent by a pidfd of its own.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    # Root makes each worker device nodes of its own; otherwise the host's are shared, and held locked here.
    _HELD[:] = [] if os.geteuid() == 0 else devices.hold_locks()
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, 2)
        except OSError:
            return
        if not msg:
            return
        if msg != b"fork" or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            sock.send(struct.pack("<i", 0))
            continue
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid == 0:
            try:
                _become_agent(sock, fds)
            finally:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        sock.send(struct.pack("<i", max(pid, 0)))


def _become_agent(sock: socket.socket, fds: list[int]) -> None:
    """In the child: the channel on fd 0 and 1, everything else of the zygote's closed, then the agent."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the agent waits for its own children
    sock.close()
    for fd in _HELD:  # a run that got one could let go of the locks for every worker
        os.close(fd)
    os.dup2(fds[0], 0)
    os.dup2(fds[1], 1)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    code = 0
    try:
        loop.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])), int(sys.argv[2]))
