"""A session's cell as the agent records it: what the kernel wrote while the cell ran, and its answer.

The kernel is the session's run (``session_main.py``); the agent holds the other end of its every channel and
records each cell exactly as ``cells.py``'s supervisor records a one-cell notebook job (the frames of
``cell_frames``: output, the kernel's answer or why it ended, then ``end``), so the server reads both alike.
The agent is outside the box: no process of the session can reach what records it.

What it guarantees, as ``cells.py`` does: the output is the bytes the kernel and its children wrote on the
kernel's stdout and stderr, up to the cell's cap; an answer counts only when the kernel itself wrote it (each
read of the answers socket names its writer: ``SO_PASSCRED``), for this cell (its nonce: an answer written
ahead by an earlier cell is not this one's), and when it is exactly an answer (``cell_frames.KernelAnswer``, at
most the output cap and :data:`ANSWER_OVERHEAD` bytes). Anything else ends the record, and the session with
it: an answer before a cell was sent, from another process, or malformed; a kernel that ends or closes its
channel. What it does not: the cells share one interpreter, so a cell can change what the kernel answers for
later cells of its session.
"""

from __future__ import annotations

import json

from .cell_frames import CELL, CUT, DEAD, END, answer_for

# An answer's bytes at most, past the cell's output cap, to which the kernel cuts the value and error it answers
# (``cell_frames.within``): its request and the JSON around them. Past it, the answer is not one.
ANSWER_OVERHEAD = 4 << 20
_HEAD_MAX = 20  # an answer's head: its length in digits, at most


class CellRecord:
    """One cell's record (``record``), as the frames of a one-cell notebook job."""

    def __init__(self, kernel: int, nonce: str, cap: int) -> None:
        self.kernel, self.nonce, self.left = kernel, nonce, cap
        self.answer_max = cap + ANSWER_OVERHEAD
        self.record = bytearray()
        self.cut = False
        self.answered = False  # the kernel's answer is recorded
        self.dead = False  # the record says why the kernel stopped answering
        self._buffer = bytearray()  # the answer read so far
        self._size = -1  # its body's length, once its head is read
        self._body = 0  # where its body starts

    @property
    def ended(self) -> bool:
        return self.answered or self.dead

    def _frame(self, kind: bytes, cell: int, data: bytes) -> None:
        self.record += b"%s %d %d\n" % (kind, cell, len(data))
        self.record += data

    def output(self, kind: bytes, data: bytes) -> None:
        """Bytes the kernel's stdout (``OUT``) or stderr (``ERR``) held, kept up to the cell's cap."""
        if self.ended:
            return  # the record is closed: nothing is added after its end
        kept = data[: max(self.left, 0)]
        self.left -= len(data)
        if kept:
            self._frame(kind, 0, kept)
        if len(kept) < len(data) and not self.cut:
            self.cut = True
            self._frame(CUT, 0, b"")

    def end(self, why: str) -> None:
        """The kernel stopped answering (``why``): the record ends here, and the session with it."""
        if not self.ended:
            self.dead = True
            self._frame(DEAD, 0, why.encode())
            self._frame(END, 1, b"")

    def answer(self, data: bytes, sender: int) -> bool:
        """Bytes read from the answers socket, and who wrote them; True once the answer is whole (recorded, or
        the record ended: see :attr:`answered`). The caller passes on the output still in the pipes first.
        Each byte is looked at once: an answer sent a byte at a time costs the agent no more than one sent whole."""
        if self.ended:
            return True
        if sender != self.kernel:
            self.end("an answer came from another process than the kernel")
            return True
        self._buffer += data
        if self._size < 0:  # its head (``b"<length>\n"``, as ``kernel.message`` writes it) is not read yet
            newline = self._buffer.find(b"\n", 0, _HEAD_MAX + 1)
            if newline < 0:
                if len(self._buffer) <= _HEAD_MAX:
                    return False
                self.end("the kernel's answer is not one")
                return True
            head = bytes(self._buffer[:newline])
            if not head.isdigit() or int(head) > self.answer_max:
                self.end("the kernel's answer is not one")
                return True
            self._size, self._body = int(head), newline + 1
        if len(self._buffer) - self._body < self._size:
            return False
        body = bytes(self._buffer[self._body : self._body + self._size])
        try:
            checked = answer_for(json.loads(body), 0, self.nonce)
        except (ValueError, RecursionError):
            checked = None
        if checked is None or len(self._buffer) > self._body + self._size:  # nothing may follow it
            self.end("the kernel's answer is not one")
            return True
        self._frame(CELL, 0, json.dumps(checked).encode())
        self._frame(END, 1, b"")
        self.answered = True
        return True
