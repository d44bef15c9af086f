"""Whether a prompt writes out one of a task's tests: what ``Task.for_training`` counts as shown.

A test is shown where the prompt holds what a table of answers needs: its assert; its stdin and its expected
output; of a call (a call test, or the assert codegym writes from a dataset's call data: APPS's and
LiveCodeBench's LeetCode-style rows), its arguments and then its expected value, close together (an example:
``persistence(39) => 3``, or ``Input: nums = [2,7], target = 9`` and ``Output: [0,1]`` on the lines after).
Values are looked for as JSON and as Python write them, with either quote and however spaced around brackets and
commas, and never inside a longer number or word (``39`` is not in ``390``).
"""

from __future__ import annotations

import json
import re
from contextlib import suppress
from functools import lru_cache
from typing import Any

from .stdio import method_call_data

# The lines an example spans: its input, its output, and a line between (``Explanation:`` comes after).
EXAMPLE_LINES = 3
_SPACED = re.compile(r"\s*([\[\](){},:])\s*")


def written_out(test: dict[str, Any], prompt: str, function: str | None = None) -> bool:
    """Whether ``test`` (of a task whose entry point is ``function``) is written out in ``prompt``."""
    text = _flat(prompt)  # whitespace aside
    if test.get("assert_code") is not None:
        data = method_call_data(str(test["assert_code"]))
        return _shown(test["assert_code"], text) or (data is not None and call_written_out(*data, prompt, function))
    if test.get("expected_stdout") is not None:  # a test without input whose output the task names is the task
        stdin = test.get("stdin") or ""
        return bool(stdin.strip()) and _shown(stdin, text) and _shown(test["expected_stdout"], text)
    if isinstance(test.get("call"), list) and "expected" in test:
        return call_written_out(test["call"], test["expected"], prompt, function)
    return False


def _shown(value: object, text: str) -> bool:
    written = " ".join(str(value).split())
    return bool(written) and written in text


def call_written_out(args: list[Any], expected: Any, prompt: str, function: str | None = None) -> bool:
    """Whether a call with ``args`` whose answer is ``expected`` is an example of ``prompt``: within
    ``EXAMPLE_LINES`` lines, each argument in order and then the expected value (a call without arguments:
    ``function()`` and then the value).

    >>> call_written_out([39], 3, "For example:\\n  persistence(39) => 3  # 3*9 = 27")
    True
    >>> call_written_out([390], 3, "persistence(39) => 3")
    False
    """
    wanted = [_pattern(value) for value in args] if args else [_pattern(None, f"{function}()")]
    answer = _pattern(expected)
    if answer is None or any(p is None for p in wanted) or not answer.search(_normal_prompt(prompt)):
        return False
    for window in _windows(prompt):
        at = 0
        for pattern in [*wanted, answer]:
            found = pattern.search(window, at) if pattern is not None else None
            if found is None:
                break
            at = found.end()
        else:
            return True
    return False


# A prompt is read once for all its tests (a task has hundreds): these keep the last prompts' readings.
@lru_cache(maxsize=8)
def _flat(prompt: str) -> str:
    return " ".join(prompt.split())


@lru_cache(maxsize=8)
def _windows(prompt: str) -> tuple[str, ...]:
    """Each line of ``prompt`` with the lines of its example after it, normalised (:func:`_normal`)."""
    lines = prompt.splitlines()
    return tuple(_normal(" ".join(lines[start : start + EXAMPLE_LINES])) for start in range(len(lines)))


@lru_cache(maxsize=8)
def _normal_prompt(prompt: str) -> str:
    return _normal(prompt)


def _normal(text: str) -> str:
    """``text`` with one kind of quote, and no space around brackets, commas and colons."""
    return _SPACED.sub(r"\1", text.replace("'", '"'))


def _pattern(value: Any, written: str | None = None) -> re.Pattern[str] | None:
    """The ways ``value`` is written (JSON's, Python's), never inside a longer number or word; None for a value
    that cannot be written."""
    forms = {written} if written is not None else set()
    if written is None:
        with suppress(TypeError, ValueError, RecursionError):
            forms.add(json.dumps(value, ensure_ascii=False))
        with suppress(TypeError, ValueError, RecursionError):
            forms.add(repr(value))
    forms = {_normal(form) for form in forms if form.strip()}
    if not forms:
        return None
    return re.compile("|".join(_bounded(form) for form in sorted(forms, key=len, reverse=True)))


def _bounded(form: str) -> str:
    """A pattern of ``form`` that a number or word it begins or ends with may not run on from."""
    before = r"(?<![\w.])" if form[0].isalnum() or form[0] in "-." else ""
    after = r"(?!\w|\.\d)" if form[-1].isalnum() else ""
    return f"{before}{re.escape(form)}{after}"
