"""The model's stand-in for the synthesis tests: an OpenAI-compatible app that answers each request with a
scripted answer, and the planted answers (good, wrong, weak, duplicate, trivial, malformed)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from codegym_data.synthesize import prompts
from fastapi import FastAPI
from fastapi.responses import JSONResponse


def answer(problem: str, solution: str, tests: str) -> str:
    """An answer in the requested format (the code dedented)."""
    solution, tests = textwrap.dedent(solution).strip(), textwrap.dedent(tests).strip()
    return f"## Problem\n{problem}\n\n## Solution\n```python\n{solution}\n```\n\n## Tests\n```python\n{tests}\n```\n"


GOOD = answer(
    "Return the number of vowels (a, e, i, o, u) in a lower-case string.",
    """
    def count_vowels(text):
        count = 0
        for ch in text:
            if ch in "aeiou":
                count += 1
        return count
    """,
    """
    assert count_vowels("hello") == 2
    assert count_vowels("") == 0
    assert count_vowels("rhythm") == 0
    assert count_vowels("aeiou") == 5
    assert count_vowels("banana") == 3
    """,
)

# Planted bad tests: the reference fails them (one expected value is wrong: 1 + 4 is 5).
WRONG_TESTS = answer(
    "Return the sum of the squares of a list of integers.",
    """
    def square_sum(numbers):
        return sum(n * n for n in numbers)
    """,
    """
    assert square_sum([1, 2]) == 6
    assert square_sum([]) == 0
    assert square_sum([3]) == 9
    """,
)

# Planted bad tests: too weak. No stand-in passes them, but most mutants do.
WEAK_TESTS = answer(
    "Return the sum of the positive numbers of a list of integers.",
    """
    def positive_sum(numbers):
        result = 0
        for n in numbers:
            if n > 0:
                result += n
        return result
    """,
    """
    assert isinstance(positive_sum([1, 2]), int)
    assert positive_sum([3, -1]) is not None
    assert positive_sum([]) is not None
    """,
)

# Planted bad tests: `f(x) is not None` only; a function that returns its argument passes them.
NOT_NONE_TESTS = answer(
    "Return the sum of the decimal digits of a non-negative integer.",
    """
    def digit_sum(n):
        return sum(int(d) for d in str(n))
    """,
    """
    assert digit_sum(0) is not None
    assert digit_sum(12) is not None
    assert digit_sum(7) is not None
    """,
)

# The good problem again, with other names and layout: the same solution.
DUPLICATE_SOLUTION = answer(
    "Count how many characters of a word are vowels.",
    """
    def vowel_total(word):
        # how many vowels
        n = 0
        for c in word:
            if c in 'aeiou':
                n += 1
        return n
    """,
    """
    assert vowel_total("hello") == 2
    assert vowel_total("sky") == 0
    assert vowel_total("queue") == 4
    """,
)

# The good problem's statement, reworded a little, with another solution.
DUPLICATE_PROBLEM = answer(
    "Return the number of vowels (a, e, i, o, u) in a lower case string.",
    """
    def vowels_in(text):
        return sum(1 for ch in text if ch in "aeiou")
    """,
    """
    assert vowels_in("hello") == 2
    assert vowels_in("") == 0
    assert vowels_in("education") == 5
    """,
)

TRIVIAL_CONSTANT = answer(
    "Return True for any integer.",
    """
    def always(n):
        if n > 0:
            return True
        return True
    """,
    """
    assert always(1) == True
    assert always(-5) == True
    assert always(0) == True
    """,
)

# Tests that only try lists without a negative number: returning None passes them.
PASSES_WITH_NONE = answer(
    "Return the first negative number of a list, or None when there is none.",
    """
    def first_negative(numbers):
        for n in numbers:
            if n < 0:
                return n
        return None
    """,
    """
    assert first_negative([1, 2]) is None
    assert first_negative([]) is None
    assert first_negative([0, 7]) is None
    """,
)

TOO_FEW_TESTS = answer(
    "Return the larger of two integers.",
    """
    def larger(a, b):
        return a if a > b else b
    """,
    """
    assert larger(1, 2) == 2
    assert larger(5, -1) == 5
    """,
)

MALFORMED = "I am sorry, I cannot write exercises about this topic."

COPIED = prompts.EXAMPLE_ANSWER

# Every planted answer and the reason it must be rejected for (None: kept), in the order they are asked for.
PLANTED: list[tuple[str, str | None]] = [
    (GOOD, None),
    (WRONG_TESTS, "reference_fails"),
    (WEAK_TESTS, "weak_tests"),
    (NOT_NONE_TESTS, "passes_with_identity"),
    (DUPLICATE_SOLUTION, "duplicate_solution"),
    (DUPLICATE_PROBLEM, "duplicate_problem"),
    (TRIVIAL_CONSTANT, "trivial_constant"),
    (PASSES_WITH_NONE, "passes_with_none"),
    (TOO_FEW_TESTS, "too_few_tests"),
    (MALFORMED, "no_solution"),
    (COPIED, "copied_prompt"),
]


def scripted_model(answers: Sequence[str | None], *, seed: int = 0, min_tests: int = 3) -> FastAPI:
    """An OpenAI-compatible app that answers request ``i`` of a run (``seed``, ``min_tests``) with ``answers[i]``,
    recognised by the sampling seed the request carries, so that the order requests arrive in does not matter.
    ``None`` answers HTTP 400 (a request the endpoint refuses). ``app.state.requests`` keeps every body."""
    requests = prompts.build_requests(len(answers), seed, min_tests)
    by_seed = {r.sampling_seed: (answers[r.index], r) for r in requests}
    app = FastAPI()
    app.state.requests = []

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "scripted", "object": "model"}]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(body: dict[str, Any]) -> dict[str, Any] | JSONResponse:
        app.state.requests.append(body)
        text, request = by_seed[body["seed"]]
        assert body["messages"] == request.messages  # the request is the one built for that candidate
        if text is None:
            return JSONResponse({"error": "refused"}, status_code=400)
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        return {"object": "chat.completion", "model": body["model"], "choices": [choice]}

    return app
