"""The tests of a TRL dataset row, read from the columns TRL hands a reward (see ``trl_reward`` for the formats).

Each row's tests come out in the native API's shape; Python assert tests come with the helpers of the row's
prompt that they use (``tasks.prompt_helpers``), so a completion cannot rebind what the tests call. A row's
tests compare by the rule of the dataset its columns come from (``tasks.rules``): ``verification_info`` is
open-r1's, ``input_output`` APPS's (TACO's is the same), read as its adapter reads it (a ``class Solution``
starter, in the ``starter_code`` column or the prompt, makes assert tests on the method; a stdin or method
program runs after the harness's prelude), ``tests``/``test_list`` MBPP's (``test_imports`` and
``test_setup_code`` before every assert, as ``MBPPAdapter`` puts them). ``split_row`` reads one row
(``trl_env``'s ``reset``) with its public tests apart, where the data has them (CodeContests, LiveCodeBench).
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from codegym_evaluator import python_syntax

from .prompt_code import defines, prompt_code, prompt_text
from .tasks import Task
from .tasks.apps import APPSAdapter
from .tasks.code_contests import CodeContestsAdapter
from .tasks.livecodebench import LiveCodeBenchAdapter
from .tasks.model import TaskKind
from .tasks.prompt_helpers import with_prompt_helpers
from .tasks.rules import JudgingRule, rule


@dataclass(frozen=True)
class RowTests:
    """The tests of one dataset row, in the native API's shape."""

    language: str
    tests: tuple[Mapping[str, Any], ...]
    function: str | None = None
    dataset: str = "codegym"  # whose rule its tests compare by (``tasks.rules``)
    # The prompt's standard-library imports, which a program completing it may rely on (LeetCode's
    # ``from typing import *``): put before every program, as the library's tasks put their starter code.
    prelude: str = ""
    entry_point: str | None = None  # the function an assert row's tests call (the ``entry_point`` column)
    # The prompt, where it is Python that defines the entry point as a whole (HumanEval's stub): a base model's
    # completion continues it (TRL's prompt and completion are one text), so its answer is the two together.
    stub: str = ""

    @property
    def rule(self) -> JudgingRule:
        return rule(self.dataset)

    def key(self) -> str:
        fields = [self.language, self.tests, self.function, self.dataset, self.prelude, self.entry_point, self.stub]
        return json.dumps(fields, sort_keys=True, default=str)

    def answer(self, completion: str) -> str:
        """The text a completion's program is extracted from: after the stub it continues where the row has
        one and the completion does not write the entry point itself (a function body), as a library task's
        program follows its starter code; else the completion as it is."""
        if not self.stub or not self.entry_point or _writes(completion, self.entry_point):
            return completion
        return self.stub + ("" if self.stub.endswith("\n") else "\n") + completion

    def task(self, name: str) -> Task:
        """The row as a task, for the scoring path evaluations and the trainer's reward share; ``ValueError``
        for a row without tests."""
        kind: TaskKind = (
            "call" if self.function else "assert" if any("assert_code" in t for t in self.tests) else "stdio"
        )
        tests = [dict(t) for t in self.tests]
        entry_point = self.function or self.entry_point
        meta = self.rule.metadata()
        # The prompt's imports first (a ``__future__`` one must open the file), then what the dataset's adapter
        # puts before a program of this kind (APPS's harness prelude): one reading of a row, whatever the door.
        starter = self.prelude + (APPSAdapter().starter(kind) if self.dataset == "apps" else "")
        return Task(name, "", kind, tests, entry_point, starter, language=self.language, metadata=meta)


