"""Tests that read the program's functions as text or code (doctest, ``__code__``, ``dis``, ``inspect.getsource``,
``inspect.signature``, ``__doc__``) read what the program's text says, as ``python3`` running the program and the
tests in one file does: never the checker's own stand-in, and never what the program's process answers.

Before, doctest found no examples in the stand-ins and passed any program (``failed == 0``), a "no ``sorted``"
or "no loop" test of ``co_names`` or ``dis`` passed a program that broke it, and honest programs failed
``inspect.getsource``, ``inspect.signature`` and ``__doc__`` tests. Where the text cannot say what a name holds (a
decorated function, one the program rebinds, a class's examples), the tests' read is the run's error, never a pass.

The program's docstring examples are its code, and doctest's runner runs an example with ``exec`` where it runs:
one that walked the frames up to the tests' rebound their names, and a wrong program passed their asserts. A run of
them is the run's error (the honest program's too, which python3 passes); the tests' own examples run as before.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

ADD = 'def add(a, b):\n    """Add two numbers.\n\n    >>> add(2, 3)\n    5\n    """\n    return {body}\n'
SORT = (
    'def my_sort(xs):\n    """Sort xs without the built-in sort."""\n    out = []\n    for x in xs:\n        i = 0\n'
    "        while i < len(out) and out[i] < x:\n            i += 1\n        out.insert(i, x)\n    return out\n\n\n"
    "def fact(n):\n    return 1 if n <= 1 else n * fact(n - 1)\n"
)
CHEAT = (
    "def my_sort(xs):\n    return sorted(xs)\n\n\n"
    "def fact(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n    return r\n"
)
# A reductor whose state sets ``my_sort``'s code by a computed name, to code that ``compile`` makes.
SWAP = (
    "\n\nimport copy\n\ndef keep(x):\n    return x\n\n\nclass Swap:\n    def __reduce_ex__(self, protocol):\n"
    "        made = compile('def my_sort(xs):\\n    return sorted(xs)\\n', 'x', 'exec').co_consts[0]\n"
    "        return (keep, (my_sort,), (None, {'_' * 2 + 'code' + '_' * 2: made}))\n\n\ncopy.copy(Swap())\n"
)
DOCTESTS = {
    "testmod": "import doctest\nassert doctest.testmod().failed == 0\n",
    "testmod-attempted": "import doctest\nr = doctest.testmod()\nassert r.failed == 0 and r.attempted == 1\n",
    "testmod-solution": "import doctest\nimport solution\n\ndef test_doc():\n"
    "    assert doctest.testmod(solution).failed == 0\n",
    "from-solution": "import doctest\nfrom solution import add\n\ndef test_doc():\n"
    "    doctest.run_docstring_examples(add, {'add': add})\n    assert add(2, 3) == 5\n",
    "finder": "import doctest\nfinder = doctest.DocTestFinder()\nrunner = doctest.DocTestRunner()\n"
    "for t in finder.find(add):\n    runner.run(t)\nassert runner.summarize().failed == 0 and runner.tries == 1\n",
}
CODE_TESTS = {
    "co_names": "assert my_sort([3, 1, 2]) == [1, 2, 3]\nassert 'sorted' not in my_sort.__code__.co_names\n",
    "dis-sorted": "import dis\nassert my_sort([3, 1, 2]) == [1, 2, 3]\n"
    "assert not any(i.argval == 'sorted' for i in dis.get_instructions(my_sort))\n",
    "dis-recursive": "import dis\nassert fact(5) == 120\n"
    "assert not any(i.opname == 'FOR_ITER' for i in dis.get_instructions(fact))\n",
    "getsource": "import inspect\nassert my_sort([3, 1, 2]) == [1, 2, 3]\n"
    "assert 'sorted' not in inspect.getsource(my_sort) and '.sort(' not in inspect.getsource(my_sort)\n",
    "docstring": "assert my_sort([2, 1]) == [1, 2]\nassert my_sort.__doc__ and 'sort' in my_sort.__doc__\n",
    "signature": "import inspect\nassert my_sort([2, 1]) == [1, 2]\n"
    "assert list(inspect.signature(my_sort).parameters) == ['xs']\n",
    "argcount": "assert fact(4) == 24\nassert fact.__code__.co_argcount == 1 and fact.__code__.co_name == 'fact'\n",
}


def _verdicts(client: TestClient, tests: str, programs: list[str]) -> list[str]:
    body: dict[str, Any] = {"language": "python", "programs": programs, "tests": [{"assert_code": tests}]}
    r = client.post("/v1/evaluate", json={**body, "cache": False, "limits": {"timeout_s": 5}})
    assert r.status_code == 200, r.text
    return [p["verdict"] for p in r.json()["results"]]


def _reference(tmp_path: Path, program: str, tests: str) -> str:
    """What ``python3`` says: the program and the tests in one file, or a test file beside ``solution.py`` where
    the tests import it (its test functions called, as pytest would)."""
    if "solution" in tests:
        (tmp_path / "solution.py").write_text(program)
        calls = "".join(f"{line[4:].partition('(')[0]}()\n" for line in tests.splitlines() if line.startswith("def "))
        text = tests + calls
    else:
        text = program + "\n\n" + tests
    (tmp_path / "main.py").write_text(text)
    done = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    if done.returncode == 0:
        return "AC"
    return "WA" if done.stderr.strip().splitlines()[-1].startswith("AssertionError") else "RE"


@pytest.mark.parametrize("form", sorted(DOCTESTS))
def test_doctest_never_runs_the_programs_examples(hostile: TestClient, tmp_path: Path, form: str) -> None:
    """python3 passes the honest program and fails the wrong one; the checker runs neither's examples: both RE."""
    programs = [ADD.format(body="a + b"), ADD.format(body="0")]
    expected = [_reference(tmp_path, p, DOCTESTS[form]) for p in programs]
    assert expected == ["AC", "WA"]
    assert _verdicts(hostile, DOCTESTS[form], programs) == ["RE", "RE"]


