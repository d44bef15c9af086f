"""The checker takes only the names it asked for, and only the program's own: on every backend.

A program that computes nothing answers the checker for names the tests use (``abs``, ``all``, ``range``,
``math``, ...) with stand-ins that "pass" tolerance, set, loop and ``all()`` tests and print what they were
passed (see ``checker_names``). The checker asks the program's process only for the names the program binds at
top level (read from its code, not from its process's answer), never for a builtin, reads each answer against
the schema of what it asked (``agent/checker_wire.py``), and resolves every other name to its own. So none of
these programs passes a real HumanEval task through the evaluator's ``Scorer``, ``CodeReward`` or ``/submit``,
no stand-in is ever called (the tests' expected values never reach the program), and the canonical solutions
stay AC.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from codegym_evaluator.scoring import Scorer
from codegym_evaluator.service.app import create_app
from codegym_evaluator.service.settings import EvaluatorSettings
from codegym_evaluator.tasks import Task, load_tasks
from codegym_evaluator.trl_reward import CodeReward
from fastapi.testclient import TestClient

from .checker_names import INJECTIONS, forged
from .transports import forwarding

# HumanEval tasks whose every test goes through a builtin or the prompt's ``math`` (a tolerance with ``abs``,
# a loop over ``range``, ``sorted``/``set``/``tuple`` of the answer): each passed with a forged answer before.
TASK_IDS = ("HumanEval/4", "HumanEval/32", "HumanEval/33", "HumanEval/37", "HumanEval/38", "HumanEval/50")


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return [t for t in load_tasks("humaneval") if t.task_id in TASK_IDS]


def scores(hostile: TestClient, task: Task, completions: list[str]) -> list[Any]:
    async def score() -> list[Any]:
        async with Scorer("http://sandbox", transport=forwarding(hostile), batch_runs=0, retries=0) as scorer:
            return list(await scorer.score_group(task, completions, extract=False))

    return asyncio.run(score())


@pytest.mark.parametrize("injection", sorted(INJECTIONS))
def test_no_forged_name_passes_a_humaneval_task_through_the_scorer(
    hostile: TestClient, tasks: list[Task], injection: str
) -> None:
    for task in tasks:
        got = scores(hostile, task, [forged(str(task.entry_point), injection), task.metadata["canonical_solution"]])
        assert got[0].verdict != "AC" and got[1].verdict == "AC", (task.task_id, injection, got)


def test_no_forged_name_earns_a_reward(hostile: TestClient, tasks: list[Task]) -> None:
    reward = CodeReward("http://codegym", api="native", transport=forwarding(hostile))
    programs = [
        t.prompt + code
        for t in tasks
        for code in (forged(str(t.entry_point), "patch-the-answer"), t.metadata["canonical_solution"])
    ]
    got = reward(
        prompts=[t.prompt for t in tasks for _ in range(2)],
        completions=[f"```python\n{p}\n```" for p in programs],
        tests=[t.tests[0]["assert_code"] for t in tasks for _ in range(2)],
        entry_point=[t.entry_point for t in tasks for _ in range(2)],
    )
    assert got[0::2] == [0.0] * len(tasks) and got[1::2] == [1.0] * len(tasks), got


def test_no_forged_name_is_accepted_by_submit(hostile: TestClient, tasks: list[Task], tmp_path: Path) -> None:
    settings = EvaluatorSettings(sandbox_url=["http://sandbox"], data_dir=str(tmp_path))
    app = create_app(settings, sandbox_transport=forwarding(hostile))

    async def submit() -> list[bool]:
        accepted = []
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://eval") as client,
        ):
            for task in tasks[:2]:
                for code in (
                    forged(str(task.entry_point), "patch-the-serialiser"),
                    task.metadata["canonical_solution"],
                ):
                    body: dict[str, Any] = {
                        "dataset": "humaneval",
                        "id": task.task_id,
                        "completion": code,
                        "config": {},
                    }
                    r = await client.post("/submit", json=body)
                    assert r.status_code == 200, r.text
                    accepted.append(r.json()["accepted"])
        return accepted

    assert asyncio.run(submit()) == [False, True, False, True]


# Tests that go through builtins only: what the stand-ins fake. ``f(x) = x * x + 1``.
RIGHT = "def f(x):\n    return x * x + 1\n"
TESTS = (
    "import math\n"
    "def check(candidate):\n"
    "    assert abs(candidate(2) - 5.0) < 1e-6\n"
    "    assert math.fabs(candidate(3) - 10.0) < 1e-6\n"
    "    assert set([candidate(0), candidate(1)]) == set([2, 1])\n"
    "    assert sorted([candidate(1), candidate(0)]) == sorted([1, 2])\n"
    "    assert all(candidate(x) == x * x + 1 for x in range(4))\n"
    "    assert isinstance(candidate(1), int) and round(float(candidate(1))) == 2 and len(str(candidate(7))) == 2\n"
    "check(f)\n"
)


@pytest.mark.parametrize("injection", sorted(INJECTIONS))
def test_the_expected_values_never_reach_a_stand_in(hostile: TestClient, injection: str) -> None:
    programs = [RIGHT, forged("f", injection), forged("f", injection, "return args[0] * args[0] + 1")]
    # Alone, and in one test series (one checker for all its runs), so that the checker's own names hold.
    alone = [_evaluate(hostile, [p])[0] for p in programs]
    together = _evaluate(hostile, programs)
    # A right answer stays right beside names it binds; a program that patched the agent to answer for more
    # than it was asked is its own error, right answer or not.
    verdicts = ["AC", "WA", "AC"] if injection == "bind-at-top-level" else ["AC", "RE", "RE"]
    for results in (alone, together):
        assert [r["verdict"] for r in results] == verdicts, (injection, results)
        assert all("SAW" not in r["tests"][0]["stdout"] for r in results), (injection, results)


def _evaluate(client: TestClient, programs: list[str], tests: str = TESTS) -> list[dict[str, Any]]:
    body = {"language": "python", "programs": programs, "tests": [{"assert_code": tests}], "limits": {"timeout_s": 3}}
    r = client.post("/v1/evaluate", json=body)
    assert r.status_code == 200, r.text
    results: list[dict[str, Any]] = r.json()["results"]
    return results


# Tests that use a module without importing it rely on the program's ``import``: whatever else a program binds
# to that name, the tests get the module (and a name the tests bind themselves, even where the binding fails,
# is never the program's). ``volume(r)``, a sphere's volume.
SPHERE = "assert math.isclose(volume(10), 4188.79, rel_tol=1e-3)\nassert math.isclose(volume(2), 33.51, rel_tol=1e-3)\n"
ALIASED = "assert np.isclose(volume(1), 4.2)\n"
GUARDED = "try:\n    import no_such_module_here as np\nexcept ImportError:\n    pass\n" + ALIASED
FAKES = {
    "a namespace": "import types\nmath = types.SimpleNamespace(isclose=lambda *a, **k: True)\n",
    "a class": "class math:\n    @staticmethod\n    def isclose(*args, **kwargs):\n        return True\n",
    "a value": "math = 0\n",
}
WRONG_VOLUME = "def volume(r):\n    return 0\n"


@pytest.mark.parametrize("fake", sorted(FAKES))
def test_a_module_the_tests_use_is_the_module(hostile: TestClient, fake: str) -> None:
    right = "import math\ndef volume(r):\n    return 4 / 3 * math.pi * r ** 3\n"
    results = _evaluate(hostile, [FAKES[fake] + WRONG_VOLUME, right], SPHERE)
    assert [r["verdict"] for r in results] == ["WA", "AC"], results


@pytest.mark.parametrize("tests", [GUARDED, ALIASED], ids=["guarded-import", "alias"])
def test_no_fake_stands_for_an_alias_or_a_name_the_tests_bind(hostile: TestClient, tests: str) -> None:
    fake_np = "class np:\n    @staticmethod\n    def isclose(*args, **kwargs):\n        return True\n"
    (result,) = _evaluate(hostile, [fake_np + WRONG_VOLUME], tests)
    assert result["verdict"] in ("WA", "RE"), result  # numpy's isclose (WA), or no numpy here (RE)


def test_a_function_named_like_a_module_is_the_programs(hostile: TestClient) -> None:
    """Called, not used as a module: ``copy`` is the task's function."""
    tests = "assert copy([1]) == [1, 1]\nassert random(3) == 4\n"
    program = "def copy(xs):\n    return xs * 2\ndef random(n):\n    return n + 1\n"
    assert [r["verdict"] for r in _evaluate(hostile, [program], tests)] == ["AC"]


