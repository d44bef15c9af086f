"""Code from a model's completion: fenced blocks, stop sequences, and the sanitiser for function tasks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .sanitize import sanitize

if TYPE_CHECKING:
    from .tasks import Task

# Fences are read line by line. A line of ``` with a language tag (and anything after it) opens a block; a
# line of ``` without one closes it, and so does ``` at the end of a line of code (small models often close
# the fence on the last line). A tagged ``` line never closes a block: small models often write an empty ```
# line before ```python, which then opens the block in its place instead of pairing every later fence the
# wrong way round.
_OPENER = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)")
_CLOSER = re.compile(r"^[ \t]*```(?![ \t]*[\w+#.-])")


def fenced_blocks(completion: str) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
    """(tag, body) of every closed block, and of the block still open at the end (a truncated answer)."""
    closed: list[tuple[str, str]] = []
    tag: str | None = None
    body: list[str] = []
    for line in completion.split("\n"):
        if tag is None:
            if (m := _OPENER.match(line)) is not None:
                tag, body = m.group(1), []
        elif _CLOSER.match(line):
            closed.append((tag, "\n".join(body)))
            tag = None
        elif (m := _OPENER.match(line)) is not None and m.group(1) and not any(b.strip() for b in body):
            tag, body = m.group(1), []
        elif line.rstrip().endswith("```"):
            body.append(line.rstrip()[:-3])
            closed.append((tag, "\n".join(body)))
            tag = None
        else:
            body.append(line)
    return closed, (tag, "\n".join(body)) if tag is not None else None


_ALIASES = {
    "python": {"python", "py", "python3", "py3"},
    "cpp": {"cpp", "c++", "cc", "cxx"},
    "javascript": {"javascript", "js", "nodejs", "node"},
    "bash": {"bash", "sh", "shell"},
}


@dataclass(frozen=True)
class Extracted:
    """The code to run, and whether it came from a well-formed fenced block (the format bonus)."""

    code: str
    fenced: bool


def _speaks(tag: str, language: str) -> bool:
    return tag.lower() in _ALIASES.get(language, {language})


def extract_code(completion: str, task: Task | None = None, *, which: Literal["first", "last"] = "last") -> Extracted:
    """The program in ``completion``.

    A closed fenced block wins (among several: those in the task's language, then those that define the
    task's entry point; then the ``first`` or ``last``). An unclosed fence (a truncated answer) gives its
    body, not fenced. Otherwise the completion is the code as it is (a base model's continuation).
    For call and assert tasks the code is then sanitised: top-level lines that would run at import (demo
    prints, self-tests, ``input()``) are dropped, keeping the entry point and what it needs.

    >>> extract_code("Here:\\n```python\\nprint(1)\\n```\\n")
    Extracted(code='print(1)', fenced=True)
    """
    language = task.language if task is not None else "python"
    blocks, still_open = fenced_blocks(completion)
    code: str
    fenced = False
    if blocks:
        fenced = True
        candidates = [b for b in blocks if _speaks(b[0], language)] or [b for b in blocks if not b[0]] or blocks
        entry = task.entry_point if task is not None else None
        if entry:
            defining = [b for b in candidates if re.search(rf"\b(def|class)\s+{re.escape(entry)}\b", b[1])]
            candidates = defining or candidates
        code = candidates[0][1] if which == "first" else candidates[-1][1]
    elif still_open is not None:
        code = still_open[1]
    else:
        code = completion
    if task is not None and task.kind in ("call", "assert") and task.entry_point and task.language == "python":
        code = sanitize(code, task.entry_point)
    return Extracted(code=code, fenced=fenced)


def truncate_at_stop(completion: str, stops: Sequence[str]) -> str:
    """``completion`` cut at the earliest stop sequence (servers that ignore ``stop`` still end right).

    >>> truncate_at_stop("    return 1\\ndef f():", ["\\ndef "])
    '    return 1'
    """
    cut = len(completion)
    for stop in stops:
        if stop and (i := completion.find(stop)) != -1:
            cut = min(cut, i)
    return completion[:cut]