def test_an_example_that_rebinds_the_tests_names_passes_nothing(hostile: TestClient) -> None:
    """An example that walks the frames up to the tests' and rebinds ``add`` made a wrong program pass the asserts
    after ``doctest.testmod()``, in the checker as in python3: here it never runs, whatever the tests catch."""
    forge = (
        'def add(a, b):\n    """Add.\n\n    >>> import sys; f = sys._getframe()\n'
        '    >>> while f is not None and f.f_code.co_filename != "<tests>": f = f.f_back\n'
        '    >>> f.f_globals["add"] = lambda a, b: a + b\n    """\n    return 0\n'
    )
    asserts = "assert add(2, 3) == 5\nassert add(10, -4) == 6\n"
    tests = "import doctest\ndoctest.testmod()\n" + asserts
    caught = "import doctest\ntry:\n    doctest.testmod()\nexcept BaseException:\n    pass\n" + asserts
    wrong = "def add(a, b):\n    return 0\n"
    assert _verdicts(hostile, tests, [forge, wrong]) == ["RE", "WA"]
    assert _verdicts(hostile, caught, [forge]) == ["RE"]


def test_doctest_of_the_programs_file_runs_none_of_it(hostile: TestClient) -> None:
    """``testfile('solution.py')`` reads the program's text and would run its examples here: the run's error."""
    program = ADD.format(body="0").replace("    >>> add(2, 3)", "    >>> import sys; sys.exit(0)\n    >>> add(2, 3)")
    tests = "import doctest\nr = doctest.testfile('solution.py', module_relative=False)\nassert r.failed == 0\n"
    assert _verdicts(hostile, tests, [ADD.format(body="a + b"), program]) == ["RE", "RE"]


def test_the_tests_own_examples_run_as_python_runs_them(hostile: TestClient, tmp_path: Path) -> None:
    """Examples in a docstring of the tests' own run as before (through the stand-ins, in the program's process)."""
    tests = (
        "import doctest\n\ndef check():\n    '''\n    >>> add(2, 3)\n    5\n    '''\n\n"
        "runner = doctest.DocTestRunner()\nfor t in doctest.DocTestFinder().find(check, globs={'add': add}):\n"
        "    runner.run(t)\nassert runner.summarize().failed == 0 and runner.tries == 1\n"
    )
    programs = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return 0\n"]
    expected = [_reference(tmp_path, p, tests) for p in programs]
    assert expected == ["AC", "WA"]
    assert _verdicts(hostile, tests, programs) == expected


