"""APPS: stdin/stdout problems, and call-based ones (``fn_name``), with difficulty labels.

The hub repository ``codeparrot/apps`` loads through a script (``apps.py``) that reads ``train.jsonl`` and
``test.jsonl`` at its root (5000 problems each); codegym reads those files. A row there has ``id``,
``question``, ``solutions`` and ``input_output`` (both JSON text), ``difficulty``, ``url`` and
``starter_code``. The script renames ``id`` to ``problem_id``: copies made through it name it so.
"""

from __future__ import annotations

from typing import Any

from .hub import HubFiles
from .model import Task, TaskKind
from .preludes import binds
from .rules import rule
from .stdio import LEETCODE_PRELUDE, as_text, json_field, method_assert, stdio_tests

DIFFICULTIES = ("introductory", "interview", "competition")
HUB = HubFiles("codeparrot/apps", ("{split}.jsonl",), ("train", "test"))


def _unwrap(expected: Any) -> Any:
    # APPS stores a call's expected value wrapped in a one-element list.
    return expected[0] if isinstance(expected, list) and len(expected) == 1 else expected


class APPSAdapter:
    """Rows of ``codeparrot/apps`` (``question``, ``input_output`` as JSON, ``starter_code``, ``difficulty``).

    Without ``fn_name`` the tests are stdin/stdout cases; with it they call the function, and a LeetCode-style
    ``class Solution`` starter makes them assert tests on a method. They compare as APPS's harness does
    (``tasks.rules``: tokens, numbers within np.allclose; Python's ``==`` for values), a stdin or method program
    after the harness's prelude (``tasks.preludes``). Rows without tests are skipped. ``max_tests`` caps the
    tests kept per problem.
    """

    dataset = "apps"  # its rule in ``tasks.rules``

    def __init__(self, *, max_tests: int | None = None) -> None:
        self.max_tests = max_tests

    def _io(self, sample: dict[str, Any]) -> dict[str, Any]:
        io = json_field(sample.get("input_output"), {})
        return io if isinstance(io, dict) else {}

    def _kind(self, sample: dict[str, Any]) -> TaskKind:
        fn = self._io(sample).get("fn_name")
        if not fn:
            return "stdio"
        return "assert" if "class Solution" in str(sample.get("starter_code") or "") else "call"

    def extract_tests(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        io = self._io(sample)
        inputs, outputs = io.get("inputs") or [], io.get("outputs") or []
        fn = io.get("fn_name")
        kind = self._kind(sample)
        if kind == "stdio":
            return stdio_tests(inputs, outputs, self.max_tests)
        pairs = list(zip(inputs, outputs, strict=False))[: self.max_tests]
        if kind == "call":
            return [{"call": list(i), "expected": _unwrap(o)} for i, o in pairs]
        by, fallback = rule(self.dataset).call_comparison, not binds(self.starter(kind), str(fn))
        return [
            {"assert_code": method_assert("Solution", str(fn), list(i), _unwrap(o), by, fallback=fallback)}
            for i, o in pairs
        ]

    def format_problem(self, sample: dict[str, Any]) -> str:
        return as_text(sample.get("question", "")).strip()

    def starter(self, kind: TaskKind) -> str:
        """What goes before a program of ``kind``: the harness's prelude (``tasks.preludes``), and LeetCode's
        imports before a method; nothing before a call test's function, looked up by its name."""
        if kind == "call":
            return ""
        return rule(self.dataset).prelude + (LEETCODE_PRELUDE if kind == "assert" else "")

    def task_id(self, sample: dict[str, Any], index: int) -> str:
        """``APPS/<problem id>``: ``id`` in the hub's files, ``problem_id`` in copies made by its script."""
        return f"APPS/{sample.get('problem_id', sample.get('id', index))}"

    def metadata(self, sample: dict[str, Any]) -> dict[str, Any]:
        """What a task keeps of the row besides its tests: the starter code shown, a reference solution."""
        solutions = json_field(sample.get("solutions"), [])
        return {
            **rule(self.dataset).metadata(),
            "starter_code": str(sample.get("starter_code") or ""),
            "canonical_solution": solutions[0] if isinstance(solutions, list) and solutions else "",
            "url": sample.get("url"),
        }

    def to_task(self, sample: dict[str, Any], index: int) -> Task | None:
        tests = self.extract_tests(sample)
        if not tests:
            return None
        kind = self._kind(sample)
        return Task(
            task_id=self.task_id(sample, index),
            prompt=self.format_problem(sample),
            kind=kind,
            tests=tests,
            entry_point=self._io(sample).get("fn_name") if kind != "stdio" else None,
            starter_code=self.starter(kind),
            difficulty=sample.get("difficulty"),
            metadata=self.metadata(sample),
        )
