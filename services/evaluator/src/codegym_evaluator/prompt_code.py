"""The Python code of a dataset row's prompt, whatever shape TRL gives it (``trl_rows``): where a row's tests find
the helpers they use (``tasks.prompt_helpers``), which must never be the program's.

A prompt is the stub itself (HumanEval's), or prose around it: fenced, unfenced after an instruction, indented as
Markdown code, one fence for a helper and another for the stub, an example's fence after it; in a chat, any
message may hold it (the system message too). Every piece that parses is taken, in order.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any

from codegym_evaluator import python_syntax

from .extract import fenced_blocks

__all__ = ["code_in_prose", "prompt_code"]


def prompt_code(prompt: Any) -> str:
    """The Python code of a row's prompt, wherever it lies: the text itself where it parses (a completion-style
    prompt such as HumanEval's), else every fenced block that parses and the code among the prose (an instruction,
    then the stub unfenced or indented as Markdown code); of a chat prompt, every message's, in order (the stub may
    be the system message's). Empty when there is none.

    Whatever the prompt's shape, its helpers must be found: the tests of a row that finds none call whatever the
    program binds under a helper's name (``tasks.prompt_helpers``), and a completion that redefines the helper
    beside a wrong answer passes."""
    texts = [m.get("content") for m in prompt if isinstance(m, Mapping)] if isinstance(prompt, list) else [prompt]
    return _joined([code for text in texts if isinstance(text, str) and (code := _code_of(text))])


_FUTURE = re.compile(r"^from __future__ import .*$", re.MULTILINE)


def _joined(pieces: list[str]) -> str:
    """Pieces of code, each of which parses, as one text that does: a ``__future__`` import may only begin one."""
    if len(pieces) > 1:
        pieces = [_FUTURE.sub("", piece) for piece in pieces]
    return "\n\n".join(pieces)


def _code_of(text: str) -> str:
    if not text.strip():
        return ""
    try:
        python_syntax.parse(text)
        return text
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        pass
    prose = _prose_blocks(text)  # a fenced block's top-level code too: its fences end it
    fenced = []
    for _, body in fenced_blocks(text)[0]:
        with contextlib.suppress(SyntaxError, ValueError, RecursionError, MemoryError):
            python_syntax.parse(body)
            if body.strip() and not any(body.strip() in block for block in prose):
                fenced.append(body.strip("\n"))  # one that holds more than definitions (a constant's assignment)
    return _joined(fenced + prose)


_CODE_STARTS = ("def ", "async def ", "class ", "import ", "from ", "@")
_TRIES = 20  # parses of one block, each cut before the line its error names


def code_in_prose(text: str) -> str:
    """The blocks of Python code in ``text``, a prose prompt's unfenced code: from each line that opens a
    statement of its own (``def``, ``class``, an import, a decorator), at the left margin or indented as Markdown
    code (the block's lines as far as they keep that indentation, taken without it), the most lines that parse,
    cut before the line a syntax error names (prose after the code: "Your code should pass these tests:")."""
    return "\n\n".join(_prose_blocks(text))


def _prose_blocks(text: str) -> list[str]:
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        body = lines[i].lstrip(" \t")
        indent = lines[i][: len(lines[i]) - len(body)]
        taken = 0
        if body.startswith(_CODE_STARTS):
            region = [lines[i][len(indent) :]]
            for line in lines[i + 1 :]:
                if line.strip() and not line.startswith(indent):
                    break
                region.append(line[len(indent) :])
            taken = _parsed_lines(region)
        if taken:
            blocks.append("\n".join(lines[j][len(indent) :] for j in range(i, i + taken)).strip("\n"))
            i += taken
        else:
            i += 1
    return blocks


def _parsed_lines(region: list[str]) -> int:
    """How many of ``region``'s first lines parse, cut before each syntax error's line (0: none do)."""
    end = len(region)
    for _ in range(_TRIES):
        try:
            python_syntax.parse("\n".join(region[:end]))
            return end
        except SyntaxError as exc:
            end = min((exc.lineno or 1) - 1, end - 1)
        except (ValueError, RecursionError, MemoryError):
            return 0
        if end <= 0:
            return 0
    return 0