def test_what_the_tests_import_is_theirs(hostile: TestClient) -> None:
    """A star import (LeetCode's prelude, which the evaluator puts before the tests) binds what it binds there,
    whatever the program binds to the same names."""
    tests = "from collections import *\nassert Counter(count([1, 2, 2])) == Counter({2: 2, 1: 1})\n"
    fake = "def Counter(*args, **kwargs):\n    return 7\ndef count(xs):\n    return []\n"
    right = "def count(xs):\n    return xs\n"
    assert [r["verdict"] for r in _evaluate(hostile, [fake, right], tests)] == ["WA", "AC"]


@pytest.mark.parametrize(
    "tests",
    [
        "assert pow(2, 3) == 8\nassert pow(3, 2) == 9\n",
        "def check(candidate):\n    assert candidate(2, 3) == 8\n\ncheck(pow)\n",
    ],
    ids=["called", "humaneval-check"],
)
def test_an_entry_point_named_like_a_builtin_is_the_programs(hostile: TestClient, tests: str) -> None:
    """The task declares its entry point (``function``): the program's, though a builtin has its name. Without
    the declaration, a builtin's name stays the checker's (a program's ``def len`` decides no test's ``len``)."""
    wrong, right = "def pow(a, b):\n    return 0\n", "def pow(a, b):\n    return a ** b\n"
    body = {"language": "python", "programs": [wrong, right], "tests": [{"assert_code": tests}], "function": "pow"}
    r = hostile.post("/v1/evaluate", json={**body, "limits": {"timeout_s": 3}})
    assert [p["verdict"] for p in r.json()["results"]] == ["WA", "AC"], r.text
    assert [p["verdict"] for p in _evaluate(hostile, ["def len(xs):\n    return 5\n"], "assert len([1]) == 5\n")] == [
        "WA"
    ]


