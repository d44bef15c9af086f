"""Ids and capabilities a process of the agent acts with for a moment, root with others' ids: a container's agent.

In a container the agent is root with no capability but a few (``backends/containers.py``), and its file ids are
its programs' (``isolation.container_program_ids``): what it must reach as another user (the cgroups a server
binds, a copy's entries in ``/proc``, a user namespace its programs' user made) it reaches as that user, and
gives the ids back after.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

_libc = ctypes.CDLL(None, use_errno=True)
_P = ParamSpec("_P")
_R = TypeVar("_R")
_NONE = ctypes.c_uint(0xFFFFFFFF)  # no id: setfsuid and setfsgid answer the current one, changing nothing


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def act_as(uid: int, gid: int, keep: tuple[int, ...]) -> None:
    """Take ``uid``/``gid`` as the effective (and file-system) ids, real and saved ids left root's, with the
    capabilities ``keep`` effective again (a change of effective uid from 0 clears them; they stay permitted).
    What a container's root, which has no ``CAP_SYS_ADMIN``, acts with as the owner of a user namespace that
    user made: its id maps written with ``CAP_SETUID`` over the namespace's parent, and the namespace joined."""
    os.setresgid(-1, gid, -1)
    os.setresuid(-1, uid, -1)
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    _checked(_libc.capget(ctypes.byref(header), ctypes.byref(data)), "capget")
    for cap in keep:
        data[cap // 32].effective |= 1 << (cap % 32)
    _checked(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def give_up(cap: int) -> None:
    """Drop capability ``cap`` from this process's effective, permitted and inheritable sets, for good: what the
    agent held for its start alone (with ``no-new-privileges`` no exec gives it back, even to root's ids)."""
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    _checked(_libc.capget(ctypes.byref(header), ctypes.byref(data)), "capget")
    bit = ~(1 << (cap % 32)) & 0xFFFFFFFF
    data[cap // 32].effective &= bit
    data[cap // 32].permitted &= bit
    data[cap // 32].inheritable &= bit
    _checked(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


@contextlib.contextmanager
def files_as(uid: int, gid: int) -> Iterator[None]:
    """Within: file ids ``uid``/``gid``, where the caller is root with others (a container's agent, whose file ids
    are its programs': see ``isolation.container_program_ids``); given back after. Elsewhere nothing changes."""
    old_uid, old_gid = _libc.setfsuid(_NONE), _libc.setfsgid(_NONE)
    if (old_uid, old_gid) == (uid, gid) or old_uid == -1 or os.geteuid() != 0:
        yield
        return
    _libc.setfsgid(ctypes.c_uint(gid))
    _libc.setfsuid(ctypes.c_uint(uid))
    try:
        yield
    finally:
        _libc.setfsgid(ctypes.c_uint(old_gid))
        _libc.setfsuid(ctypes.c_uint(old_uid))


def root_files(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` run with root's file ids (:func:`files_as`): the cgroups a container's server binds for a
    session's copies are root's alone, out of its programs' reach."""

    @functools.wraps(function)
    def as_root(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with files_as(0, 0):
            return function(*args, **kwargs)

    return as_root


def in_child(work: Callable[[], None], failed: str) -> None:
    """Do ``work`` in a child process, and wait for it: what it takes there (ids, a namespace joined, which cannot be
    left) stays there. ``OSError(failed)`` where it did not end well."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError(failed)


def _checked(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
