"""The channel between the two processes of an assert run (``plain_data``): the checker writes with marshal, the
program's process answers JSON lines, which the checker reads with a parser that no input can make run code.
"""

from __future__ import annotations

import json
import marshal
import os
import struct
from typing import Any

from . import value_depth

# --- the channel between the two processes -----------------------------------------------------------
# The checker writes with marshal (the program's process reads trusted data: marshal is fast, and touches
# little of the interpreter, which in a forked process means few pages copied); the program's process writes
# JSON lines, which the checker reads with a parser that no input can make run code. Both are made once,
# when the box loads this module, never in a run.
_decode = value_depth.deep(json.JSONDecoder().decode)


def _not_plain(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not plain data")


_encode = value_depth.deep(
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _not_plain, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
)
_LENGTH = struct.Struct("<I")


class Channel:
    """A pair of pipe ends between the checker and the program's process, read straight from the descriptor.

    The checker calls :meth:`ask` and :meth:`tell`; the program's process :meth:`request` and :meth:`answer`.
    """

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self.buffer = b""

    def _write(self, data: bytes) -> None:
        while data:
            data = data[os.write(self.write_fd, data) :]

    def _read(self) -> bytes:
        part = os.read(self.read_fd, 1 << 16) if self.read_fd >= 0 else b""
        if not part:
            raise EOFError
        return part

    def _fill(self) -> None:
        self.buffer += self._read()

    def tell(self, message: Any) -> None:
        """In the checker: send a message (plain data, or code) to the program's process."""
        data = marshal.dumps(message)
        self._write(_LENGTH.pack(len(data)) + data)

    def request(self) -> Any:
        """In the program's process: the checker's next message."""
        while len(self.buffer) < 4:
            self._fill()
        size = _LENGTH.unpack_from(self.buffer)[0] + 4
        while len(self.buffer) < size:
            self._fill()
        data, self.buffer = self.buffer[4:size], self.buffer[size:]
        return marshal.loads(data)

    def answer(self, message: Any) -> None:
        """In the program's process: send an answer (plain data only) to the checker."""
        self._write("".join(_encode(message, 0)).encode("utf-8", "surrogatepass") + b"\n")

    def ask(self, message: Any) -> Any:
        """In the checker: send a message, and read the answer (which nothing in it can make run code)."""
        self.tell(message)
        return self.receive()

    def receive(self) -> Any:
        """In the checker: the program's process's next answer."""
        end = self.buffer.find(b"\n")
        if end < 0:  # read on to the line's end, each part searched once and all joined once (a long line: linear)
            parts, at = [self.buffer], -1
            while at < 0:
                parts.append(self._read())
                at = parts[-1].find(b"\n")
            self.buffer = b"".join(parts)
            end = len(self.buffer) - len(parts[-1]) + at
        line, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
        return _decode(line.decode("utf-8", "surrogatepass"))

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            if fd >= 0:
                os.close(fd)
        self.read_fd = self.write_fd = -1
