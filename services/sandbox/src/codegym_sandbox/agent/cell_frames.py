"""The record of a notebook run (``cells.py``): the frames its supervisor writes, and how the server reads them.

The supervisor's stdout is a sequence of frames, ``b"<kind> <cell> <length>\\n"`` and ``length`` bytes: what
the kernel wrote on its stdout (``out``) and stderr (``err``) while a cell ran, the kernel's answer for a
cell (``cell``: a :class:`CellAnswer`, as JSON), that output past the job's cap was dropped (``cut``), that
the kernel ended before it answered (``dead``: why), and that every cell was answered (``end``).

The supervisor runs as the program does: every answer is read against its type (``wire_schema.conform``), the
kernel's by the supervisor (:class:`KernelAnswer`), the supervisor's by the server (:class:`CellAnswer`). One
that is not of it ends the record there, as a kernel that stopped answering does (the run is Failed, never SE).
"""

from __future__ import annotations

import json
import socket
import struct
from dataclasses import dataclass, field
from typing import TypedDict

from .wire_schema import conform

OUT, ERR, CELL, CUT, DEAD, END = b"out", b"err", b"cell", b"cut", b"dead", b"end"
_UCRED = struct.Struct("3i")  # pid, uid, gid
_CHUNK = 1 << 16


class CellError(TypedDict):
    """An exception a cell raised, as a notebook shows it."""

    ename: str
    evalue: str
    traceback: list[str]


class CellAnswer(TypedDict):
    """What a cell gave: the value of its last expression (by MIME type), and its error; whether they were cut to
    the cell's output limit (:func:`within`)."""

    display: list[dict[str, str]]
    error: list[CellError]
    cut: bool


class KernelRequest(TypedDict):
    """A cell, as the supervisor sends it to the kernel (the nonce: an answer written ahead cannot be its)."""

    n: int
    nonce: str
    source: str | None
    cell_timeout: float
    # Whether the kernel interrupts the cell itself at ``cell_timeout`` (a notebook's); a session's cell is
    # interrupted by its agent instead, which credits the time the cell waited for a CPU (``session.py``).
    timer: bool
    stdin: str | None  # what the cell reads on sys.stdin (a session's cell may have one); None: nothing
    answer_bytes: int  # the most the value and error may take in the answer (:func:`within`): the output limit


class KernelAnswer(KernelRequest, CellAnswer):
    """The kernel's answer for a cell: its request (without the source) and what the cell gave."""


def read_kernel_answer(answer: object) -> KernelAnswer:
    """The kernel's answer, if it is one; else :class:`~.wire_schema.Malformed`."""
    return conform(answer, KernelAnswer)


def answer_for(answer: object, n: int, nonce: str) -> CellAnswer | None:
    """The kernel's answer for cell ``n`` sent with ``nonce``, as plain representable data; None when it is not
    one (what reads it, a notebook's supervisor or a session's agent, then ends the record)."""
    try:
        checked = read_kernel_answer(answer)  # exactly a KernelAnswer: its keys, each of its type
    except ValueError:
        return None
    if checked["n"] != n or checked["nonce"] != nonce:
        return None
    return {
        "display": [{representable(k): representable(v) for k, v in d.items()} for d in checked["display"]],
        "error": [
            {
                "ename": representable(e["ename"]),
                "evalue": representable(e["evalue"]),
                "traceback": [representable(line) for line in e["traceback"]],
            }
            for e in checked["error"]
        ],
        "cut": checked["cut"],
    }


def receive_answer(answers: socket.socket) -> tuple[bytes, int]:
    """What the next writer sent on the kernel's answers socket, and its pid, which the kernel vouches for
    (``SO_PASSCRED``): a stream socket never joins the bytes of two senders in one read, so a process the kernel
    forked (or any other that holds the socket) cannot pass its bytes off as the kernel's."""
    data, ancillary, _, _ = answers.recvmsg(_CHUNK, socket.CMSG_SPACE(_UCRED.size))
    pid = 0
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= _UCRED.size:
            pid = _UCRED.unpack_from(payload)[0]
    return data, pid


def representable(text: str) -> str:
    """``text`` with every lone surrogate (which UTF-8, and so no JSON answer, can carry) written as its
    escape, ``\\ud800``."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


CUT_LINE = "[... lines cut: past the output limit]\n"


def _size(text: str) -> int:
    """What ``text`` takes in an answer: its JSON (ASCII: a character takes up to 12 bytes), a separator."""
    return len(json.dumps(text)) - 1


_PIECE = 1 << 16  # characters encoded at once as a text is measured


def cut_to(text: str, room: int) -> str:
    """The longest head of ``text`` that takes at most ``room`` bytes of an answer, found in time linear in the
    head: its pieces' sizes add up (JSON escapes each character alone), so the text is measured piece by piece,
    and only the piece that passes the room is searched. Cut by shrinking the whole head and measuring it again,
    a value of astral characters then ASCII took a hundred measures of 8 MiB, on the server's event loop."""
    if len(text) * 12 + 1 <= room:
        return text
    used = _size("")
    for at in range(0, len(text), _PIECE):
        piece = text[at : at + _PIECE]
        size = _size(piece) - _size("")
        if used + size > room:
            fits, passes = 0, len(piece)  # the most of it that fits: a head of ``fits`` does, of ``passes`` not
            while passes - fits > 1:
                mid = (fits + passes) // 2
                fits, passes = (mid, passes) if used + _size(piece[:mid]) - _size("") <= room else (fits, mid)
            return text[: at + fits]
        used += size
    return text