def test_the_scorer_declares_an_assert_tasks_entry_point(hostile: TestClient) -> None:
    tests = [{"assert_code": "assert sorted([3, 1, 2]) == [1, 2, 3]\n"}]
    task = Task("own/sorted", "Write sorted(xs), without the builtin.", "assert", tests, "sorted")
    right = "def sorted(xs):\n    return [min(xs)] + sorted([x for x in xs if x != min(xs)]) if xs else []\n"
    got = scores(hostile, task, ["def sorted(xs):\n    return xs\n", right])
    assert [s.verdict for s in got] == ["WA", "AC"], got


@pytest.mark.parametrize(
    "tests",
    [
        'assert eval("add(1, 2)") == 3\n',
        'name = "add"\nassert globals()[name](1, 2) == 3\n',
        'import sys\nassert getattr(sys.modules[__name__], "add")(1, 2) == 3\n',
        'for name, args, want in [("add", (1, 2), 3)]:\n    assert eval(name)(*args) == want\n',
    ],
    ids=["eval", "globals", "module", "table"],
)
def test_names_the_tests_look_up_as_they_run_are_the_programs(hostile: TestClient, tests: str) -> None:
    right, wrong = "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return 0\n"
    assert [r["verdict"] for r in _evaluate(hostile, [wrong, right], tests)] == ["WA", "AC"]
    # A module's name is the module there too, whatever the program bound to it.
    fake = "import types\nmath = types.SimpleNamespace(isclose=lambda *a, **k: True)\n" + WRONG_VOLUME
    dynamic = 'assert eval("math.isclose(volume(10), 4188.79, rel_tol=1e-3)")\n'
    assert [r["verdict"] for r in _evaluate(hostile, [fake], dynamic)] == ["WA"]


