"""An assert run: its main script, and its stdin: the program's length in bytes (a line), the program, then
the tests.

The program's process reads the program alone (:func:`read_program`, exactly to its end), and the checker
the tests after it; a test series' checker gets a run's whole stdin at once (:func:`split_stdin`).
"""

from __future__ import annotations

import os

from . import program_bytes

ASSERT_MAIN = "from codegym_sandbox.agent.assert_runner import main\n\nmain()\n"


def assert_stdin(program: str, tests: str) -> bytes:
    """What :data:`ASSERT_MAIN` reads on stdin to judge ``program`` against ``tests``."""
    code = program_bytes.encode(program)
    return f"{len(code)}\n".encode() + code + tests.encode("utf-8", "surrogatepass")


def _read_exactly(fd: int, size: int) -> bytes:
    parts = []
    while size > 0:
        part = os.read(fd, min(size, 1 << 20))
        if not part:
            raise EOFError("the program on stdin is cut short")
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


def read_program(fd: int) -> str:
    """The program, read from ``fd`` exactly to its end: a buffered read would take the tests with it."""
    size = b""
    while not size.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            raise EOFError("no program on stdin")
        size += byte
    return program_bytes.decode(_read_exactly(fd, int(size)))


def split_stdin(stdin: bytes) -> tuple[str, str]:
    """The program and the tests, from a run's whole stdin (the program's length in bytes, a line first)."""
    size, _, rest = stdin.partition(b"\n")
    return program_bytes.decode(rest[: int(size)]), rest[int(size) :].decode("utf-8", "surrogatepass")


def read_bytes(fd: int) -> bytes:
    parts = []
    while part := os.read(fd, 1 << 20):
        parts.append(part)
    return b"".join(parts)


def read_text(fd: int) -> str:
    return read_bytes(fd).decode("utf-8", "surrogatepass")