def row_tests(
    columns: Mapping[str, Sequence[Any]], i: int, default_language: str = "python", prompt: Any = None
) -> RowTests:
    """The tests of row ``i`` from TRL's column keyword arguments (each a list, one value per completion);
    its Python assert tests with the helpers of ``prompt`` (TRL's prompt of that row) that they use, when the
    row names its ``entry_point``."""
    row = _row_tests(columns, i, default_language, prompt)
    entry = columns.get("entry_point")
    entry_point = str(entry[i]) if entry is not None and i < len(entry) and entry[i] else row.entry_point
    if row.language not in ("python", "py", "python3"):
        return row
    # The entry point is the row's whatever its prompt holds: extraction prefers the block that defines it.
    row = replace(row, entry_point=entry_point)
    code = prompt_code(prompt, entry_point or "")
    if not code:
        return row
    row = replace(row, prelude=standard_imports(code))
    # Without the entry point the function to complete cannot be told from a helper: no helpers then (a stub
    # is never taken for one either, see ``tasks.prompt_helpers``).
    if not entry_point:
        return row
    tests = tuple(
        {**t, "assert_code": with_prompt_helpers(code, entry_point, str(t["assert_code"]))} if "assert_code" in t else t
        for t in row.tests
    )
    stub = prompt if isinstance(prompt, str) and code == prompt and defines(code, entry_point) else ""
    return replace(row, tests=tests, stub=stub)


def _writes(completion: str, name: str) -> bool:
    """Whether a completion defines ``name`` anywhere (in a fenced block or not), as extraction looks for it."""
    return re.search(rf"\b(def|class)\s+{re.escape(name)}\b", completion) is not None


def standard_imports(code: str) -> str:
    """The top-level imports of ``code`` (a prompt's) that name only standard-library modules, as source lines:
    what a program completing the prompt may take to be there. Another module's may not be installed where the
    program runs, and an example's ``import pandas`` would fail every program."""
    try:
        nodes = python_syntax.parse(code).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        nodes = []  # a stub without a body: its import lines one by one
        for line in code.splitlines():
            if line.startswith(("import ", "from ")):
                with contextlib.suppress(SyntaxError, ValueError):
                    nodes += python_syntax.parse(line).body
    kept = []
    for node in nodes:
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            modules = [node.module]
        else:
            continue
        if all(m.split(".")[0] in sys.stdlib_module_names for m in modules):
            kept.append(ast.unparse(node))
    return "".join(f"{line}\n" for line in kept)


def _row_tests(columns: Mapping[str, Sequence[Any]], i: int, default_language: str, prompt: Any = None) -> RowTests:

    def col(name: str) -> Any:
        values = columns.get(name)
        return values[i] if values is not None and i < len(values) else None

    language = col("language") or default_language
    info = _json(col("verification_info"))
    if isinstance(info, Mapping):
        language = info.get("language") or language
        cases = info.get("test_cases") or []
        fn = info.get("fn_name")
        cases = [_case(c, i, "verification_info", ("input",), ("output",)) for c in cases]
        if fn:
            calls = tuple(_call(stdin, expected, wrapped=False) for stdin, expected in cases)
            return RowTests(language, calls, fn, "open-r1")
        return RowTests(language, tuple(_stdio(stdin, expected) for stdin, expected in cases), dataset="open-r1")
    io = _json(col("input_output"))
    if isinstance(io, Mapping):
        inputs, outputs = io.get("inputs") or [], io.get("outputs") or []
        if len(inputs) != len(outputs):
            # zip would drop the tests past the shorter list, or pair an input with no expected output
            raise ValueError(f"row {i}: input_output has {len(inputs)} inputs but {len(outputs)} outputs")
        fn = io.get("fn_name")
        starter = str(col("starter_code") or "") or prompt_text(prompt)
        if fn and "class Solution" in starter:
            # A LeetCode-style problem: assert tests on ``Solution().<fn_name>``, as its adapter reads it.
            tests = APPSAdapter().extract_tests({"input_output": io, "starter_code": "class Solution"})
            return RowTests(language, tuple(tests), dataset="apps", entry_point=str(fn))
        if fn:
            calls = tuple(_call(a, e, wrapped=True) for a, e in zip(inputs, outputs, strict=False))
            return RowTests(language, calls, fn, "apps")
        stdio = tuple(_stdio(a, e) for a, e in zip(inputs, outputs, strict=False))
        return RowTests(language, stdio, dataset="apps")
    tests = _json(col("tests")) if col("tests") is not None else col("test_list")
    if tests is not None:
        # What MBPP's adapter puts before every assert: the sanitized split's imports, then the setup code.
        imports = col("test_imports")
        imports = [imports] if isinstance(imports, str) else list(imports or [])
        setup = "\n".join([*map(str, imports), str(col("test_setup_code") or "")]).strip()
        entry = col("entry_point")
        if isinstance(tests, str):
            if uncalled_check(tests) and not entry:
                raise ValueError(
                    f"row {i}: its tests define check(candidate) but never call it, and the row has no "
                    "entry_point column to call it with: they could not fail"
                )
            code = f"{setup}\n{tests}" + (f"\ncheck({entry})" if entry and "def check(" in tests else "")
            return RowTests(language, ({"assert_code": code},), dataset="mbpp")
        out: list[Mapping[str, Any]] = []
        for t in tests:
            if isinstance(t, Mapping):
                out.append(_stdio(*_case(t, i, "tests", ("input", "stdin"), ("output", "expected_stdout"))))
            else:
                out.append({"assert_code": f"{setup}\n{t}" if setup else str(t)})
        return RowTests(language, tuple(out), dataset="mbpp")
    raise ValueError(
        f"row {i} has no tests: give it a verification_info, input_output, tests or test_list column "
        f"(it has: {', '.join(sorted(columns)) or 'no columns'})"
    )