@pytest.mark.parametrize(
    ("raised", "caught"),
    [
        ("class InvalidInput(ValueError):\n    pass\n", "InvalidInput('bad')"),
        ("import json\n", "json.JSONDecodeError('bad', '{', 0)"),
        ("", "UnicodeDecodeError('utf-8', b'\\xff', 0, 1, 'bad')"),
    ],
    ids=["own-class", "stdlib-class", "many-arguments"],
)
def test_a_programs_exception_is_caught_as_its_builtin_base(hostile: TestClient, raised: str, caught: str) -> None:
    program = f"{raised}def parse(s):\n    raise {caught}\n"
    tests = "try:\n    parse('x')\n    raise AssertionError('no error')\nexcept ValueError:\n    pass\n"
    assert [r["verdict"] for r in _evaluate(hostile, [program], tests)] == ["AC"]
    # Never a way out of the tests: a program's StopIteration or SystemExit is no control flow of theirs.
    for stop in ("class Done(StopIteration):\n    pass\n", "class Out(SystemExit):\n    pass\n"):
        name = stop.split()[1].split("(")[0]
        ended = f"{stop}def parse(s):\n    raise {name}()\n"
        loop = "for x in map(parse, ['a']):\n    pass\nassert False\n"
        assert [r["verdict"] for r in _evaluate(hostile, [ended], loop)] in (["RE"], ["WA"]), stop


def test_a_programs_builtins_are_never_the_tests(hostile: TestClient) -> None:
    """Tests that look names up as they run take every name the program binds, but never one of Python's own: a
    program's ``__builtins__ = {"abs": ...}`` became the tests' builtins, and a wrong program passed."""
    fake = "def f(x):\n    return 0.0\ndef _abs(v):\n    return 0.0\n__builtins__ = {'abs': _abs, 'eval': eval}\n"
    tests = "def _show(s):\n    return eval(s)\n\nassert abs(f(2.0) - 4.0) < 1e-9\n"
    assert [r["verdict"] for r in _evaluate(hostile, [fake, "def f(x):\n    return x * x\n"], tests)] == ["WA", "AC"]


def test_a_function_the_tests_name_stays_the_programs_beside_a_dynamic_lookup(hostile: TestClient) -> None:
    """``chunk``, ``trace``, ``copy``: a module's name, and the task's function. Named by the tests, it is the
    program's, though they also look names up as they run."""
    program = "def chunk(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]\n"
    tests = 'assert chunk([1, 2, 3], 2) == [[1, 2], [3]]\nassert callable(globals()["chunk"])\n'
    assert [r["verdict"] for r in _evaluate(hostile, [program], tests)] == ["AC"]


# What the program imports stays in the program's process: the checker never calls a library function the
# program names (``os.getuid`` answers the checker's uid there, ``sys.exit`` ends the checker's tests).
IMPORTED = {
    "exit-as-the-function": ("from sys import exit as f\n", "assert f(0) == 1\n"),
    "test-runner-as-the-function": ("from unittest import main as f\n", "assert f(5) == 1\n"),
    "exit-as-the-class": (
        "from sys import exit as Solution\n",
        "assert Solution().twoSum([2, 7, 11], 9) == [0, 1]\n",
    ),
    "exit-in-a-guarded-import": (
        "try:\n    import no_such_module_zz\n    from sys import exit as f\nexcept BaseException:\n    pass\n",
        "assert f(0) == 1\n",
    ),
    "the-checkers-uid": ("from os import getuid as helper\n", "assert helper() == 0\n"),
}


@pytest.mark.parametrize("case", sorted(IMPORTED))
def test_what_the_program_imports_runs_in_the_programs_process(hostile: TestClient, case: str) -> None:
    program, tests = IMPORTED[case]
    (result,) = _evaluate(hostile, [program], tests)
    assert result["verdict"] in ("WA", "RE"), result


