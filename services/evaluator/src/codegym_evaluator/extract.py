"""Code from a model's completion: fenced blocks, stop sequences, and the sanitiser for function tasks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .sanitize import sanitize

if TYPE_CHECKING:
    from .tasks import Task

# A closed fence: ```lang (anything else on the line) newline, body, ``` (on its own line, or right after the
# code: small models often close the fence on the last line of code).
_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)\n?[ \t]*```", re.DOTALL | re.MULTILINE)
_OPEN_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*)\Z", re.DOTALL | re.MULTILINE)

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
    blocks = [(m.group(1), m.group(2)) for m in _FENCE.finditer(completion)]
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
    elif (m := _OPEN_FENCE.search(completion)) is not None:
        code = m.group(2)
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
