"""The request to the model: one new problem, its reference solution and assert tests, in a fixed format.

The format is shown twice: spelled out in the request, and as a worked example (a previous turn of the chat,
which small models copy more faithfully than a description). Each request names a topic, so that answers
differ: a topic from ``TOPICS``, or, when the run is seeded with problems of the task library, one of those
problems shown as the topic to write a *different* problem about.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from codegym_evaluator.tasks import Task

SYSTEM = (
    "You write programming exercises for a Python course. Each exercise is a problem statement, a correct "
    "Python function that solves it, and assert tests of that function. Follow the answer format exactly."
)

ANSWER_FORMAT = """\
## Problem
<the problem statement in plain words: what the function takes and what it returns>

## Solution
```python
<the Python function that solves the problem, with the imports it needs>
```

## Tests
```python
assert <function>(<arguments>) == <expected result>
<one assert per line, {min_tests} or more, covering ordinary and edge cases>
```"""

EXAMPLE_TOPIC = "lists of integers"

EXAMPLE_ANSWER = """\
## Problem
Given a list of integers, return the sum of its even numbers. The sum of an empty list is 0.

## Solution
```python
def sum_even(numbers):
    total = 0
    for n in numbers:
        if n % 2 == 0:
            total += n
    return total
```

## Tests
```python
assert sum_even([1, 2, 3, 4]) == 6
assert sum_even([]) == 0
assert sum_even([1, 3, 5]) == 0
assert sum_even([-2, 7, 10]) == 8
assert sum_even([0, 1]) == 0
```"""

EXAMPLE_PROBLEM = EXAMPLE_ANSWER.split("## Solution")[0].removeprefix("## Problem").strip()

TOPICS = (
    "strings",
    "lists of integers",
    "counting",
    "dictionaries",
    "sorting",
    "prime numbers",
    "digits of a number",
    "palindromes",
    "searching in a list",
    "sets",
    "matrices (lists of lists)",
    "intervals",
    "dates and times as numbers",
    "words in a sentence",
    "running totals",
    "greatest common divisor",
    "binary numbers",
    "vowels and consonants",
    "pairs of numbers",
    "geometry with integer coordinates",
    "stacks and brackets",
    "tuples",
    "grades and scores",
    "temperatures",
    "coins and change",
    "unique elements",
    "string compression",
    "Fibonacci-like sequences",
    "ranges of numbers",
    "filtering a list",
)

SEED_CHARS = 800  # of a seed problem's text: enough to give its topic, not so much that it crowds the context


@dataclass(frozen=True)
class Request:
    """What candidate number ``index`` is asked for: its topic (or seed problem) and the chat messages."""

    index: int
    topic: str
    seed_problem: str | None
    messages: list[dict[str, str]]
    sampling_seed: int  # sent with the request: endpoints that honour it answer the same run the same way


def _ask(topic: str, min_tests: int) -> str:
    return (
        f"Write a new programming exercise about {topic}: a problem, a Python function that solves it, and at "
        f"least {min_tests} assert tests. Answer in exactly this format:\n\n"
        f"{ANSWER_FORMAT.format(min_tests=min_tests)}"
    )


def _ask_seeded(seed_problem: str, min_tests: int) -> str:
    return (
        "Here is an existing exercise, for its topic only:\n\n"
        f"<<<\n{seed_problem[:SEED_CHARS].strip()}\n>>>\n\n"
        "Write a new, different programming exercise on a related topic: a problem, a Python function that "
        f"solves it, and at least {min_tests} assert tests. Answer in exactly this format:\n\n"
        f"{ANSWER_FORMAT.format(min_tests=min_tests)}"
    )


def messages(topic: str, min_tests: int, seed_problem: str | None = None) -> list[dict[str, str]]:
    """The chat: the system message, the worked example as a previous exchange, then this request."""
    ask = _ask_seeded(seed_problem, min_tests) if seed_problem else _ask(topic, min_tests)
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": _ask(EXAMPLE_TOPIC, min_tests)},
        {"role": "assistant", "content": EXAMPLE_ANSWER},
        {"role": "user", "content": ask},
    ]


def request_rng(seed: int, index: int) -> random.Random:
    """The random stream of candidate ``index``: its topic and sampling seed depend only on the run's seed and
    the index, not on ``--count`` or on the order answers arrive in."""
    return random.Random(f"{seed}/synthesize/{index}")


def build_requests(count: int, seed: int, min_tests: int, seeds: Sequence[Task] = ()) -> list[Request]:
    """The ``count`` requests of a run: topics from ``TOPICS``, or seed problems drawn from ``seeds``."""
    requests = []
    for index in range(count):
        rng = request_rng(seed, index)
        if seeds:
            seed_task = seeds[rng.randrange(len(seeds))]
            topic, seed_problem = seed_task.task_id, seed_task.prompt
        else:
            topic, seed_problem = TOPICS[rng.randrange(len(TOPICS))], None
        chat = messages(topic, min_tests, seed_problem)
        requests.append(Request(index, topic, seed_problem, chat, rng.randrange(2**31)))
    return requests