def test_doctest_runs_neither_the_modules_docstring_nor_the_functions(hostile: TestClient, tmp_path: Path) -> None:
    program = (
        "'''Greetings.\n\n>>> greet('z')\nHello z\n'''\n\n\ndef greet(n):\n    '''\n    >>> greet('x')\n    Hello x\n"
        "    '''\n    print('Hello ' + n)\n"
    )
    tests = "import doctest\nimport solution\n\ndef test_doc():\n    assert doctest.testmod(solution).attempted == 2\n"
    tests += "    assert doctest.testmod(solution).failed == 0\n"
    wrong = program.replace("print('Hello ' + n)", "print(('Hello ' if n == 'x' else 'Hi ') + n)")
    expected = [_reference(tmp_path, p, tests) for p in (program, wrong)]
    assert expected == ["AC", "WA"]
    assert _verdicts(hostile, tests, [program, wrong]) == ["RE", "RE"]


def test_doctest_examples_of_solution_run_nowhere_here(hostile: TestClient, tmp_path: Path) -> None:
    program = "MOD = 7\n\n\ndef f(x):\n    '''\n    >>> f(MOD + 1)\n    1\n    '''\n    return x % MOD\n"
    tests = "import doctest\nimport solution\n\ndef test_doc():\n    r = doctest.testmod(solution)\n"
    tests += "    assert r.failed == 0 and r.attempted == 1\n"
    programs = [program, program.replace("x % MOD", "x % 5")]
    expected = [_reference(tmp_path, p, tests) for p in programs]
    assert expected == ["AC", "WA"]
    assert _verdicts(hostile, tests, programs) == ["RE", "RE"]


@pytest.mark.parametrize("form", sorted(CODE_TESTS))
def test_code_source_and_signature_are_the_programs_as_python_reads_them(
    hostile: TestClient, tmp_path: Path, form: str
) -> None:
    expected = [_reference(tmp_path, p, CODE_TESTS[form]) for p in (SORT, CHEAT)]
    assert expected[0] == "AC"
    assert _verdicts(hostile, CODE_TESTS[form], [SORT, CHEAT]) == expected


def test_docstrings_and_annotations_the_compiler_binds_leave_the_text_carried(hostile: TestClient) -> None:
    header = "'''Sorting.'''\nfrom dataclasses import dataclass\n\nLIMIT: int = 10\n\n\n@dataclass\nclass P:\n"
    header += "    '''A point.'''\n    x: int = 0\n\n\n"
    tests = CODE_TESTS["co_names"] + CODE_TESTS["getsource"] + "assert P().x == 0\n"
    assert _verdicts(hostile, tests, [header + SORT, header + CHEAT]) == ["AC", "WA"]


def test_a_functions_text_reads_as_python_shows_it(hostile: TestClient, tmp_path: Path) -> None:
    program = (
        "import math\n\n\ndef f(a: int, b: list[int] = None, /, c=3, *args: str, d: 'x' = -1.5, e=(1, 'a'), **kw)"
        " -> int | None:\n    '''Doc.'''\n    return a\n\n\ndef g(x):\n    return x\n"
    )
    tests = (
        "import inspect\n"
        "assert str(inspect.signature(f)) == \"(a: int, b: list[int] = None, /, c=3, *args: str, d: 'x' = -1.5, "
        "e=(1, 'a'), **kw) -> int | None\"\n"
        "assert f.__defaults__ == (None, 3) and f.__kwdefaults__ == {'d': -1.5, 'e': (1, 'a')}\n"
        "assert f.__annotations__ == {'a': int, 'b': list[int], 'args': str, 'd': 'x', 'return': int | None}\n"
        "assert f.__name__ == f.__qualname__ == 'f' and f.__module__ == '__main__' and f.__doc__ == 'Doc.'\n"
        "assert inspect.isfunction(f) and f(1) == 1 and f.__code__.co_varnames[:3] == ('a', 'b', 'c')\n"
        "assert g.__doc__ is None and g.__closure__ is None\n"
        "assert inspect.getsourcelines(g) == (['def g(x):\\n', '    return x\\n'], 9)\n"
    )
    assert _reference(tmp_path, program, tests) == "AC"
    assert _verdicts(hostile, tests, [program, program.replace("return a\n", "return -a\n")]) == ["AC", "WA"]