class _Room:
    def __init__(self, size: int) -> None:
        self.left, self.cut = size, False

    def take(self, text: str, share: float = 1.0) -> str:
        kept = cut_to(text, int(self.left * share))
        self.cut = self.cut or len(kept) < len(text)
        self.left -= _size(kept)
        return kept

    def traceback(self, lines: list[str]) -> list[str]:
        """The first line and the last ones that fit (those nearest the error), with :data:`CUT_LINE` between."""
        if not lines:
            return []
        first = self.take(lines[0])
        self.left -= _size(CUT_LINE)  # kept for the mark, whether it is needed or not
        tail: list[str] = []
        for line in reversed(lines[1:]):
            if _size(line) > self.left:
                if not tail:
                    tail.append(self.take(line))  # the error's own line: its head
                self.cut = True
                break
            tail.append(self.take(line))
        tail.reverse()
        return [first, CUT_LINE, *tail] if len(tail) < len(lines) - 1 else [first, *tail]


def within(display: list[dict[str, str]], error: list[CellError], room: int) -> CellAnswer:
    """A cell's value and error cut to ``room`` bytes of an answer in all: the value first, then the error's type
    and message (half of what is left at most: the traceback's last line says them again), then its traceback.
    A cell's value or error is its output: a large one is cut as its prints are, never the end of its session."""
    left = _Room(room)
    shown = [{mime: left.take(text) for mime, text in d.items()} for d in display]
    errors: list[CellError] = []
    for e in error:
        ename = left.take(e["ename"], 0.5)
        evalue = left.take(e["evalue"], 0.5)
        errors.append({"ename": ename, "evalue": evalue, "traceback": left.traceback(e["traceback"])})
    return {"display": shown, "error": errors, "cut": left.cut}


@dataclass
class CellRecord:
    """What one cell did, as the supervisor recorded it."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    display: list[dict[str, str]] = field(default_factory=list)
    error: list[CellError] = field(default_factory=list)
    answered: bool = False
    cut: bool = False  # the kernel cut its value or error to the output limit


@dataclass
class Record:
    """A run of :data:`CELLS_MAIN`, read back from its stdout."""

    cells: list[CellRecord] = field(default_factory=list)
    finished: bool = False  # every cell was sent and answered
    ended: str | None = None  # why the kernel stopped before that
    cut: bool = False  # output past the job's cap was dropped
    stdout: bytearray = field(default_factory=bytearray)  # every cell's, and what came after the last
    stderr: bytearray = field(default_factory=bytearray)


def read_record(data: bytes, cells: int) -> Record:
    """The supervisor's frames (``data``: the run's stdout, perhaps cut short) for a job of ``cells`` cells: a
    record for the first, and for each other a frame names (a job's cells are many more than those that ran, when
    it stopped early: a record made for each it names held the server's memory by the request's size)."""
    record = Record(cells=[CellRecord() for _ in range(min(cells, 1))])
    view = memoryview(data)
    while view:
        end = bytes(view[:64]).find(b"\n")
        try:
            kind, cell_text, size_text = bytes(view[:end]).split(b" ") if end > 0 else (b"", b"", b"")
            cell, size = int(cell_text), int(size_text)
        except ValueError:
            break
        body = bytes(view[end + 1 : end + 1 + size])
        if len(body) < size or not 0 <= cell <= cells:
            break
        view = view[end + 1 + size :]
        while cell < cells and len(record.cells) <= cell:
            record.cells.append(CellRecord())
        one = record.cells[cell] if cell < cells else None
        if kind in (OUT, ERR):
            (record.stdout if kind == OUT else record.stderr).extend(body)
            if one is not None:
                (one.stdout if kind == OUT else one.stderr).extend(body)
        elif kind == CELL and one is not None:
            try:
                answer = conform(json.loads(body), CellAnswer)  # Malformed: a ValueError
            except (ValueError, RecursionError):
                break
            one.display, one.error, one.answered, one.cut = answer["display"], answer["error"], True, answer["cut"]
            record.cut = record.cut or one.cut
        elif kind == CUT:
            record.cut = True
        elif kind == DEAD:
            record.ended = representable(body.decode("utf-8", "replace"))
        elif kind == END and cell == cells:
            record.finished = len(record.cells) == cells and all(c.answered for c in record.cells)
    return record
