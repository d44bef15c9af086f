"""The Python harnesses of call and assert tests, without a sandbox."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from codegym_sandbox.judging import harness


@pytest.fixture(autouse=True)
def _in_a_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner works in its run's directory, where it writes the program's text as ``solution.py``
    (``agent/program_file.py``): here a directory of the test's own, never the checkout."""
    monkeypatch.chdir(tmp_path)


def _python(program: str, stdin: str = "") -> str:
    return subprocess.run(
        [sys.executable, "-c", program], input=stdin, capture_output=True, text=True, timeout=30
    ).stdout


def _call(code: str, args: list[object], expected: object, function: str = "f") -> tuple[bool | None, str, str]:
    """What the runner says of the call test ``function(*args) == expected``: passed/failed/neither, stdout,
    stderr."""
    run = subprocess.run(
        [sys.executable, "-c", harness.ASSERT_MAIN],
        input=harness.call_stdin(code, function, args, None, expected),
        capture_output=True,
        timeout=30,
    )
    return harness.assert_outcome(run.returncode), run.stdout.decode(), run.stderr.decode()


def test_call_compares_the_returned_value_and_shows_it() -> None:
    code = "def f(a, b=0):\n    print('noise')\n    return (a, {1: b})"
    assert _call(code, [1], [1, {"1": 0}]) == (True, 'noise\n[1, {"1": 0}]\n', "")  # as JSON has it
    assert _call(code, [2], [1, {"1": 0}])[0] is False
    assert _call("def f(x):\n    return 1 / 3", [0], 0.3333334)[0] is True  # within the tolerance
    run = subprocess.run(
        [sys.executable, "-c", harness.ASSERT_MAIN],
        capture_output=True,
        timeout=30,
        input=harness.call_stdin("def f():\n    return 0.33", "f", [], None, 1 / 3, rel_tol=0.1),
    )
    assert harness.assert_outcome(run.returncode) is True  # the request's tolerance


def test_call_needs_an_identifier() -> None:
    with pytest.raises(ValueError, match="identifier"):
        harness.call_stdin("", "f(); import os", [], None, None)


@pytest.mark.parametrize(
    ("code", "why"),
    [
        ("def f(x):\n    return {x}", "a set"),
        ("def f(x):\n    return b'x'", "bytes"),
        ("class A:\n    pass\ndef f(x):\n    return A()", "an object"),
        ("def f(x):\n    return (i for i in range(x))", "an iterator"),
    ],
)
def test_a_value_json_cannot_hold_is_a_runtime_error(code: str, why: str) -> None:
    passed, _, err = _call(code, [1], [1])
    assert passed is None and f"the function returned {why}, which is not a JSON value" in err


NESTED = "def f(n):\n    v = []\n    for _ in range(n):\n        v = [v]\n    return v\n"


def test_a_value_nested_as_deep_as_python_compares_it_is_judged() -> None:
    # The codec walks a value a few frames a level: under the default limit, 330 levels were the judge's
    # RecursionError, and the program's RE; python3's own == compares 900.
    expected: list[object] = []
    for _ in range(900):
        expected = [expected]
    assert _call(NESTED, [900], expected)[0] is True
    assert _call(NESTED, [899], expected)[0] is False
    deep = "v = []\nfor _ in range(900):\n    v = [v]\n"
    assert _assert(NESTED, deep + "assert f(900) == v\n")[0] is True
    assert _assert(NESTED, deep + "assert f(901) == v\n")[0] is False


def test_a_missing_function_is_a_runtime_error() -> None:
    passed, _, err = _call("def g(x):\n    return x", [1], 1)
    assert passed is None and "NameError: name 'f' is not defined" in err


def _assert(code: str, checks: str) -> tuple[bool | None, str, str]:
    """What the assert runner says of ``code`` against ``checks``: passed/failed/neither, stdout, stderr."""
    run = subprocess.run(
        [sys.executable, "-c", harness.ASSERT_MAIN],
        input=harness.assert_stdin(code, checks),
        capture_output=True,
        timeout=30,
    )
    return harness.assert_outcome(run.returncode), run.stdout.decode(), run.stderr.decode()


def _assert_run(code: str, checks: str) -> bool:
    return _assert(code, checks)[0] is True


def test_assert_passes_only_when_the_tests_run_to_their_end() -> None:
    assert _assert_run("def f(x):\n    return x + 1", "assert f(1) == 2")
    assert _assert("def f(x):\n    return x", "assert f(1) == 2")[0] is False  # a wrong answer
    assert _assert("def f(x):\n    raise KeyError(x)", "assert f(1) == 2")[0] is None  # the program's own error