def test_values_named_like_a_module_are_the_programs(hostile: TestClient) -> None:
    """Data or an object of the program's that the tests pass to it, though a module has the name."""
    program = (
        "numbers = [1, 2, 3]\narray = (4, 5)\nclass Queue:\n    def __init__(self):\n        self.items = []\n"
        "queue = Queue()\ndef total(xs):\n    return sum(xs)\ndef size(q):\n    return len(q.items)\n"
    )
    tests = "assert total(numbers) == 6\nassert total(array) == 9\nq = queue\nassert size(queue) == size(q) == 0\n"
    assert [r["verdict"] for r in _evaluate(hostile, [program], tests)] == ["AC"]


def test_a_well_known_package_that_is_missing_is_no_programs_class(hostile: TestClient) -> None:
    fake = "class sympy:\n    Rational = staticmethod(lambda *a: 0)\ndef f():\n    return 0\n"
    (result,) = _evaluate(hostile, [fake], "assert f() == sympy.Rational(1, 3)\n")
    assert result["verdict"] in ("WA", "RE"), result  # sympy's Rational (WA), or no sympy here (RE)


def test_a_function_of_the_programs_passed_to_the_tests_is_the_programs(hostile: TestClient) -> None:
    """``trace`` names a module, and the program's function: passed uncalled to the tests' ``check``."""
    program = "def trace(m):\n    return sum(m[i][i] for i in range(len(m)))\n"
    tests = "def check(candidate):\n    assert candidate([[1, 2], [3, 4]]) == 5\n\ncheck(trace)\n"
    assert [r["verdict"] for r in _evaluate(hostile, [program], tests)] == ["AC"]


@pytest.mark.parametrize(
    ("program", "tests"),
    [
        (
            "import xml.dom.minidom\ndef tag(s):\n    return xml.dom.minidom.parseString(s).documentElement.tagName\n",
            "assert tag('<a/>') == xml.dom.minidom.parseString('<a/>').documentElement.tagName == 'a'\n",
        ),
        (
            "import urllib.parse\ndef quote(s):\n    return urllib.parse.quote(s)\n",
            "assert quote('a b') == urllib.parse.quote('a b') == 'a%20b'\n",
        ),
    ],
    ids=["xml.dom.minidom", "urllib.parse"],
)
def test_a_submodule_the_program_imported_is_there_for_the_tests(hostile: TestClient, program: str, tests: str) -> None:
    """``import a.b.c`` binds ``a``: the tests' ``a.b.c.f`` reads the submodule, as in ``python main.py``."""
    assert [r["verdict"] for r in _evaluate(hostile, [program], tests)] == ["AC"]


STAR = (
    "from solution import *\n\ndef test_group():\n"
    "    assert sorted(group(['ab', 'ba', 'c'])) == [['ab', 'ba'], ['c']]\n"
)


@pytest.mark.parametrize(
    ("fake", "tests"),
    [
        ("def sorted(x, key=None):\n    return [['ab', 'ba'], ['c']]\n", STAR),
        (
            "class _M:\n    def isclose(self, *a, **k):\n        return True\nmath = _M()\n",
            "import math\nfrom solution import *\n\ndef test_area():\n    assert math.isclose(group(2), 12.566)\n",
        ),
        (  # round 66: a helper the tests import before they take the program's names
            "def isclose(*a, **k):\n    return True\n",
            "from math import isclose\nfrom solution import *\n\ndef test_area():\n"
            "    assert isclose(group(2), 12.566)\n",
        ),
        (
            "def approx(x, *a, **k):\n    return None\n",
            "from pytest import approx\nfrom solution import *\n\ndef test_area():\n"
            "    assert group(2) == approx(12.566)\n",
        ),
    ],
    ids=["a-builtin", "a-module", "an-imported-helper", "an-imported-test-helper"],
)
def test_a_star_import_of_the_program_takes_no_builtin_and_no_module(
    hostile: TestClient, fake: str, tests: str
) -> None:
    (result,) = _evaluate(hostile, [fake + "def group(x):\n    return None\n"], tests)
    assert result["verdict"] in ("WA", "RE"), result
    right = "def group(words):\n    return [['ab', 'ba'], ['c']]\n"
    assert [r["verdict"] for r in _evaluate(hostile, [right], STAR)] == ["AC"]


