"""The Python code of a dataset row's prompt, whatever shape TRL gives it (``trl_rows``): where a row's tests find
the helpers they use (``tasks.prompt_helpers``), which must never be the program's.

A prompt is the stub itself (HumanEval's), or prose around it: fenced, unfenced after an instruction, indented as
Markdown code, one fence for a helper and another for the stub, an example's fence after it; in a chat, any
message may hold it (the system message too). Every piece that parses is taken, in order.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Mapping
from typing import Any

from codegym_evaluator import python_syntax

from .extract import fenced_blocks
from .messages import message_text

__all__ = ["code_in_prose", "defines", "prompt_code", "prompt_text"]


def prompt_code(prompt: Any, entry_point: str = "") -> str:
    """The Python code of a row's prompt, wherever it lies: the text itself where it parses (a completion-style
    prompt such as HumanEval's), else every fenced block that parses and the code among the prose (an instruction,
    then the stub unfenced or indented as Markdown code); of a chat prompt, every system and user message's, in
    order (the stub may be the system message's; a message's content may be a list of text parts). Empty when
    there is none.

    Whatever the prompt's shape, its helpers must be found: the tests of a row that finds none call whatever the
    program binds under a helper's name (``tasks.prompt_helpers``), and a completion that redefines the helper
    beside a wrong answer passes. Nor may they be code of the model's: an assistant's or a tool's message (an
    earlier attempt in a repair chat) is never read, and the piece that defines ``entry_point`` (the stub) comes
    last, so that its helpers are the ones the tests take over any other piece's of the same name (a few-shot
    example's ``poly``)."""
    if isinstance(prompt, list):
        texts = [message_text(m.get("content")) for m in prompt if isinstance(m, Mapping) and m.get("role") in _READ]
    else:
        texts = [prompt]
    pieces = [code for text in texts if isinstance(text, str) and (code := _code_of(text))]
    return _joined(sorted(pieces, key=lambda piece: defines(piece, entry_point)))


_READ = ("system", "user", "developer")  # the task's words; an assistant's and a tool's are the model's


def prompt_text(prompt: Any) -> str:
    """What a row's prompt shows the model of its task: the text itself, or of a chat prompt every system and
    user message's text, one after another (where an example may be printed); empty for anything else."""
    if isinstance(prompt, list):
        texts = [message_text(m.get("content")) for m in prompt if isinstance(m, Mapping) and m.get("role") in _READ]
        return "\n".join(texts)
    return prompt if isinstance(prompt, str) else ""


def defines(code: str, name: str) -> bool:
    """Whether ``code`` (which parses) defines ``name`` at its top level."""
    if not name:
        return False
    nodes = python_syntax.parse(code).body
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == name for n in nodes)


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
_ASSIGNED = re.compile(r"[A-Za-z_]\w*\s*(?::[^=]*)?=(?!=)")  # a name bound at the top level: ``poly = lambda ...``
_TRIES = 20  # parses of one block, each cut before the line its error names
_REGION = 300  # lines of one block at most: a stub and its helpers, not a book
# What one text's search may parse in all, in characters: a prompt is the dataset's, but each completion reads it
# again, and a text of many lines that start code and never parse (4,000 decorators) was seconds of it.
_PARSED = 1 << 17


def code_in_prose(text: str) -> str:
    """The blocks of Python code in ``text``, a prose prompt's unfenced code: from each line that opens a
    statement of its own (``def``, ``class``, an import, a decorator), at the left margin or indented as Markdown
    code (the block's lines as far as they keep that indentation, taken without it), the most lines that parse,
    cut before the line a syntax error names (prose after the code: "Your code should pass these tests:")."""
    return "\n\n".join(_prose_blocks(text))


def _prose_blocks(text: str) -> list[str]:
    lines = text.split("\n")
    blocks, i, budget = [], 0, [_PARSED]
    while i < len(lines) and budget[0] > 0:
        body = lines[i].lstrip(" \t")
        indent = lines[i][: len(lines[i]) - len(body)]
        taken = 0
        if body.startswith(_CODE_STARTS) or _ASSIGNED.match(body):
            region = [lines[i][len(indent) :]]
            for line in lines[i + 1 : i + _REGION]:
                if line.strip() and not line.startswith(indent):
                    break
                region.append(line[len(indent) :])
            taken = _parsed_lines(region, budget)
        if taken:
            blocks.append("\n".join(lines[j][len(indent) :] for j in range(i, i + taken)).strip("\n"))
            i += taken
        else:
            i += 1
    return blocks


def _parsed_lines(region: list[str], budget: list[int]) -> int:
    """How many of ``region``'s first lines parse, cut before each syntax error's line (0: none do), what each
    parse reads taken from ``budget``."""
    end = len(region)
    for _ in range(_TRIES):
        if budget[0] <= 0:
            return 0
        code = "\n".join(region[:end])
        try:
            python_syntax.parse(code)
            budget[0] -= len(code)
            return end
        except SyntaxError as exc:
            budget[0] -= sum(len(line) + 1 for line in region[: exc.lineno or 1])  # what it read to its error
            end = min((exc.lineno or 1) - 1, end - 1)
        except (ValueError, RecursionError, MemoryError):
            return 0
        if end <= 0:
            return 0
    return 0