def test_early_exit_does_not_pass() -> None:
    assert _assert("import sys\nsys.exit(0)", "assert False")[0] is False
    assert _assert("import os\nos._exit(0)", "assert False")[0] is False
    # An exit in a call is the program's SystemExit: one the tests let through (``except Exception`` does not catch
    # it) fails them, and one they catch is theirs to judge, as beside the program.
    assert _assert("def f():\n    raise SystemExit(0)", "try:\n    f()\nexcept Exception:\n    pass")[0] is False
    assert _assert("def f():\n    raise SystemExit(0)", "f()")[0] is False


def test_the_program_reads_end_of_file_and_its_source_arrives_intact() -> None:
    code = "import sys\ns = 'a\\r\\nb \u00e9'\nprint(repr(sys.stdin.read()))\n"
    # Tests with non-ASCII text, lines that look like a length, and no final newline: they end where they end.
    checks = "t = '\u00e9\\n12\\n'\nassert s == 'a\\r\\nb \u00e9' and len(t) == 5"
    passed, out, err = _assert(code, checks)
    assert passed is True and out.splitlines() == ["''"], (out, err)


def test_the_runner_is_one_file_for_every_task() -> None:
    assert _assert_run("def f(x):\n    return x * 2", "assert f(2) == 4")
    assert _assert_run("def g():\n    return 'x'", "assert g() == 'x'")
    assert not _assert_run("def g():\n    return 'x'", "assert f(2) == 4")  # no f: the tests raise


@pytest.mark.parametrize(
    ("code", "checks"),
    [
        ("def f(l):\n    l.sort()", "x = [3, 1, 2]\nf(x)\nassert x == [1, 2, 3]"),  # changed in place
        ("def f(d):\n    d['k'] = 1", "x = {}\nf(x)\nassert x == {'k': 1}"),
        ("def f():\n    return (i for i in range(3))", "assert list(f()) == [0, 1, 2]"),  # an iterator
        (
            "def f():\n    return {1: (2, 3.5), 'a': {4}, 'b': frozenset([b'x'])}",
            "assert f() == {1: (2, 3.5), 'a': {4}, 'b': frozenset([b'x'])}",
        ),
        ("def f():\n    return 10 ** 5000 + 1", "assert f() == 10 ** 5000 + 1"),
        (
            "def f():\n    return float('inf'), -0.0, 1e-300, 2 + 3j",
            "assert f() == (float('inf'), 0.0, 1e-300, 2 + 3j)",
        ),
        (
            "class P:\n    def __init__(s, a):\n        s.a = a\n    def __eq__(s, o):\n        return s.a == o.a\n"
            "def f(a):\n    return P(a)",
            "assert f(1) == P(1) and f(1) != P(2)",
        ),  # the program's own objects
        (
            "def f(x):\n    if x < 0:\n        raise ValueError(x)\n    return x",
            "try:\n    f(-1)\n    assert False\nexcept ValueError:\n    pass",
        ),  # builtin exceptions cross
        ("def make():\n    return lambda y: y + 1", "assert make()(1) == 2"),  # a returned function is called
        (
            "class Solution:\n    def twoSum(self, nums, t):\n"
            "        return [0, 1] if nums[0] + nums[1] == t else []\n",
            "assert Solution().twoSum([2, 7], 9) == [0, 1]",
        ),  # LeetCode style: a method of an instance of the program's class
        (
            "class Node:\n    def __init__(s, v, nxt=None):\n        s.val, s.next = v, nxt\n"
            "    def __len__(s):\n        return 1 + (len(s.next) if s.next else 0)\n"
            "    def __iter__(s):\n        return iter([s.val] + (list(s.next) if s.next else []))\n"
            "    def __getitem__(s, i):\n        return list(s)[i]\n"
            "def build(xs):\n    return Node(xs[0], build(xs[1:])) if xs else None",
            "n = build([1, 2, 3])\nassert n.val == 1 and n.next.next.val == 3 and n.next.next.next is None\n"
            "assert len(n) == 3 and list(n) == [1, 2, 3] and n[1] == 2 and 3 in n and 4 not in n and n",
        ),  # attributes, len, iteration, items, membership and truth of the program's objects
        ("N = 3\nTABLE = {'a': [1, 2]}", "assert N == 3 and TABLE['a'] == [1, 2]"),  # the program's constants
        # compiled as `python3 main.py` compiles it: none of the sandbox's own __future__ flags
        ("def f(x: int):\n    return f.__annotations__['x'] is int", "assert f(1) is True"),
        (
            "def poly(xs, x):\n    return sum(c * x ** i for i, c in enumerate(xs))\ndef f(xs):\n    return 1.0",
            "def check(candidate):\n    assert abs(poly([-1, 1], candidate([-1, 1]))) < 1e-6\ncheck(f)",
        ),
    ],
)
def test_honest_programs_pass(code: str, checks: str) -> None:
    passed, _, err = _assert(code, checks)
    assert passed is True, err


