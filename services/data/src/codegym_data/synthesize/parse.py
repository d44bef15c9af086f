"""Reading a model's answer (see ``prompts.ANSWER_FORMAT``) into a candidate problem, or a counted reason why not.

The answer has three sections, each opened by a header line: ``## Problem`` (the statement), ``## Solution``
(a fenced Python block with the reference solution), ``## Tests`` (a fenced block of ``assert`` statements).
Small models bend the format, so the reader is lenient where the meaning stays clear: headers may be
``Problem:``, ``**Tests**`` or ``### Test cases``; text before the first header is the statement when there
is no Problem section; an unclosed fence (a cut-off answer) still gives its code; asserts written at the top
level of the solution are tests. It is strict where guessing would change the meaning: the code must parse,
and a test is an ``assert`` that calls a function the solution defines (when the tests do not parse as a
whole, the lines that parse alone are read: each test is one line).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass

from codegym_evaluator import python_syntax
from codegym_evaluator.extract import fenced_blocks
from codegym_evaluator.sanitize import sanitize

MALFORMED = {  # in the order they are checked
    "no_problem": "no problem statement (or one of fewer than 3 words)",
    "no_solution": "no Solution section with code",
    "solution_syntax_error": "the solution does not parse as Python",
    "no_function": "the solution defines no top-level function",
    "tests_syntax_error": "the tests do not parse as Python",
    "no_tests": "no assert statement in the Tests section or the solution",
    "tests_miss_function": "no assert calls a function the solution defines",
}

_HEADER = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?[ \t]*(?P<name>problem statement|problem|reference solution|solution"
    r"|test cases|test case|tests|test)[ \t]*(?:\*\*)?[ \t]*(?::[ \t]*(?:\*\*)?(?P<rest>.*))?$",
    re.IGNORECASE,
)


class Malformed(ValueError):
    """An answer that is not a candidate: ``reason`` is a key of ``MALFORMED``, ``detail`` says more."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Candidate:
    """A problem read from an answer, before any check: statement, reference solution and its assert tests."""

    problem: str
    solution: str  # the whole reference program: the entry point, what it uses, its imports
    entry_point: str
    signature: str  # name(parameters) -> annotation, as the prompt shows it
    tests: tuple[str, ...]  # each one's assert_code: the tests' imports and assignments, then one assert


def sections(answer: str) -> dict[str, str]:
    """The text of each section by name (problem, solution, tests; the first of each), and of what comes before
    the first header (``preamble``)."""
    found: dict[str, list[str]] = {"preamble": []}
    current = "preamble"
    in_fence = False
    for line in answer.splitlines():
        match = None if in_fence else _HEADER.match(line)
        if match is not None:
            name = match.group("name").lower().split()[-1]
            name = {"statement": "problem", "test": "tests", "cases": "tests", "case": "tests"}.get(name, name)
            current = name if name not in found else f"{name}+"  # a repeated section is not read
            found.setdefault(current, [])
            if match.group("rest"):
                found[current].append(match.group("rest"))
            continue
        stripped = line.strip()
        if not in_fence and stripped.startswith("```"):
            in_fence = True
        elif in_fence and stripped.endswith("```") and (stripped == "```" or not stripped.startswith("```")):
            in_fence = False  # a bare fence, or code that ends with one (as ``fenced_blocks`` reads them)
        found[current].append(line)
    return {name: "\n".join(lines).strip() for name, lines in found.items()}


def section_code(text: str) -> str:
    """The Python code of a section: its fenced block (one tagged python first), an unclosed block's body, or
    the text itself."""
    closed, still_open = fenced_blocks(text)
    if closed:
        python = [body for tag, body in closed if tag.lower() in ("python", "py", "python3", "")]
        return (python or [closed[0][1]])[0]
    if still_open is not None:
        return still_open[1]
    return text


_FENCED = re.compile(r"^[ \t]*```.*?(?:^[ \t]*```[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)


def _fences_only(text: str) -> str:
    """The fenced blocks of ``text`` without the prose around them (empty when there are none)."""
    return "\n".join(m.group(0) for m in _FENCED.finditer(text))


def _called(node: ast.AST) -> list[str]:
    return [n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]


def _parse(code: str, reason: str) -> ast.Module:
    try:
        return python_syntax.parse(code)
    except (SyntaxError, ValueError) as exc:
        raise Malformed(reason, str(exc)) from None


def _parse_tests(code: str) -> ast.Module:
    """The tests' code; when it does not parse as a whole, the lines that parse alone (tests are independent
    one-line statements, and a small model's garbage line should not take the good ones with it)."""
    try:
        return python_syntax.parse(code)
    except (SyntaxError, ValueError) as exc:
        error = str(exc)
    kept = []
    for line in code.splitlines():
        try:
            kept += python_syntax.parse(line).body if line.strip() and not line[0].isspace() else []
        except (SyntaxError, ValueError):
            continue
    if not any(isinstance(s, ast.Assert) for s in kept):
        raise Malformed("tests_syntax_error", error)
    return ast.Module(body=kept, type_ignores=[])


def parse_answer(answer: str) -> Candidate:
    """The candidate in a model's answer; raises ``Malformed`` naming the first thing missing or broken."""
    parts = sections(answer)
    statement = parts.get("problem") or parts["preamble"]
    problem = re.sub(r"\n{3,}", "\n\n", _FENCED.sub("", statement)).strip()
    if len(problem.split()) < 3:
        raise Malformed("no_problem")
    # Without a Solution section, code written into the statement is the solution ("you can use this code").
    solution_code = section_code(parts["solution"] if "solution" in parts else _fences_only(statement)).strip()
    if not solution_code:
        raise Malformed("no_solution")
    solution = _parse(solution_code, "solution_syntax_error")
    functions = {n.name: n for n in solution.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if not functions:
        raise Malformed("no_function")
    tests = _parse_tests(section_code(parts.get("tests", "")))
    # Imports and assignments of the tests are their set-up, run before each assert; other statements
    # (prints, loops) are not tests and are left out.
    setup = [s for s in tests.body if isinstance(s, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign))]
    asserts = [s for s in tests.body if isinstance(s, ast.Assert)]
    asserts += [s for s in solution.body if isinstance(s, ast.Assert)]
    if not asserts:
        raise Malformed("no_tests")
    calls = Counter(name for a in asserts for name in set(_called(a)) if name in functions)
    if not calls:
        raise Malformed("tests_miss_function", f"the solution defines {', '.join(functions)}")
    # The entry point is the function most asserts call (the first defined, on a tie): a helper that
    # one test also calls does not become the problem.
    entry = max(functions, key=lambda name: calls[name])
    prefix = "".join(ast.unparse(s) + "\n" for s in setup)
    test_codes = tuple(prefix + ast.unparse(a) for a in asserts if entry in _called(a))
    reference = sanitize(ast.unparse(solution), entry)  # prints, demo calls and asserts would run on import
    node = functions[entry]
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    signature = f"{entry}({ast.unparse(node.args)}){returns}"
    return Candidate(problem, reference, entry, signature, test_codes)
