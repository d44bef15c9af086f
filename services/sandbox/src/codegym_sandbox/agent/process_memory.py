"""A traced process's memory, read and written through ``/proc/PID/mem`` (``ptrace_calls.py``, ``kernel_copy.py``)."""

from __future__ import annotations

import errno
import os

from . import acting_ids


def open_memory(pid: int, flags: int) -> int:
    """``pid``'s memory, opened (``/proc/PID/mem``). A container's agent, root with its programs' file ids and
    no capability to pass over a file's mode, opens it with the file ids of its owner (the tracer's capability to
    trace is what the kernel asks of the rest)."""
    path = f"/proc/{pid}/mem"
    try:
        return os.open(path, flags | os.O_CLOEXEC)
    except PermissionError:
        if os.geteuid() != 0:
            raise
        info = os.stat(path)
        with acting_ids.files_as(info.st_uid, info.st_gid):
            return os.open(path, flags | os.O_CLOEXEC)


def read_memory(pid: int, address: int, size: int) -> bytes:
    fd = open_memory(pid, os.O_RDONLY)
    try:
        return os.pread(fd, size, address)
    finally:
        os.close(fd)


def write_memory(pid: int, address: int, data: bytes) -> None:
    fd = open_memory(pid, os.O_RDWR)
    try:
        if os.pwrite(fd, data, address) != len(data):
            raise OSError(errno.EIO, f"a short write into process {pid}")
    finally:
        os.close(fd)
