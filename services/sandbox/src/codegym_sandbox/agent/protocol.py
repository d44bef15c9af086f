"""Frames exchanged between the server and an agent, and between the agent and its box.

A frame is a 4-byte big-endian length, a JSON header of that length, then the blobs the header lists
(``"blobs": [len, ...]``) back to back. Bulk data (code, stdin, output) travels as raw bytes in blobs so it
is never JSON-escaped, and so the agent can wipe its copy after use.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

MAX_HEADER = 1 << 20
MAX_BLOB = 1 << 30
# A run's wall-clock limit does not count the time its processes waited for a CPU that other runs held
# (see ``loop._stretched``), up to this many times the limit: the server waits that much longer for it.
WAIT_CREDIT = 2.0
# How a run's launch error starts when ``execve`` of the file to run failed (the box's other launch errors
# are its own failures): where that file is the program's own (its compiled executable) and the kernel found
# it no executable, the program's fault, not the sandbox's (see ``verdicts.run_verdict``).
EXEC_FAILED = "exec failed: "


class ProtocolError(Exception):
    """The peer sent something that is not a frame, or went away mid-frame."""


def encode_frame(header: dict[str, Any], blobs: list[bytes] | tuple[bytes, ...] = ()) -> bytes:
    header = dict(header, blobs=[len(b) for b in blobs])
    raw = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([struct.pack(">I", len(raw)), raw, *blobs])


def decode_header(raw: bytes) -> dict[str, Any]:
    header = json.loads(raw)
    if not isinstance(header, dict):
        raise ProtocolError("frame header is not an object")
    sizes = header.get("blobs", [])
    if not isinstance(sizes, list) or not all(isinstance(n, int) and 0 <= n <= MAX_BLOB for n in sizes):
        raise ProtocolError("bad blob sizes")
    return header


def _read_exact(fd: int, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise ProtocolError("peer closed the channel")
        got += k
    return buf


def read_frame(fd: int) -> tuple[dict[str, Any], list[bytearray]]:
    """Read one frame from a blocking file descriptor; blobs come back as bytearrays the caller can wipe."""
    (size,) = struct.unpack(">I", _read_exact(fd, 4))
    if size > MAX_HEADER:
        raise ProtocolError(f"frame header of {size} bytes")
    header = decode_header(bytes(_read_exact(fd, size)))
    return header, [_read_exact(fd, n) for n in header.get("blobs", [])]


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def wipe(buf: bytearray) -> None:
    """Overwrite a buffer in place, so its bytes do not survive in memory a later fork inherits."""
    buf[:] = bytes(len(buf))
