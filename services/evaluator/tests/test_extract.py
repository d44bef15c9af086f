from __future__ import annotations

from codegym_evaluator.extract import Extracted, extract_code, truncate_at_stop
from codegym_evaluator.tasks import Task

FUNC = Task("t/1", "p", "assert", [{"assert_code": "assert f(1) == 2"}], entry_point="f")
STDIO = Task("t/2", "p", "stdio", [{"stdin": "1", "expected_stdout": "1"}])


def test_last_fenced_block_by_default_and_first_on_request() -> None:
    text = "a\n```python\nprint(1)\n```\nb\n```python\nprint(2)\n```\n"
    assert extract_code(text).code == "print(2)"
    assert extract_code(text, which="first").code == "print(1)"
    assert extract_code(text).fenced


def test_blocks_in_the_tasks_language_win_over_others() -> None:
    text = "```bash\npip install x\n```\n```py\nprint(3)\n```\n```text\noutput\n```"
    assert extract_code(text, STDIO).code == "print(3)"


def test_the_block_defining_the_entry_point_wins() -> None:
    text = "```python\ndef f(x):\n    return x + 1\n```\nUsage:\n```python\nprint(f(1))\n```"
    assert extract_code(text, FUNC).code == "def f(x):\n    return x + 1"


def test_unclosed_fence_gives_its_body_without_the_bonus() -> None:
    got = extract_code("Sure!\n```python\nprint(input())\n", STDIO)
    assert got.code == "print(input())\n"
    assert not got.fenced


def test_no_fence_keeps_the_completion_verbatim() -> None:
    body = "    return x + 1\n"
    assert extract_code(body, FUNC).code == body
    assert not extract_code(body, FUNC).fenced


def test_function_tasks_are_sanitised() -> None:
    text = (
        "```python\nimport math\nK = 2\ndef g(x):\n    return x * K\n\n@staticmethod\ndef unused():\n    pass\n"
        "def f(x):\n    return g(x)\n\nprint(f(3))\nx = int(input())\nif __name__ == '__main__':\n    f(1)\n```"
    )
    # A decorated definition is kept, needed or not: its decorator runs as a harness imports the program (one
    # that registers it may fill a table the entry point reads), and goes with it.
    kept = "import math\nK = 2\ndef g(x):\n    return x * K\n@staticmethod\ndef unused():\n    pass\n"
    kept += "def f(x):\n    return g(x)"
    assert extract_code(text, FUNC).code == kept
    # stdio programs need their top-level code
    assert "input()" in extract_code(text, STDIO).code


def test_truncate_at_the_earliest_stop() -> None:
    assert truncate_at_stop("a\nprint(1)\ndef g", ["\ndef ", "\nprint("]) == "a"
    assert truncate_at_stop("abc", ["\n#"]) == "abc"


def test_a_fence_closed_on_the_last_line_of_code() -> None:
    assert extract_code("```python\nprint(1)```\nmore text") == Extracted("print(1)", True)


def test_a_tagged_fence_opens_a_block_and_never_closes_one() -> None:
    # small models write an empty ``` line before ```python; pairing the fences the wrong way round ran
    # empty programs in place of the answer
    answer = "```\n\n```python\ndef cube(n):\n    return n ** 3\n```\n\nThis is the complete solution."
    assert extract_code(answer) == Extracted("def cube(n):\n    return n ** 3", fenced=True)
    twice = "```\n\n```python\ndef f():\n    return 1\n```\n\n```python\ndef f():\n    return 2\n```\n"
    assert extract_code(twice).code == "def f():\n    return 2"
    assert extract_code(twice, which="first").code == "def f():\n    return 1"
    closed_on_code = "```python\nprint(1)```\nthen\n```python\nprint(2)```"
    assert [extract_code(closed_on_code, which=w).code for w in ("first", "last")] == ["print(1)", "print(2)"]


def test_a_truncated_answer_after_an_empty_fence_gives_the_tagged_body() -> None:
    answer = "```\n\n```python\ndef add(a, b):\n    return a + b\n\nnumbers = ["
    assert extract_code(answer) == Extracted("def add(a, b):\n    return a + b\n\nnumbers = [", fenced=False)
    assert extract_code("```\nprint(3)\n").code == "print(3)\n"
