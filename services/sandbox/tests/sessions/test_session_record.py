"""A cell's record as the agent writes it (``agent/session_record.py``), read back as the server reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from codegym_sandbox.agent import cell_frames as cut_frames
from codegym_sandbox.agent.cell_frames import CUT_LINE, ERR, OUT, CellError, read_record, within
from codegym_sandbox.agent.kernel import message
from codegym_sandbox.agent.session_record import ANSWER_OVERHEAD, CellRecord
from hypothesis import given, settings
from hypothesis import strategies as st

KERNEL, NONCE = 4242, "ab" * 16


def _answer(**changes: Any) -> bytes:
    answer = {"n": 0, "nonce": NONCE, "source": None, "cell_timeout": 5.0, "timer": False, "stdin": None}
    answer |= {"answer_bytes": 100, "display": [{"text/plain": "42"}], "error": [], "cut": False}
    return message({**answer, **changes})


def test_an_answer_in_pieces_after_the_output_is_the_cells() -> None:
    record = CellRecord(KERNEL, NONCE, cap=100)
    record.output(OUT, b"hello\n")
    record.output(ERR, b"warn\n")
    whole = _answer()
    assert not record.answer(whole[:3], KERNEL) and not record.answer(whole[3:-1], KERNEL)
    assert record.answer(whole[-1:], KERNEL) and record.answered and not record.dead
    read = read_record(bytes(record.record), 1)
    assert read.finished and read.ended is None and not read.cut
    assert read.cells[0].stdout == b"hello\n" and read.cells[0].stderr == b"warn\n"
    assert read.cells[0].display == [{"text/plain": "42"}]


def test_an_answer_a_byte_at_a_time_is_whole_at_its_last_byte() -> None:
    record = CellRecord(KERNEL, NONCE, cap=100)
    whole = _answer()
    assert not any(record.answer(whole[i : i + 1], KERNEL) for i in range(len(whole) - 1))
    assert record.answer(whole[-1:], KERNEL) and record.answered


def test_output_past_the_cap_is_cut() -> None:
    record = CellRecord(KERNEL, NONCE, cap=4)
    record.output(OUT, b"abc")
    record.output(OUT, b"defgh")
    record.answer(_answer(), KERNEL)
    read = read_record(bytes(record.record), 1)
    assert read.cut and read.cells[0].stdout == b"abcd" and read.finished


def _ended(record: CellRecord) -> str:
    read = read_record(bytes(record.record), 1)
    assert record.dead and not record.answered and not read.finished and not read.cells[0].answered
    return read.ended or ""


def test_an_answer_from_another_process_ends_the_record() -> None:
    record = CellRecord(KERNEL, NONCE, cap=100)
    assert record.answer(_answer(display=[{"text/plain": "'forged'"}]), KERNEL + 1)
    assert "another process" in _ended(record)
    record.answer(_answer(), KERNEL)  # nothing after the end counts
    assert not read_record(bytes(record.record), 1).cells[0].answered


def test_what_is_not_exactly_this_cells_answer_ends_the_record() -> None:
    for data in (
        _answer(nonce="cd" * 16),  # an earlier cell's, written ahead
        _answer(n=1),
        _answer(extra=1),
        _answer(display="42"),
        _answer() + b"1\n",  # a second answer behind it
        b"2\n{}",
        b"x" * 21,  # no head
        b"-1\n",
        b"0_5\n",  # int() takes it; a length is digits
        b" 5\n",
        b"3\n[1,",
        message([[[[]]]]),
    ):
        record = CellRecord(KERNEL, NONCE, cap=100)
        assert record.answer(data, KERNEL), data
        assert "not one" in _ended(record), data


def test_an_answer_past_its_bound_is_refused_before_it_is_read() -> None:
    record = CellRecord(KERNEL, NONCE, cap=100)
    assert record.answer(b"%d\n" % (100 + ANSWER_OVERHEAD + 1), KERNEL)
    assert "not one" in _ended(record)
    record = CellRecord(KERNEL, NONCE, cap=100)
    assert not record.answer(b"%d\n" % (100 + ANSWER_OVERHEAD), KERNEL)  # within it: it may still come


def test_a_deep_answer_ends_the_record_and_not_the_agent() -> None:
    record = CellRecord(KERNEL, NONCE, cap=1 << 20)
    deep = b"[" * 200_000 + b"]" * 200_000
    assert record.answer(b"%d\n" % len(deep) + deep, KERNEL)
    assert "not one" in _ended(record)


def test_a_kernel_that_ends_ends_the_record_once() -> None:
    record = CellRecord(KERNEL, NONCE, cap=100)
    record.output(OUT, b"last words")
    record.end("the kernel was killed by signal 9")
    record.end("again")
    read = read_record(bytes(record.record), 1)
    assert read.ended == "the kernel was killed by signal 9" and read.cells[0].stdout == b"last words"
    assert json.dumps(read.ended)


def _answer_size(answer: dict[str, Any]) -> int:
    texts = [t for d in answer["display"] for t in d.values()]
    for e in answer["error"]:
        texts += [e["ename"], e["evalue"], *e["traceback"]]
    return sum(len(json.dumps(t)) - 1 for t in texts)


def test_a_value_is_cut_to_its_room_as_it_travels() -> None:
    # Astral characters take 12 bytes each in an answer (two escapes): the room is the answer's, not a count.
    for text in ("x" * 5000, "\U0001f600" * 5000, "\x00" * 5000):
        answer = within([{"text/plain": text}], [], 1000)
        kept = answer["display"][0]["text/plain"]
        assert answer["cut"] and text.startswith(kept) and 900 < _answer_size(dict(answer)) <= 1000
    assert within([{"text/plain": "small"}], [], 1000) == {
        "display": [{"text/plain": "small"}],
        "error": [],
        "cut": False,
    }


def test_a_long_traceback_keeps_its_first_line_and_the_lines_nearest_the_error() -> None:
    lines = ["Traceback (most recent call last):\n"] + [f'  File "<cell 1>", line {i}, in f\n' for i in range(500)]
    error: CellError = {"ename": "ValueError", "evalue": "v" * 3000, "traceback": [*lines, "ValueError: " + "v" * 3000]}
    answer = within([], [error], 2000)
    kept = answer["error"][0]
    assert answer["cut"] and _answer_size(dict(answer)) <= 2000
    assert kept["evalue"].startswith("vvv") and len(kept["evalue"]) < 1000  # half of the room at most
    assert kept["traceback"][0] == lines[0] and kept["traceback"][1] == CUT_LINE
    assert kept["traceback"][-1].startswith("ValueError: vvv")  # the error's own line, its head
    short: CellError = {"ename": "E", "evalue": "m", "traceback": lines[:3]}
    assert within([], [short], 2000) == {"display": [], "error": [short], "cut": False}


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from(["a", "\U0001f600", "\x00", '"', "\\", "\u00e9", "\n", "\ud800"]), max_size=80),
       st.integers(0, 500))  # fmt: skip
def test_a_cut_keeps_the_longest_head_that_fits(text: str, room: int) -> None:
    kept = cut_frames.cut_to(text, room)
    assert text.startswith(kept)
    if kept != text:
        assert (not kept or cut_frames._size(kept) <= room) and cut_frames._size(text[: len(kept) + 1]) > room


def test_a_cut_measures_its_text_once_not_again_for_each_try(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cut by shrinking the whole head and measuring it again, a value of astral characters then ASCII took some
    hundred measures of 8 MiB each on the server's event loop (11 times the CPU of the cell that made it)."""
    measured: list[int] = []
    size = cut_frames._size
    monkeypatch.setattr(cut_frames, "_size", lambda text: measured.append(len(text)) or size(text))
    text = "\U0001f600" * 690_000 + "a" * 100_000
    kept = cut_frames.cut_to(text, 7_000_000)
    assert size(kept) <= 7_000_000 < size(text[: len(kept) + 1])
    assert sum(measured) < 2 * len(text), (len(measured), sum(measured))