@pytest.mark.parametrize(
    "code",
    [
        "class A:\n    def __eq__(s, o):\n        return True\n    __hash__ = object.__hash__\n"
        "def f():\n    return A()",
        "class A(int):\n    def __eq__(s, o):\n        return True\ndef f():\n    return A(0)",
        "class A(str):\n    def __eq__(s, o):\n        return True\n    def __ne__(s, o):\n        return False\n"
        "def f():\n    return A('x')",
        "class A(list):\n    def __eq__(s, o):\n        return True\ndef f():\n    return A()",
    ],
)
def test_a_value_that_equals_everything_is_a_wrong_answer(code: str) -> None:
    assert _assert(code, "assert f() == [42]")[0] is False
    assert _assert(code, "assert f() == 42")[0] is False
    # The same value behind a method and an attribute of the program's objects.
    wrapped = code + "\nclass S:\n    def g(self):\n        return f()\n"
    wrapped += "    @property\n    def v(self):\n        return f()"
    assert _assert(wrapped, "assert S().g() == 42")[0] is False
    assert _assert(wrapped, "assert S().v == [42]")[0] is False


@pytest.mark.parametrize(
    "checks",
    [
        "assert all(map(lambda x: f(x) == x, [1, 2]))",
        "assert all(a == b for a, b in zip(map(f, [1, 2]), [1, 2]))",
        "assert list(filter(f, [1, 2])) == [] and True",
        "assert next(iter(map(f, [1])), 'done') == 1",
        "for x, y in zip([1, 2], map(f, [1, 2])):\n    assert x == y",
        "import asyncio\nasync def g():\n    return f(1)\nassert asyncio.run(g()) == 1",
    ],
)
@pytest.mark.parametrize("raised", ["StopIteration", "StopAsyncIteration", "StopIteration(1)"])
def test_the_programs_stop_iteration_is_its_runtime_error(checks: str, raised: str) -> None:
    """A program's StopIteration would end the tests' map or zip as if it were exhausted: it is an error."""
    passed, _, err = _assert(f"def f(x):\n    raise {raised}", checks)
    assert passed is None and "ProgramError" in err, err


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "GeneratorExit"])
def test_an_interrupt_of_the_programs_is_not_an_exception_of_the_tests(raised: str) -> None:
    """As beside the program, ``except Exception`` in the tests does not catch it: the run is an error."""
    catching = "try:\n    f(1)\nexcept Exception:\n    pass"
    passed, _, err = _assert(f"def f(x):\n    raise {raised}", catching)
    assert passed is None and "ProgramInterrupt" in err, err
    assert _assert(f"def f(x):\n    raise {raised}", catching.replace("Exception", "BaseException"))[0] is True


def test_the_programs_own_assertion_error_is_a_runtime_error() -> None:
    assert _assert("def f(x):\n    assert x > 1\n    return x", "assert f(1) == 1")[0] is None
    # The tests may still expect it, as the type it is.
    expecting = "try:\n    f(1)\n    assert False\nexcept AssertionError:\n    pass"
    assert _assert("def f(x):\n    assert x > 1", expecting)[0] is True


@pytest.mark.parametrize(
    "demo",
    [
        "if __name__ == '__main__':\n    print(f(1))\n",
        "if __name__ == '__main__':\n    print(f(int(input())))\n",
        "if __name__ == '__main__':\n    import sys\n    sys.exit(3)\n",
        "if __name__ == '__main__':\n    import os\n    os._exit(0)\n",
        "print('demo', f(1))\n",
    ],
)
@pytest.mark.parametrize("kind", ["call", "assert"])
def test_a_demo_beside_the_function_does_not_matter(demo: str, kind: str) -> None:
    """The program runs as a module that is not __main__: a main guard's demo does not run, and what the
    module prints at the top is shown, never judged."""
    code = "def f(x):\n    return x + 1\n" + demo
    passed, out, err = _call(code, [2], 3) if kind == "call" else _assert(code, "assert f(2) == 3")
    assert passed is True, err
    assert out.startswith("demo 2\n") if demo.startswith("print") else "demo" not in out


def test_the_programs_code_never_runs_in_the_checker() -> None:
    """Tests that exec ``solution.py``'s text, or run the program's docstring examples, are the run's error: either
    would run the program's code where the tests run (an object that equals everything passes there, an example
    rebinds the tests' names)."""
    equal = "class A:\n    def __eq__(self, other):\n        return True\n\n\ndef f(x):\n    return A()\n"
    passed, _, err = _assert(equal, "ns = {}\nexec(open('solution.py').read(), ns)\nassert ns['f'](1) == 2")
    assert passed is None and "the tests compiled the program's text" in err
    forge = (
        'def f(x):\n    """\n    >>> import sys; g = sys._getframe()\n'
        '    >>> while g.f_code.co_filename != "<tests>": g = g.f_back\n'
        '    >>> g.f_globals["f"] = lambda x: x + 1\n    """\n    return 0\n'
    )
    passed, _, err = _assert(forge, "import doctest\ndoctest.testmod()\nassert f(1) == 2")
    assert passed is None and "are not the tests' own" in err