@pytest.mark.parametrize(
    ("program", "tests"),
    [
        # A name the program binds again, or binds without naming it: its text says nothing of what it holds.
        (
            SORT + "\nmy_sort = lambda xs: sorted(xs)\n",
            CODE_TESTS["co_names"],
        ),
        (
            SORT + "\nglobals()['my_sort'] = lambda xs: sorted(xs)\n",
            CODE_TESTS["getsource"],
        ),
        (
            SORT + "\nNAME = getattr(my_sort, '__name__')\n",
            CODE_TESTS["dis-sorted"],
        ),
        # Code swapped in at run time by a reductor's state (an attribute set by a computed name, code made by
        # compile): the process runs other code than the text's.
        (
            CHEAT.replace("return sorted(xs)", "return list(xs)") + SWAP,
            CODE_TESTS["co_names"],
        ),
        (
            CHEAT.replace("return sorted(xs)", "return list(xs)") + SWAP,
            CODE_TESTS["dis-sorted"],
        ),
        (
            CHEAT.replace("return sorted(xs)", "return list(xs)")
            + SWAP.replace("import copy\n", "import dataclasses\n").replace("copy.copy", "dataclasses.copy.copy"),
            CODE_TESTS["co_names"],
        ),
        # Examples no stand-in carries: a decorated function's, a class's.
        (
            "import functools\n\n@functools.lru_cache\ndef fib(n):\n    '''\n    >>> fib(10)\n    55\n    '''\n"
            "    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
            "import doctest\nassert doctest.testmod().failed == 0\n",
        ),
        (
            "class Stack:\n    '''\n    >>> s = Stack(); s.push(1); s.pop()\n    1\n    '''\n"
            "    def __init__(self):\n        self.items = []\n\n"
            "    def push(self, x):\n        self.items.append(x)\n\n"
            "    def pop(self):\n        return self.items.pop()\n",
            "import doctest\nassert doctest.testmod().failed == 0\n",
        ),
        (
            "class Stack:\n    '''\n    >>> Stack().size()\n    0\n    '''\n\n    def size(self):\n        return 1\n",
            "import doctest\nimport solution\n\ndef test_doc():\n    assert doctest.testmod(solution).failed == 0\n",
        ),
        # A default the checker would have to evaluate (the program's code): neither its repr nor its value.
        (
            "K = 3\n\ndef g(x=K):\n    return x\n",
            "import inspect\nassert str(inspect.signature(g)) == '(x=3)'\n",
        ),
    ],
    ids=[
        "rebound",
        "rebound-unnamed",
        "could-rebind",
        "reductor",
        "reductor-dis",
        "reductor-reached",
        "decorated",
        "class",
        "class-in-solution",
        "default",
    ],
)
def test_what_the_text_cannot_say_is_the_runs_error(hostile: TestClient, program: str, tests: str) -> None:
    assert _verdicts(hostile, tests, [program]) == ["RE"]


def test_tests_that_read_no_function_are_as_before(hostile: TestClient) -> None:
    """Programs that bind names dynamically still pass tests that only call them; so do decorated functions."""
    program = (
        "import functools\n\n@functools.lru_cache\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "\nglobals()['double'] = lambda x: 2 * x\n\ndef add(a, b):\n    return a + b\n"
    )
    tests = "import doctest\nassert fib(10) == 55 and add(1, 2) == 3\nassert doctest.testmod().attempted == 0\n"
    assert _verdicts(hostile, tests, [program]) == ["AC"]
