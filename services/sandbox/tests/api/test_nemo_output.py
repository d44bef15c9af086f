"""The clean-up of a NeMo-Skills cell's streams (``api/nemo_output.tidy``): the same text as the plain, line by
line definition of it, in time linear in the text (it runs on the server's event loop)."""

from __future__ import annotations

import re
import time
import uuid

from codegym_sandbox.api.nemo_output import tidy
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_PROMPT = re.compile(r"^Out\[\d+\]:\s*")


def plain_tidy(text: str) -> str:
    """Their clean-up, line by line, as it reads: the reference ``tidy`` must equal."""
    lines = [_PROMPT.sub("", line) for line in _ANSI.sub("", text).split("\n")]
    lines = [line for line in lines if not line.strip().startswith("File <ipython-")]
    while lines and not lines[0].strip():
        lines.pop(0)
    left = "\n".join(lines).rstrip()
    return left + "\n" if left else ""


# What lines are made of where the clean-up has something to do: spaces of every kind (a line's, not a newline),
# prompts, cell headers and what only looks like them, colours.
_PIECES = ["\n", "\n", " ", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u3000", "x", "7", "Out[", "]:",
           "Out[3]:", "Out[12]: ", "Out[٣]:", "File <ipython-", "File <ipython-4-1a2b>, line 1", "  File <ipython-",
           "File", " <ipython-", "\x1b[31m", "\x1b[0m", "\x1b["]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_tidy_is_the_line_by_line_clean_up(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert tidy(text) == plain_tidy(text)


def test_examples_of_each_rule() -> None:
    assert tidy("\n\n  \n  lead\nOut[3]: 42\nFile <ipython-1-ab>, line 2\n  tail \n\n") == "  lead\n42\n  tail\n"
    assert tidy("File <ipython-1>\nFile <ipython-2>") == "" and tidy("a\nFile <ipython-1>\nFile <ipython-2>") == "a\n"
    assert tidy("\x1b[31mred\x1b[0m") == "red\n" and tidy(" \n\t\n") == ""


def test_a_cell_of_a_million_blank_lines_is_answered_at_once(client: TestClient) -> None:
    """A cell's stdout cleaned line by line, its leading blank lines taken off one at a time, cost the server time
    growing with the square of its lines, on its event loop: 400,000 blank lines held every request 21 s, and the
    8 MiB a cell may print would have held them for hours."""
    sid = str(uuid.uuid4())
    body = {"generated_code": "print('\\n' * 1_000_000 + 'x')", "std_input": "", "timeout": 10.0,
            "language": "ipython", "max_output_characters": 1000, "traceback_verbosity": "Plain"}  # fmt: skip
    try:
        started = time.monotonic()
        r = client.post("/execute", json=body, headers={"X-Session-ID": sid})
        assert r.status_code == 200 and r.json()["stdout"] == "x\n", r.text
        assert time.monotonic() - started < 10  # line by line: minutes
    finally:
        client.delete(f"/sessions/{sid}", headers={"X-Session-ID": sid})
