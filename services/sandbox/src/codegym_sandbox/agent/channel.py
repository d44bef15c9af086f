"""The agent's channel to its server: its standard input and output, or a socket the server bound for it.

A container's standard streams pass through its engine: the daemon and its shim copy every frame twice each
way, which cost a cell about half a millisecond. So the docker and podman backends bind a socket of their own for
each agent, in a directory no program's user may enter, mounted into the container, and name it in
:data:`CHANNEL_ENV`; the agent connects to it and takes it for its standard input and output. Where it cannot (an
engine that maps the container's root to another host user, say), it writes :data:`NO_CHANNEL` on its standard
output, and its channel stays its standard streams: the server reads which (``backends/agent_channel.py``).
"""

from __future__ import annotations

import os
import socket

from .protocol import write_all

CHANNEL_ENV = "CODEGYM_AGENT_CHANNEL"
NO_CHANNEL = b"\0"  # before the server's first frame, which the agent answers first: nothing else comes then


def take() -> None:
    """Make the socket :data:`CHANNEL_ENV` names (if it names one) the agent's fds 0 and 1, or say that it could
    not be. The name is taken out of the agent's environment, so no program is given it; a process forked from
    the agent still finds it in its initial environment (``/proc/self/environ``), beside the container's other
    variables, as a path its mount table shows anyway."""
    path = os.environ.pop(CHANNEL_ENV, "")
    if not path:
        return
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        write_all(1, NO_CHANNEL)
        return
    os.dup2(sock.fileno(), 0)
    os.dup2(sock.fileno(), 1)
    sock.close()
