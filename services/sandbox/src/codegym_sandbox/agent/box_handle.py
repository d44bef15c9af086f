"""A handle on the box process (see ``box.py``): the agent starts it, resets it, and replaces it when it dies.

Every program is forked from the box, and sees what the box's memory held when it was forked: its frames (a
Python program can walk up its stack), its objects and its heap. A box forked from the agent after it has
served requests would hold their data (inputs, outputs, reports). So the agent forks, before it reads any
request, a process that makes every box (:class:`_Maker`); it holds nothing but the worker's configuration.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import traceback

from . import box, linux
from .box_protocol import BoxConfig
from .protocol import wipe


class BoxHandle:
    """Handle on the box process, created (and recreated when it dies) by the agent."""

    def __init__(self, config: BoxConfig) -> None:
        self.config = config
        # In a container the agent kills every process but itself when a box dies (see kill): there the
        # agent forks boxes itself.
        self.maker = _Maker(config) if config["namespaces"] else None
        self.pid = 0
        self.ctl: socket.socket | None = None
        self.scratch = -1  # descriptor of the box's scratch directory, renewed with every reset
        self.dirty = False
        # A run's report said it left more of the kernel's memory than may stay (box._given_back): the box is
        # reset before the answer, and the reset says whether the worker must still be replaced (retire).
        self.left = self.retire = False
        # What the series left open after the last exchange runs (files, argv, env, limits), or empty:
        # a later exchange that runs exactly the same goes on with it (see _run_tests).
        self.series = bytearray()
        self.spawn()

    def end_series(self) -> None:
        wipe(self.series)
        self.series = bytearray()

    def spawn(self) -> None:
        self.end_series()
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if self.maker is None or not self.maker.make(child):
            _fork_box(child, self.config, parent)
        child.close()
        self.ctl = parent
        # Two messages arrive in either order: the box's pid from the middle process, and the box's ready.
        hello: dict[str, object] = {}
        parent.settimeout(30)
        for _ in range(2):
            msg, fds, _, _ = socket.recv_fds(parent, 1 << 16, 1)
            got = json.loads(msg or b"{}")
            if type(got) is dict:
                hello.update(got)
            if fds:
                self._set_scratch(fds[0])
        parent.settimeout(None)
        pid = hello.get("pid")  # box_protocol.Hello
        if type(pid) is not int or pid <= 0 or hello.get("op") != "ready" or self.scratch < 0:
            raise RuntimeError("the box did not start")
        if type(floor := hello.get("floor_kb")) is int and "memory_floor_kb" not in self.config:
            self.config["memory_floor_kb"] = floor  # every later box of the worker's (box_protocol.Ready)
        self.pid = pid
        self.dirty = False
        # What an earlier box was to check again at its reset is now left unchecked: the worker goes.
        self.retire, self.left = self.retire or self.left or hello.get("retire") is True, False

    def _set_scratch(self, fd: int) -> None:
        if self.scratch >= 0:
            os.close(self.scratch)
        self.scratch = fd

    def alive(self) -> bool:
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return pid == 0

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        if not self.config["namespaces"]:
            # No pid namespace dies with the box here: as the container's init, take down everything else.
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
            box.reap_all()
        if self.ctl is not None:
            self.ctl.close()
        # The box's scratch mount lives on while this descriptor does, and what its files hold in the kernel's
        # memory (extended attributes, inodes) with it: the next box would take it for its supervisors' own.
        self._set_scratch(-1)

    def respawn(self) -> None:
        self.kill()
        self.spawn()

    def reset(self) -> None:
        """Fresh scratch space and IPC namespace for the next run; a box that cannot do it is replaced."""
        self.end_series()  # the box ends a test series at any command that is not one of its tests
        if not self.dirty:
            return
        # The old scratch goes now: held here, its mount (and what its files hold of the kernel's memory) would
        # outlive the reset, and the box, which asks its memory cgroup after the reset, would give that back by a
        # reclaim of the whole cgroup, the host's page cache of every shared file its runs read first with it.
        self._set_scratch(-1)
        try:
            assert self.ctl is not None
            self.ctl.sendall(b'{"op":"reset"}')
            msg, fds, _, _ = socket.recv_fds(self.ctl, 1 << 16, 1)
            ready = json.loads(msg or b"{}")
            if type(ready) is not dict or ready.get("op") != "ready" or not fds:
                raise OSError("box did not reset")
            self._set_scratch(fds[0])
            self.dirty = self.left = False
            self.retire = self.retire or ready.get("retire") is True
        except (OSError, ValueError):
            self.respawn()

    def stop_run(self) -> None:
        """Ask the box to kill everything in its namespace."""
        assert self.ctl is not None
        with contextlib.suppress(OSError):
            self.ctl.sendall(b'{"op":"kill"}')


def _fork_box(child: socket.socket, config: BoxConfig, close: socket.socket | None = None) -> None:
    """Fork the box, which serves on ``child``, through a middle process that enters its namespaces and exits
    at once: the box is then the child of the nearest subreaper, the agent."""
    middle = os.fork()
    if middle == 0:
        code = 0
        try:
            if close is not None:
                close.close()
            if config["namespaces"]:
                linux.unshare(linux.CLONE_NEWPID | linux.CLONE_NEWNS | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS)
            pid = os.fork()
            if pid == 0:
                try:
                    box.serve(child, config)
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(1)
            child.send(json.dumps({"pid": pid}).encode())
        except BaseException as exc:
            sys.stderr.write(f"agent: cannot start the box: {exc}\n")
            code = 1
        finally:
            os._exit(code)
    os.waitpid(middle, 0)


class _Maker:
    """A process forked from the agent before it has read any request: it forks every box (see the module's
    docstring), and never sees a request, an output or a report. It ends with the agent."""

    def __init__(self, config: BoxConfig) -> None:
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            try:
                here.close()
                linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)
                while True:
                    msg, fds, _, _ = socket.recv_fds(there, 16, 1)
                    if not msg or not fds:
                        break
                    child = socket.socket(fileno=fds[0])
                    _fork_box(child, config, there)
                    child.close()
                    there.send(b"made")
            finally:
                os._exit(0)
        there.close()
        self.sock = here

    def make(self, child: socket.socket) -> bool:
        """Have a box forked that serves on ``child``; whether it was (else the agent forks it itself)."""
        try:
            socket.send_fds(self.sock, [b"make"], [child.fileno()])
            return self.sock.recv(16) == b"made"
        except OSError:
            return False
