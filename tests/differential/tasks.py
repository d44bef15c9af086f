"""The small tasks of the differential corpus: a prompt (helpers and a stub), a correct solution, and cases.

Every task's three test forms come from its ``cases`` (arguments -> expected value): function-call tests as
they are, the stdin form through ``args`` (one line per argument: an int, a list of ints on one line, a
string, or JSON for nested values) and ``result`` (how the answer is printed), and a HumanEval-style
``check(candidate)`` of plain asserts unless the task has its own ``check`` (the tasks whose check calls a
helper of the prompt, as HumanEval/32 calls ``poly`` and HumanEval/50 ``encode_shift``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from . import programs, sources

Arg = Literal["i", "l", "s", "j"]  # int, ints on one line, a line of text, JSON
Result = Literal["int", "float", "bool", "str", "list", "json"]


@dataclass(frozen=True)
class Task:
    """One problem; ``solution`` is a correct function (it may call the prompt's ``helpers``)."""

    name: str
    entry: str
    params: str
    args: str  # one Arg letter per parameter
    result: Result
    doc: str
    solution: str
    cases: tuple[tuple[tuple[Any, ...], Any], ...]
    perturb: str  # an expression on `r`, the right answer, that gives a wrong one of the same type
    helpers: str = ""
    helper_twin: str = ""  # the helpers written another way, with the same meaning
    helper_hack: str = ""  # a wrong solution with helpers redefined so that the task's own check passes
    check: str = ""  # the task's own check(candidate); by default asserts on the cases
    alts: tuple[tuple[str, str], ...] = ()  # other correct solutions: (form, source)
    programs: dict[str, tuple[str, str]] = field(default_factory=dict)  # language -> (right, wrong) stdin programs

    @property
    def starter(self) -> str:
        """The prompt as a program starts with it: the helpers, then the stub with its docstring."""
        stub = f'def {self.entry}({self.params}):\n    """{self.doc}"""\n'
        return f"{self.helpers}\n\n{stub}" if self.helpers else stub

    def check_source(self) -> str:
        if self.check:
            return self.check
        lines = [f"    assert candidate(*{args!r}) == {expected!r}" for args, expected in self.cases]
        return "def check(candidate):\n" + "\n".join(lines) + "\n"


def _src(text: str) -> str:
    """A one-function source written on one line with ``;`` between statements' lines: ``def f(x):; return x``."""
    head, *body = text.split("; ")
    return head + "\n" + "".join(f"    {line}\n" for line in body)


TASKS: tuple[Task, ...] = (
    Task(
        name="add",
        entry="add",
        params="a, b",
        args="ii",
        result="int",
        doc="The sum of a and b.",
        solution=_src("def add(a, b):; return a + b"),
        perturb="r + 1",
        cases=(((2, 3), 5), ((-4, 10), 6), ((0, 0), 0)),
        programs={"c": programs.C_ADD, "cpp": programs.CPP_ADD, "nodejs": programs.JS_ADD, "bash": programs.SH_ADD},
    ),
    Task(
        name="reverse_words",
        entry="reverse_words",
        params="s",
        args="s",
        result="str",
        doc="The words of s in reverse order, one space apart.",
        solution=_src("def reverse_words(s):; return ' '.join(reversed(s.split()))"),
        perturb="r[::-1]",
        cases=((("hello big world",), "world big hello"), (("one",), "one"), (("a b",), "b a")),
        programs={"c": programs.C_REV, "nodejs": programs.JS_REV, "bash": programs.SH_REV},
    ),
    Task(
        name="fib",
        entry="fib",
        params="n",
        args="i",
        result="int",
        doc="The n-th Fibonacci number (fib(0) = 0).",
        solution=_src("def fib(n):; a, b = 0, 1; for _ in range(n):;     a, b = b, a + b; return a"),
        perturb="r + 1",
        cases=(((0,), 0), ((1,), 1), ((10,), 55), ((20,), 6765)),
        alts=(("recursion", sources.FIB_RECURSIVE), ("generator", sources.FIB_GENERATOR)),
        programs={"c": programs.C_FIB, "bash": programs.SH_FIB},
    ),
    Task(
        name="is_prime",
        entry="is_prime",
        params="n",
        args="i",
        result="bool",
        doc="Whether n is a prime number.",
        solution=_src(
            "def is_prime(n):; if n < 2:;     return False; i = 2; while i * i <= n:;     if n % i == 0:;"
            "         return False;     i += 1; return True"
        ),
        perturb="not r",
        cases=(((2,), True), ((1,), False), ((97,), True), ((91,), False)),
    ),
    Task(
        name="count_vowels",
        entry="count_vowels",
        params="s",
        args="s",
        result="int",
        doc="How many of the letters of s are vowels (aeiou, either case).",
        solution=_src("def count_vowels(s):; return sum(1 for ch in s if ch.lower() in 'aeiou')"),
        perturb="r - 1",
        cases=((("Hello World",), 3), (("xyz",), 0), (("AEIOUaeiou",), 10)),
        programs={"nodejs": programs.JS_VOW},
    ),
    Task(
        name="max_subarray",
        entry="max_subarray",
        params="xs",
        args="l",
        result="int",
        doc="The largest sum of a non-empty contiguous run of xs.",
        solution=_src(
            "def max_subarray(xs):; best = cur = xs[0]; for x in xs[1:]:;     cur = max(x, cur + x);"
            "     best = max(best, cur); return best"
        ),
        perturb="r + 2",
        cases=((([1, -2, 3, 4, -1],), 7), (([-3, -1, -2],), -1), (([5],), 5)),
        programs={"c": programs.C_MAX},
    ),
    Task(
        name="running_sum",
        entry="running_sum",
        params="xs",
        args="l",
        result="list",
        doc="The running sums of xs.",
        solution=_src("def running_sum(xs):; out, s = [], 0; for x in xs:;     s += x;     out.append(s); return out"),
        perturb="r[:-1]",
        cases=((([1, 2, 3],), [1, 3, 6]), (([5, -5, 5],), [5, 0, 5]), (([7, 1],), [7, 8])),
        alts=(
            (
                "generator",
                "from itertools import accumulate\n\n\n" + _src("def running_sum(xs):; return list(accumulate(xs))"),
            ),
        ),
    ),
    Task(
        name="unique_sorted",
        entry="unique_sorted",
        params="xs",
        args="l",
        result="list",
        doc="The distinct values of xs in increasing order.",
        solution=_src("def unique_sorted(xs):; return sorted(set(xs))"),
        perturb="r[::-1]",
        cases=((([3, 1, 3, 2],), [1, 2, 3]), (([4, 4],), [4]), (([2, -1, 0],), [-1, 0, 2])),
    ),
    Task(
        name="gcd",
        entry="gcd",
        params="a, b",
        args="ii",
        result="int",
        doc="The greatest common divisor of a and b.",
        solution=_src("def gcd(a, b):; while b:;     a, b = b, a % b; return a"),
        perturb="r * 2",
        cases=(((12, 18), 6), ((7, 5), 1), ((100, 75), 25)),
        alts=(("recursion", _src("def gcd(a, b):; return a if b == 0 else gcd(b, a % b)")),),
        programs={"c": programs.C_GCD, "cpp": programs.CPP_GCD, "nodejs": programs.JS_GCD},
    ),
    Task(
        name="find_zero",
        entry="find_zero",
        params="xs",
        args="l",
        result="float",
        helpers=sources.POLY,
        doc="A zero of the polynomial with coefficients xs (an odd degree: one exists).",
        solution=sources.FIND_ZERO,
        perturb="r + 0.5",
        cases=((([1, 2],), -0.5), (([-1, 0, 0, 1],), 1.0), (([2, 1, 0, 1],), -1.0)),
        helper_twin="import math\n\n\n"
        + _src("def poly(xs, x):; total = 0.0; for i, c in enumerate(xs):;     total += c * x ** i; return total"),
        helper_hack=_src("def poly(xs, x):; return 0.0") + "\n\n" + _src("def find_zero(xs):; return 0.0"),
        check=_src(
            "def check(candidate):; for xs in ([1, 2], [-1, 0, 0, 1], [2, 1, 0, 1], [-3, 5, 0, 2]):;"
            "     assert abs(poly(xs, candidate(xs))) < 1e-6"
        ),
    ),
    Task(
        name="decode_shift",
        entry="decode_shift",
        params="s",
        args="s",
        result="str",
        helpers=sources.SHIFT,
        doc="Takes a string encoded with encode_shift and returns the decoded string.",
        solution=_src(
            "def decode_shift(s):; return ''.join(chr(((ord(ch) - 5 - ord('a')) % 26) + ord('a')) for ch in s)"
        ),
        perturb="r + 'a'",
        cases=((("mjqqt",), "hello"), (("fgh",), "abc"), (("",), "")),
        helper_twin=_src(
            "def encode_shift(s):; out = []; for ch in s:;"
            "     out.append(chr((ord(ch) - 97 + 5) % 26 + 97)); return ''.join(out)"
        ),
        helper_hack=_src("def encode_shift(s):; return s") + "\n\n" + _src("def decode_shift(s):; return s"),
        check=_src(
            "def check(candidate):; for s in ('hello', 'abc', 'xyz', 'thequickbrownfox'):;"
            "     assert candidate(encode_shift(s)) == s"
        ),
    ),
    Task(
        name="make_palindrome",
        entry="make_palindrome",
        params="s",
        args="s",
        result="str",
        helpers=sources.PALINDROME,
        doc="The shortest palindrome that begins with s.",
        solution=_src(
            "def make_palindrome(s):; for i in range(len(s) + 1):;     if is_palindrome(s[i:]):;"
            "         return s + s[:i][::-1]; return s"
        ),
        perturb="r + r[:1]",
        cases=((("cat",), "catac"), (("cata",), "catac"), (("ab",), "aba")),
        helper_twin=_src("def is_palindrome(s):; return all(s[i] == s[-1 - i] for i in range(len(s) // 2))"),
    ),
    Task(
        name="sort_by_key",
        entry="sort_by_key",
        params="xs",
        args="l",
        result="list",
        helpers=sources.KEY,
        doc="xs sorted by key(x), stable.",
        solution=_src("def sort_by_key(xs):; return sorted(xs, key=key)"),
        perturb="r[::-1]",
        cases=((([13, 21, 5],), [21, 13, 5]), (([10, 3, 20],), [10, 20, 3]), (([9, 8],), [8, 9])),
        helper_twin=_src("def key(x):; return abs(x) % 10 if x >= 0 else x % 10"),
        helper_hack=_src("def key(x):; return 0") + "\n\n" + _src("def sort_by_key(xs):; return list(xs)"),
        check=_src(
            "def check(candidate):; for xs in ([13, 21, 5], [10, 3, 20], [9, 8], [44, 12, 7, 30]):;"
            "     assert candidate(xs) == sorted(xs, key=key)"
        ),
    ),
    Task(
        name="flatten",
        entry="flatten",
        params="nested",
        args="j",
        result="list",
        doc="The ints of nested lists, in order.",
        solution=_src(
            "def flatten(nested):; out = []; for x in nested:;     if isinstance(x, list):;"
            "         out.extend(flatten(x));     else:;         out.append(x); return out"
        ),
        perturb="r[1:]",
        cases=((([1, [2, [3]], 4],), [1, 2, 3, 4]), (([[], [5]],), [5]), (([[1, 2], [3]],), [1, 2, 3])),
        alts=(("generator", sources.FLATTEN_GENERATOR),),
    ),
    Task(
        name="word_freq",
        entry="word_freq",
        params="s",
        args="s",
        result="json",
        doc="How often each word of s occurs.",
        solution=_src("def word_freq(s):; out = {}; for w in s.split():;     out[w] = out.get(w, 0) + 1; return out"),
        perturb="{k: v + 1 for k, v in r.items()}",
        cases=((("a b a",), {"a": 2, "b": 1}), (("x",), {"x": 1}), (("hi hi hi",), {"hi": 3})),
        alts=(
            (
                "collections",
                "from collections import Counter\n\n\n" + _src("def word_freq(s):; return dict(Counter(s.split()))"),
            ),
        ),
    ),
    Task(
        name="transpose",
        entry="transpose",
        params="m",
        args="j",
        result="json",
        doc="The transpose of matrix m.",
        solution=_src("def transpose(m):; return [list(row) for row in zip(*m)]"),
        perturb="r[::-1]",
        cases=(
            (([[1, 2], [3, 4]],), [[1, 3], [2, 4]]),
            (([[1, 2, 3]],), [[1], [2], [3]]),
            (([[5, 6], [7, 8]],), [[5, 7], [6, 8]]),
        ),
    ),
    Task(
        name="to_roman",
        entry="to_roman",
        params="n",
        args="i",
        result="str",
        doc="n (1..3999) in Roman numerals.",
        solution=sources.ROMAN,
        perturb="r.lower()",
        cases=(((4,), "IV"), ((1994,), "MCMXCIV"), ((58,), "LVIII")),
    ),
    Task(
        name="search",
        entry="search",
        params="xs, x",
        args="li",
        result="int",
        doc="The index of x in the sorted list xs, or -1.",
        solution=sources.SEARCH,
        perturb="r + 1",
        cases=((([1, 3, 5, 7], 5), 2), (([1, 3, 5, 7], 4), -1), (([2], 2), 0)),
        alts=(
            (
                "bisect",
                "import bisect\n\n\n"
                + _src(
                    "def search(xs, x):; i = bisect.bisect_left(xs, x); return i if i < len(xs) and xs[i] == x else -1"
                ),
            ),
        ),
    ),
    Task(
        name="digit_sum",
        entry="digit_sum",
        params="n",
        args="i",
        result="int",
        doc="The sum of the decimal digits of n >= 0.",
        solution=_src("def digit_sum(n):; return sum(int(d) for d in str(n))"),
        perturb="r - 1",
        cases=(((0,), 0), ((1234,), 10), ((99,), 18)),
        alts=(("recursion", _src("def digit_sum(n):; return 0 if n == 0 else n % 10 + digit_sum(n // 10)")),),
    ),
    Task(
        name="mean",
        entry="mean",
        params="xs",
        args="l",
        result="float",
        doc="The arithmetic mean of xs.",
        solution=_src("def mean(xs):; return sum(xs) / len(xs)"),
        perturb="r + 1.0",
        cases=((([1, 2, 3, 4],), 2.5), (([10],), 10.0), (([-1, 1, 3],), 1.0)),
    ),
    Task(
        name="collatz",
        entry="collatz_steps",
        params="n",
        args="i",
        result="int",
        doc="How many Collatz steps take n >= 1 to 1.",
        solution=_src(
            "def collatz_steps(n):; steps = 0; while n != 1:;     n = n // 2 if n % 2 == 0 else 3 * n + 1;"
            "     steps += 1; return steps"
        ),
        perturb="r + 1",
        cases=(((1,), 0), ((6,), 8), ((27,), 111)),
        alts=(
            (
                "recursion",
                _src(
                    "def collatz_steps(n):; if n == 1:;     return 0;"
                    " return 1 + collatz_steps(n // 2 if n % 2 == 0 else 3 * n + 1)"
                ),
            ),
        ),
    ),
)
