"""The device nodes a local worker shows its programs (``runtime.DEVICES``), and the locks on them.

A lock (``flock``, ``fcntl``) lives on an inode. Nodes that every worker binds from the host would let a
run's lock on ``/dev/null`` be seen by a run on another worker: a channel between runs. With root, each
worker makes nodes of its own (:func:`make_own`); without it, the worker zygote holds every kind of lock on
the host's for as long as the server runs (:func:`hold_locks`), so that their lock state carries nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import struct
import sys

from . import linux, runtime

F_OFD_SETLK = 37  # open file description locks (Linux 3.15): not in Python's fcntl before 3.12


def make_own() -> None:
    """Device nodes of this worker's own in a mount namespace of its own, over ``/dev``, where the root's
    devices are bound from (``runtime.DEVICES``). The worker's root holds overlays of the directories it shows
    for the same reason (``runtime._layer``), but a node can only be made with root on the host, before the
    user namespace (there, mounts are ``nodev`` and ``mknod`` refused). Root that cannot ``mknod`` (a
    container without ``CAP_MKNOD``) binds the host's nodes, unheld: there the channel stays.
    """
    nodes = {name: os.stat(f"/dev/{name}") for name in runtime.DEVICES if os.path.exists(f"/dev/{name}")}
    linux.unshare(linux.CLONE_NEWNS)
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    linux.mount("tmpfs", "/dev", "tmpfs", linux.MS_NOSUID | linux.MS_NOEXEC, "mode=0755,size=4k")
    try:
        for name, st in nodes.items():
            os.mknod(f"/dev/{name}", st.st_mode, st.st_rdev)
            os.chmod(f"/dev/{name}", stat.S_IMODE(st.st_mode))
    except OSError as exc:  # root without CAP_MKNOD (in a container): the host's nodes, not held locked
        sys.stderr.write(f"agent: cannot make device nodes ({exc}): the host's are bound\n")
        linux.umount("/dev")


def hold_locks() -> list[int]:
    """Hold every kind of lock on the host's device nodes that workers bind (``runtime.DEVICES``), for as long
    as the returned descriptors stay open: where the server is not root, workers cannot make nodes of their
    own (see :func:`make_own`), and a lock a run took on ``/dev/null`` would be seen by a run on another
    worker. Held here, every lock any run tries there fails the same way, whatever other runs do: its state
    carries nothing. (A program that waits for such a lock waits until its deadline.)"""
    held = []
    for name in runtime.DEVICES:
        try:
            fd = os.open(f"/dev/{name}", os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue  # one that cannot be opened here (no terminal: /dev/tty) cannot be by a run either
        # A BSD lock, and a write lock on all of it: an open file description's, which POSIX locks conflict
        # with as well, and which (unlike a POSIX lock) no other close of the file by this process lets go.
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, F_OFD_SETLK, struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        held.append(fd)
    return held
