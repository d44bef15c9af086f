"""No program earns a pass it did not solve: function-call tests, and what a program's exceptions do to tests.

A call test judges what the function returns, and only that: the return value crosses to the checker as
plain data and is compared there (never parsed from what the program printed), so a wrong function that
prints the expected answer, writes it to fd 1, or exits early from anywhere is not AC; the same program
with a right function is. An exception the program raises (a ``StopIteration`` among them) is its runtime
error, never the end of a ``map`` or ``zip`` of the tests'. And what one program makes the series' shared
checker do (import a module) changes how no other program is judged.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

RIGHT = "def f(x):\n    return [x, x * x + 1]\n"
WRONG = "def f(x):\n    return [x, 0]\n"
CALLS = [{"call": [2], "expected": [2, 5]}, {"call": [3], "expected": [3, 10]}, {"call": [-1], "expected": [-1, 2]}]

# Each dressed around a wrong function: a way to make the tests read a pass from what the program prints or
# how it ends.
FORGERIES = {
    "print-the-answer-then-exit": "import json, os, sys\nprint(json.dumps([2, 5]))\nsys.stdout.flush()\nos._exit(0)\n",
    "print-inside-the-call-then-exit": "import json, os, sys\n"
    "def f(x):\n    print(json.dumps([x, x * x + 1]))\n    sys.stdout.flush()\n    os._exit(0)\n",
    "write-fd-1-then-exit": "import os\n"
    "def f(x):\n    os.write(1, ('[%d, %d]\\n' % (x, x * x + 1)).encode())\n    os._exit(0)\n",
    "exit-zero-at-import": "import sys\nprint('[2, 5]')\nsys.exit(0)\n",
    "exit-zero-in-the-call": "def f(x):\n    raise SystemExit(0)\n",
    "atexit-prints-the-answer": "import atexit\natexit.register(lambda: print('[2, 5]'))\n",
    "redirect-stdout-of-the-caller": "import sys, io, json\n"
    "class Out(io.StringIO):\n    def write(self, s):\n"
    "        return sys.__stdout__.write(json.dumps([2, 5]) + '\\n')\n"
    "sys.stdout = Out()\n",
    "always-equal-return": "class A(list):\n    def __eq__(s, o):\n        return True\ndef f(x):\n    return A()\n",
    "stop-iteration": "def f(x):\n    raise StopIteration\n",
}

# Demos that models write beside a right function: none may take its pass away.
DEMOS = {
    "main-guard-print": "if __name__ == '__main__':\n    print(f(2))\n",
    "main-guard-input": "if __name__ == '__main__':\n    x = int(input())\n    print(f(x))\n",
    "main-guard-sys-exit": "if __name__ == '__main__':\n    import sys\n    sys.exit(main())\n",
    "main-guard-os-exit": "if __name__ == '__main__':\n    import os\n    os._exit(1)\n",
    "main-guard-raises": "if __name__ == \"__main__\":\n    raise RuntimeError('demo')\n",
    "top-level-print": "print('example:', f(2))\n",
    "top-level-json-print": "import json\nprint(json.dumps([0, 0]))\n",
    "top-level-fd-1-write": "import os\nos.write(1, b'not json at all\\n')\n",
}


def _evaluate(client: TestClient, programs: list[str], tests: list[dict[str, Any]] = CALLS) -> list[dict[str, Any]]:
    body = {"language": "python", "programs": programs, "tests": tests, "function": "f", "limits": {"timeout_s": 1.5}}
    r = client.post("/v1/evaluate", json=body)
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    return results


def test_the_right_function_passes(hostile: TestClient) -> None:
    assert [r["verdict"] for r in _evaluate(hostile, [RIGHT, WRONG])] == ["AC", "WA"]


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_no_forged_output_passes(hostile: TestClient, forgery: str) -> None:
    # Before and after the wrong function; and in a request of its own and beside others (a test series).
    programs = [WRONG + "\n" + FORGERIES[forgery], FORGERIES[forgery] + "\n" + WRONG]
    for result in _evaluate(hostile, programs) + _evaluate(hostile, [programs[0]]):
        assert result["verdict"] != "AC" and result["passed"] == 0, (forgery, result)


@pytest.mark.parametrize("demo", sorted(DEMOS))
def test_a_demo_beside_a_right_function_does_not_matter(hostile: TestClient, demo: str) -> None:
    result = _evaluate(hostile, [RIGHT + "\n" + DEMOS[demo]])[0]
    assert result["verdict"] == "AC", (demo, result)
    # A call test shows the value returned (after what the program printed), as it always has.
    assert result["tests"][0]["stdout"].endswith("[2, 5]\n"), result


# The tests of a task that call the function through map, zip, filter and next: a StopIteration of the
# program's would end them early, with every assertion skipped.
THROUGH = {
    "all-of-map": "assert all(map(lambda x: f(x) == x + 1, [1, 2, 3]))",
    "zip-with-map": "for want, got in zip([2, 3, 4], map(f, [1, 2, 3])):\n    assert want == got",
    "filter": "assert not list(filter(lambda x: f(x) != x + 1, [1, 2, 3]))",
    "next-with-default": "assert next((x for x in [1, 2, 3] if f(x) != x + 1), None) is None",
    "generator-in-sum": "assert sum(f(x) - x - 1 for x in [1, 2, 3]) == 0",
    "generator-of-calls": "def calls():\n    for x in [1, 2, 3]:\n        yield f(x)\n"
    "assert list(calls()) == [2, 3, 4]",
    "iter-with-sentinel": "xs = iter([1, 2, 3])\nassert all(f(x) == x + 1 for x in iter(lambda: next(xs, 0), 0))",
}
RAISES = {
    "stop-iteration": "def f(x):\n    raise StopIteration\n",
    "stop-iteration-with-value": "def f(x):\n    raise StopIteration(x + 1)\n",
    "stop-async-iteration": "def f(x):\n    raise StopAsyncIteration\n",
    "next-of-empty": "def f(x):\n    return next(iter([]))\n",
    "generator-exit": "def f(x):\n    raise GeneratorExit\n",
    "keyboard-interrupt": "def f(x):\n    raise KeyboardInterrupt\n",
}


@pytest.mark.parametrize("raised", sorted(RAISES))
@pytest.mark.parametrize("through", sorted(THROUGH))
def test_a_programs_exception_never_ends_the_tests_early(hostile: TestClient, through: str, raised: str) -> None:
    tests = [{"assert_code": THROUGH[through]}]
    result = _evaluate(hostile, [RAISES[raised], "def f(x):\n    return x + 1\n"], tests)
    assert [r["verdict"] for r in result] == ["RE", "AC"], (through, raised, result)


@pytest.mark.parametrize("raised", sorted(RAISES))
def test_a_programs_exception_is_its_runtime_error_in_a_call_test(hostile: TestClient, raised: str) -> None:
    assert [r["verdict"] for r in _evaluate(hostile, [RAISES[raised]])] == ["RE"], raised


NUMPY = "import numpy\ndef f(x):\n    return numpy.array([x, x * x + 1])\n"
# What programs do to the series' checker: name a module the tests' names take from them, return values
# that make it import one.
NEIGHBOURS = {
    "names-numpy": "import numpy as check\nimport numpy as np\n" + RIGHT,
    "returns-numpy": NUMPY,
    "names-a-stdlib-module": "import fractions as check\nimport decimal as np\n" + RIGHT,
}
# Tests that treat what f returns as what it is (a list or a numpy array).
NUMPY_TESTS = [
    "def check(candidate):\n    assert candidate(2) == [2, 5]\n\ncheck(f)\n",
    "def check(candidate):\n    assert list(candidate(2)) == [2, 5]\n\ncheck(f)\n",
    "def check(candidate):\n    assert hasattr(candidate(2), 'shape')\n\ncheck(f)\n",
]


LIMITS = {"timeout_s": 3.0}


def _batch(client: TestClient, groups: list[tuple[str, str]]) -> list[str]:
    """The verdicts of one program a group against assert tests, in one request (runs that share a test series)."""
    body = {
        "requests": [
            {"language": "python", "programs": [p], "tests": [{"assert_code": t}], "cache": False, "limits": LIMITS}
            for p, t in groups
        ]
    }
    r = client.post("/v1/evaluate/batch", json=body)
    assert r.status_code == 200, r.text
    return [resp["results"][0]["verdict"] for resp in r.json()["responses"]]


def _alone(client: TestClient, program: str, tests: str) -> str:
    """The verdict of an assert test in a run of its own, with a checker of its own (a request that mixes
    kinds of tests runs each test on its own)."""
    body = {
        "language": "python",
        "programs": [program],
        "cache": False,
        "limits": LIMITS,
        "tests": [{"assert_code": tests}, {"stdin": "", "expected_stdout": ""}],
    }
    r = client.post("/v1/evaluate", json=body)
    assert r.status_code == 200, r.text
    return str(r.json()["results"][0]["tests"][0]["verdict"])


@pytest.mark.parametrize("neighbour", sorted(NEIGHBOURS))
def test_no_program_changes_how_the_next_is_judged(hostile: TestClient, neighbour: str) -> None:
    programs = [(NUMPY, t) for t in NUMPY_TESTS] + [(RIGHT, t) for t in NUMPY_TESTS]
    alone = [_alone(hostile, *p) for p in programs]
    after = _batch(hostile, [(NEIGHBOURS[neighbour], NUMPY_TESTS[1]), *programs, *programs])
    assert after[1:] == alone + alone, (neighbour, alone, after)
    if "numpy" in _runtime_modules(hostile):
        # A numpy array is one in the tests, as it is in the program; a list stays a list.
        assert alone == ["RE", "AC", "AC", "AC", "AC", "WA"], alone


def _runtime_modules(client: TestClient) -> str:
    code = "try:\n    import numpy\n    print('numpy')\nexcept ImportError:\n    pass\n"
    r = client.post("/v1/execute", json={"language": "python", "code": code})
    return str(r.json()["run"]["stdout"])


# Tests that rewrite their checker's own verdict code: the checker served every later run of its series, which
# spans requests and clients, so every wrong program after them passed.
PATCHING_TESTS = (
    "import sys\nct = sys.modules['codegym_sandbox.agent.call_test']\n"
    "ct.values_match = lambda *a, **k: True\nct.python_match = lambda *a, **k: True\n"
    "ar = sys.modules['codegym_sandbox.agent.assert_runner']\nar._outcome_of = lambda exc: 'passed'\n"
    "import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\nassert True\n"
)
WRONG = "def f(x):\n    return 0\n"


def test_tests_that_patch_their_checker_judge_no_later_run(hostile: TestClient) -> None:
    calls = {"function": "f", "tests": [{"call": [2], "expected": 4}, {"call": [3], "expected": 6}]}
    for _ in range(3):  # within a request's series, and in later requests' (one worker: the same series)
        assert _batch(hostile, [("def g():\n    pass\n", PATCHING_TESTS)] * 2) == ["AC", "AC"]
        assert _batch(hostile, [(WRONG, "assert f(2) == 4\n")]) == ["WA"]
        body = {"language": "python", "programs": [WRONG], "cache": False, "limits": LIMITS, **calls}
        r = hostile.post("/v1/evaluate", json=body)
        assert r.status_code == 200 and r.json()["results"][0]["verdict"] == "WA", r.text
    mixed = _batch(hostile, [("def g():\n    pass\n", PATCHING_TESTS), (WRONG, "assert f(2) == 4\n")])
    assert mixed == ["AC", "WA"], mixed


def test_a_program_that_changes_its_arguments_changes_no_later_call(hostile: TestClient) -> None:
    # The judge of a call test kept its arguments across runs: a program that sorted its input in place left it
    # sorted, and the identity passed every later run, every client's.
    tests = [{"call": [[3, 1, 2]], "expected": [3, 2, 1]}]
    sorts = "def sort_desc(xs):\n    xs.sort(reverse=True)\n    return list(xs)\n"
    for programs, verdict in (([sorts] * 3, "AC"), (["def sort_desc(xs):\n    return xs\n"] * 2, "WA")):
        body = {"language": "python", "function": "sort_desc", "programs": programs, "tests": tests, "cache": False}
        r = hostile.post("/v1/evaluate", json=body)
        assert r.status_code == 200, r.text
        assert [p["verdict"] for p in r.json()["results"]] == [verdict] * len(programs), r.text


# Tests that leave a thread in the process that ran them: it computed on beside other tests' runs (charged to
# them: TLE) and wrote a module into the scratch directory of whatever ran next (another client's program then
# imported it).
LEFT_RUNNING = (
    "import threading\n"
    "def _plant():\n"
    "    import os, time\n"
    "    while True:\n"
    "        try:\n"
    "            with open('/tmp/box/statistics.py.tmp', 'w') as f:\n"
    "                f.write('def mean(xs):\\n    return 42\\n')\n"
    "            os.rename('/tmp/box/statistics.py.tmp', '/tmp/box/statistics.py')\n"
    "        except Exception:\n"
    "            pass\n"
    "def _burn():\n"
    "    while True:\n"
    "        pass\n"
    "threading.Thread(target=_plant, daemon=True).start()\n"
    "threading.Thread(target=_burn, daemon=True).start()\n"
    "assert f(1) == 1\n"
)


# The same burner made a child of the checker itself (clone's CLONE_PARENT), past the judge's own children.
LEFT_BESIDE = (
    "import ctypes, os, time\n"
    "if ctypes.CDLL(None).syscall(56, 0x8000 | 17, 0, 0, 0, 0) == 0:\n"
    "    os.closerange(0, 4096)\n"
    "    time.sleep(0.5)  # after its run\n"
    "    end = time.time() + 10\n"
    "    while time.time() < end:\n"
    "        pass\n"
    "    os._exit(0)\n"
    "assert f(1) == 1\n"
)


@pytest.mark.parametrize("left", [LEFT_RUNNING, LEFT_BESIDE], ids=["in-the-judge", "beside-the-judge"])
def test_what_tests_leave_running_reaches_no_later_run(hostile: TestClient, left: str) -> None:
    mean = "def avg(xs):\n    import statistics\n    return statistics.mean(xs)\n"
    idle = "def avg(xs):\n    import time\n    time.sleep(0.5)\n    return 2\n"
    honest = "assert avg([1, 2, 3]) == 2, avg([1, 2, 3])\n"
    _batch(hostile, [("def f(x):\n    return x\n", left)] * 2)  # its own time: the burner's, beside the judge
    for program in (mean, idle):
        body = {"language": "python", "programs": [program] * 2, "tests": [{"assert_code": honest}], "cache": False}
        r = hostile.post("/v1/evaluate", json={**body, "limits": LIMITS})
        assert r.status_code == 200, r.text
        for result in r.json()["results"]:
            test = result["tests"][0]
            assert test["verdict"] == "AC" and (test["cpu_s"] or 0) < 0.3, test  # the sleeper computes nothing