def test_the_checker_imports_no_module_the_program_names_for_another_name(hostile: TestClient) -> None:
    """A module's code runs when it is imported: the checker imports the module a name of the program's is only
    where that name names it (``math``, ``np``) or the checker has it already, never one the program chose."""
    program = (
        "import types\ncheck = types.ModuleType('test.support')\nhelper = check\ndef add(a, b):\n    return a + b\n"
    )
    tests = (
        "import sys\nassert 'test.support' not in sys.modules\n"
        "def check(candidate):\n    assert candidate(1, 2) == 3\n\ncheck(add)\n"
        "assert 'test.support' not in sys.modules, 'imported for the program'\n"
    )
    assert [r["verdict"] for r in _evaluate(hostile, [program], tests)] == ["AC"]
    (used,) = _evaluate(hostile, [program], "assert helper.main() == 0\n")  # the program's empty module
    assert used["verdict"] == "RE" and "AttributeError" in used["tests"][0]["stderr"], used
    honest = "import math as m\ndef area(r):\n    return m.pi * r * r\n"
    assert [r["verdict"] for r in _evaluate(hostile, [honest], "assert area(1) == m.pi\n")] == ["AC"]


def test_no_name_of_the_programs_is_one_of_the_checkers_modules(hostile: TestClient) -> None:
    program = "import types\nhelper = types.ModuleType('codegym_sandbox.agent.assert_runner')\n"
    (result,) = _evaluate(hostile, [program], "assert helper.Checker.__name__ == 'Checker'\n")
    assert result["verdict"] == "RE" and "AttributeError" in result["tests"][0]["stderr"], result


def test_the_programs_library_types_are_the_librarys(hostile: TestClient) -> None:
    """``from solution import *`` (or a name the program imported) gives the tests typing's ``List`` itself: a
    stand-in that calls into the program's process was no type. collections' types stay the program's, so that
    what the tests make of them can be passed to it."""
    program = (
        "from typing import List, Optional\nfrom collections import deque\n"
        "def total(a: List[int]) -> int:\n    return sum(a)\n"
        "def drain(q):\n    return [q.popleft() for _ in range(len(q))]\n"
    )
    tests = (
        "from solution import *\ndef helper(x: List[int]) -> Optional[int]:\n    return total(x)\n"
        "assert helper([1, 2]) == 3\nassert drain(deque([1, 2])) == [1, 2]\n"
    )
    assert [r["verdict"] for r in _evaluate(hostile, [program], tests)] == ["AC"]


@pytest.mark.parametrize(
    ("program", "tests", "verdict"),
    [
        # A module the checker has (``_thread``), bound to a name the tests call a method of: its exit() would end
        # the tests in the checker, which read as their own exit and passed.
        ("import _thread as Menu\n", "assert Menu.exit() == 'bye'\n", "WA"),  # the program's process ends
        # An honest alias the tests use: the program's module, used in its process.
        (
            "import statistics as st\nimport xml.etree.ElementTree as ET\ndef avg(xs):\n    return st.mean(xs)\n",
            "assert avg([1, 3]) == st.mean([1, 3]) == 2\nassert ET.fromstring('<a/>').tag == 'a'\n",
            "AC",
        ),
    ],
    ids=["a-module-the-checker-has", "honest-aliases"],
)
def test_a_module_the_programs_name_is_bound_to_is_used_in_its_process(
    hostile: TestClient, program: str, tests: str, verdict: str
) -> None:
    assert [r["verdict"] for r in _evaluate(hostile, [program], tests)] == [verdict]
