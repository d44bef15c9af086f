"""Reading answers (the format, the bends small models make, every malformed reason) and the static checks."""

from __future__ import annotations

import pytest
from codegym_data.synthesize import MALFORMED, Malformed, parse_answer, prompts
from codegym_data.synthesize.checks import constant_return, normalised, problem_words, similarity, stand_ins
from synth_support import GOOD, answer


def test_the_prompts_example_is_a_candidate() -> None:
    c = parse_answer(prompts.EXAMPLE_ANSWER)
    assert c.entry_point == "sum_even" and c.signature == "sum_even(numbers)" and len(c.tests) == 5
    assert c.problem == prompts.EXAMPLE_PROBLEM and c.tests[0] == "assert sum_even([1, 2, 3, 4]) == 6"


def test_bent_headers_unclosed_fences_and_asserts_in_the_solution() -> None:
    text = (
        "**Problem:** Return the largest of three integers a, b and c.\n\n"
        "### Reference solution\n```py\nimport math\n\ndef helper(x):\n    return x\n\n"
        "def largest(a: int, b: int, c: int) -> int:\n    return max(helper(a), b, c)\n\n"
        "print(largest(1, 2, 3))\nassert largest(1, 2, 3) == 3\n```\n"
        "Test cases:\n```python\nfrom math import inf\nbig = 10\nassert largest(big, 2, 3) == big\n"
        "assert helper(2) == 2\nprint('done')\nassert largest(-1, -2, -3) == -1"  # cut off: no closing fence
    )
    c = parse_answer(text)
    assert c.problem == "Return the largest of three integers a, b and c."
    assert c.entry_point == "largest" and c.signature == "largest(a: int, b: int, c: int) -> int"
    # the demo print is not part of the reference; the helper it needs is
    assert "print" not in c.solution and "def helper" in c.solution
    assert c.tests == (
        "from math import inf\nbig = 10\nassert largest(big, 2, 3) == big",
        "from math import inf\nbig = 10\nassert largest(-1, -2, -3) == -1",
        "from math import inf\nbig = 10\nassert largest(1, 2, 3) == 3",
    )


def test_code_in_the_statement_is_the_solution_when_there_is_no_solution_section() -> None:
    text = "## Problem\nDouble a number, with this code:\n```python\ndef double(x):\n    return 2 * x\n```\n"
    text += "## Tests\n```python\nassert double(2) == 4\nassert double(2) == = 4\n```\n"
    c = parse_answer(text)
    assert c.problem == "Double a number, with this code:" and c.entry_point == "double"
    assert c.tests == ("assert double(2) == 4",)  # the line that does not parse is left out


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("## Problem\nToo short\n## Solution\n```python\ndef f(): return 1\n```", "no_problem"),
        ("## Problem\nA problem with words.\n## Tests\n```python\nassert f(1) == 1\n```", "no_solution"),
        (answer("A problem with words.", "def f(x):\n    return x +", "assert f(1) == 2"), "solution_syntax_error"),
        (answer("A problem with words.", "x = 1", "assert x == 1"), "no_function"),
        (answer("A problem with words.", "def f(x):\n    return x", "assert f(1) = 1"), "tests_syntax_error"),
        (answer("A problem with words.", "def f(x):\n    return x", "print(f(1))"), "no_tests"),
        (answer("A problem with words.", "def f(x):\n    return x", "assert g(1) == 1"), "tests_miss_function"),
    ],
)
def test_malformed_answers_are_rejected_with_their_reason(text: str, reason: str) -> None:
    with pytest.raises(Malformed) as info:
        parse_answer(text)
    assert info.value.reason == reason and reason in MALFORMED


def test_normalised_solutions_are_equal_up_to_names_layout_comments_and_docstrings() -> None:
    a = parse_answer(GOOD).solution
    b = 'def vowels(s: str) -> int:\n    """Count."""\n    n = 0  # none yet\n    for c in s:\n'
    b += "        if c in 'aeiou':\n            n += 1\n    return n\n"
    assert normalised(a) == normalised(b)
    assert normalised(a) != normalised(b.replace("n += 1", "n += 2"))
    renamed = normalised("import math\ndef f(x):\n    return math.floor(x)")
    assert renamed == "import math\n\ndef v0(v1):\n    return math.floor(v1)"  # imports and attributes stay


def test_problem_similarity() -> None:
    a = problem_words("Return the number of vowels (a, e, i, o, u) in a lower-case string.")
    assert a[:4] == ["return", "the", "number", "of"]
    assert similarity(a, problem_words("Return the number of vowels (a, e, i, o, u) in a lower case string!")) > 0.9
    assert similarity(a, problem_words("Sort a list of tuples by their second element.")) < 0.3
    assert similarity(a, []) == 0.0


@pytest.mark.parametrize(
    ("code", "constant"),
    [
        ("def f(x):\n    return 3", True),
        ("def f(x):\n    if x:\n        return [1]\n    return [1]", True),
        ("def f(x):\n    print(x)", True),
        ("def f(x):\n    if x:\n        return True\n    return False", False),
        ("def f(x):\n    return x", False),
        ("def f(x):\n    def g():\n        return x\n    return 0", True),  # g's return is not f's
        ("def f(x):\n    yield 1", False),
    ],
)
def test_constant_return(code: str, constant: bool) -> None:
    assert constant_return(code, "f") is constant


def test_stand_ins_replace_only_the_entry_points_body() -> None:
    code = "import math\ndef helper(v):\n    return v\ndef f(a, b=2):\n    return helper(a) * b"
    assert stand_ins(code, "f") == {
        "passes_with_none": "import math\n\ndef helper(v):\n    return v\n\ndef f(a, b=2):\n    return None",
        "passes_with_identity": "import math\n\ndef helper(v):\n    return v\n\ndef f(a, b=2):\n    return a",
    }
    assert list(stand_ins("def f():\n    return 1", "f")) == ["passes_with_none"]  # no parameter to return


def test_requests_depend_on_the_seed_and_the_index_only() -> None:
    ten = prompts.build_requests(10, seed=4, min_tests=3)
    assert prompts.build_requests(3, seed=4, min_tests=3) == ten[:3]
    assert [r.sampling_seed for r in ten] != [r.sampling_seed for r in prompts.build_requests(10, 5, 3)]
    first = ten[0]
    assert first.messages[2] == {"role": "assistant", "content": prompts.EXAMPLE_ANSWER}
    assert f"exercise about {first.topic}:" in first.messages[-1]["content"] and first.topic in prompts.TOPICS
    assert "at least 3 assert tests" in first.messages[-1]["content"]
