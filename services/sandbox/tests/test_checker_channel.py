"""The channel between the checker and a program's process: answers read whole, in order, however the pipe splits
them, and a long one read in one pass (each part of it searched once)."""

from __future__ import annotations

import os
import threading

from codegym_sandbox.agent.plain_channel import Channel


def _written(answers: list[dict[str, object]]) -> Channel:
    """A checker's channel whose program's process wrote ``answers`` (a thread writes them: a pipe holds 64 KiB)."""
    read_end, write_end = os.pipe()
    checker, program = Channel(read_end, -1), Channel(-1, write_end)

    def write() -> None:
        for answer in answers:
            program.answer(answer)
        os.close(write_end)

    threading.Thread(target=write, daemon=True).start()
    return checker


def test_answers_are_read_whole_and_in_order_across_the_pipes_parts() -> None:
    long = "x" * (3 << 20) + "\n" + "y" * 70_000  # over many reads, a newline of its own inside (escaped)
    answers: list[dict[str, object]] = [
        {"value": 1},
        {"value": long},
        {"value": [2, 3]},
        {"value": "z" * 65_535},
        {"value": 4},
    ]
    checker = _written(answers)
    assert [checker.receive() for _ in answers] == answers