def _case(case: Any, i: int, column: str, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> tuple[Any, Any]:
    """A test case's input and expected value under the first of their names it has. A case without an
    expected value is refused: taken as empty (or None), it would pass a program that prints nothing."""
    if not isinstance(case, Mapping):
        raise ValueError(f"row {i}: a test case of {column} is {type(case).__name__}, not an object")
    expected = next((name for name in outputs if name in case), None)
    if expected is None:
        raise ValueError(
            f"row {i}: a test case of {column} has no expected value under {' or '.join(map(repr, outputs))} "
            f"(its keys: {', '.join(map(repr, case)) or 'none'})"
        )
    stdin = next((case[name] for name in inputs if name in case), None)
    return stdin, case[expected]


def uncalled_check(tests: str) -> bool:
    """Whether assert code defines ``check`` (HumanEval's form) and never calls it: such tests pass anything."""
    try:
        tree = python_syntax.parse(tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False  # the sandbox judges what does not parse
    defines = any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body)
    calls = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "check" for n in ast.walk(tree)
    )
    return defines and not calls


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _lines(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value) + "\n"
    return "" if value is None else str(value)


def _stdio(stdin: Any, expected: Any) -> dict[str, Any]:
    return {"stdin": _lines(stdin), "expected_stdout": _lines(expected)}


def _call(args: Any, expected: Any, wrapped: bool) -> dict[str, Any]:
    args = _json(args)
    expected = _json(expected)
    if wrapped and isinstance(expected, list) and len(expected) == 1:
        expected = expected[0]
    return {"call": args if isinstance(args, list) else [args], "expected": expected}


def split_row(
    row: Mapping[str, Any], public: int, default_language: str = "python"
) -> tuple[Task, list[dict[str, Any]]]:
    """One dataset row's task (all its tests) and the tests a model may see, by :meth:`Task.visible_tests` with
    ``public`` (the rule every front door shares): the data's own split where it has one (CodeContests'
    ``public_tests``, LiveCodeBench's ``public_test_cases``), else the first ``public`` of the tests
    :func:`row_tests` reads, always leaving one hidden (of one assert test, its first asserts: a test of its own,
    not one of the task's). ``ValueError`` for a row without tests."""
    if "public_tests" in row or "public_test_cases" in row:
        adapter = CodeContestsAdapter(generated=True) if "public_tests" in row else LiveCodeBenchAdapter()
        task = adapter.to_task(dict(row), 0)
        if task is None:
            raise ValueError(f"the row has no tests in its public and private columns (it has: {', '.join(row)})")
    else:
        task = row_tests({k: [v] for k, v in row.items()}, 0, default_language, row.get("prompt")).task("row")
    return task, task.visible_tests(public)
