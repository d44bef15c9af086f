"""The stdin tests of one program run together on one worker: the same answers as one run per test.

``/v1/evaluate`` sends a program's stdin tests to a worker in one exchange; a Python program is compiled
once and each test runs in a process of its own, forked for it (a test series). Nothing of one test may reach
the next: no file, no shared memory, no process, no interpreter state. A test that breaks its series
(killing the process it was forked from) gets the answer a run on its own would have given.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import metric, settings_for


@pytest.fixture(scope="module")
def one_worker(backend: str) -> Iterator[TestClient]:
    """One worker and no cache: every test of a program lands on that worker, and every run really runs."""
    with TestClient(create_app(settings_for(backend, workers=1, cache_entries=0))) as c:
        yield c


def forked(client: TestClient) -> float:
    """Runs forked in test series so far."""
    return metric(client, "codegym_sandbox_forked_runs_total")


def evaluate(client: TestClient, code: str, tests: list[dict[str, Any]], **fields: Any) -> list[dict[str, Any]]:
    r = client.post("/v1/evaluate", json={"language": "python", "programs": [code], "tests": tests, **fields})
    assert r.status_code == 200, r.text
    tests_out: list[dict[str, Any]] = r.json()["results"][0]["tests"]
    return tests_out


def execute(client: TestClient, code: str, stdin: str, **limits: Any) -> dict[str, Any]:
    r = client.post("/v1/execute", json={"language": "python", "code": code, "stdin": stdin, "limits": limits})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_every_test_starts_from_a_clean_slate(one_worker: TestClient) -> None:
    # Each test leaves a file, shared memory, an attribute on a builtin module and a live daemon behind,
    # then reports what it found of the tests before it.
    code = """
import builtins, os, sys, time
data = sys.stdin.read().strip()
time.sleep(0.05)  # time for an earlier test's daemon to have written something
found = [sorted(os.listdir(".")), sorted(os.listdir("/dev/shm")), getattr(builtins, "mark", None)]
print(found, data)
open("left-" + data, "w").write(data)
open("/dev/shm/left-" + data, "w").write(data)
builtins.mark = data
sys.stdout.flush()
if os.fork() == 0:
    os.setsid()
    while True:
        with open("daemon-" + data, "a") as f:
            f.write("x")
        time.sleep(0.005)
"""
    tests = [{"stdin": f"{i}\n", "expected_stdout": f"[['main.py'], [], None] {i}\n"} for i in range(4)]
    outs = evaluate(one_worker, code, tests)
    assert [o["verdict"] for o in outs] == ["AC"] * 4, outs


def test_tests_of_a_python_program_are_forked_from_its_compiled_program(one_worker: TestClient) -> None:
    before = forked(one_worker)
    tests = [{"stdin": f"{i} {i}", "expected_stdout": f"{2 * i}"} for i in range(6)]
    outs = evaluate(one_worker, "print(sum(map(int, input().split())))", tests)
    assert [o["verdict"] for o in outs] == ["AC"] * 6
    assert forked(one_worker) - before == 6


def test_answers_match_one_run_per_test(one_worker: TestClient) -> None:
    programs = [
        "import sys; n = int(input()); print(n); sys.exit(n)",  # exit codes differ between tests
        "import sys; print(input(), file=sys.stderr); print(len(sys.argv), __name__, __file__.endswith('main.py'))",
        "print(1 is 1)\nprint(input())",  # a compile-time warning, on stderr of every run
        "print(",  # a syntax error
        # kills what it was forked from; the sleep gives that time to take its effect, without it
        # whether the print comes first is a race, in a run on its own too
        "import os, time; os.kill(os.getppid(), 9); time.sleep(0.5); print(input())",
        "import os; print(input(), flush=True); os.kill(os.getppid(), 9)",
        "import os; print(input()); os._exit(3)",
        "import threading; threading.Thread(target=lambda: print(input())).start()",
        # compiled as `python3 main.py` compiles it: none of the sandbox's own __future__ flags
        "def f(x: int): pass\nprint(f.__annotations__, input())",
    ]
    stdins = ["0\n", "1\n", "2\n"]
    for code in programs:
        outs = evaluate(one_worker, code, [{"stdin": s, "expected_stdout": s} for s in stdins])
        for stdin, out in zip(stdins, outs, strict=True):
            alone = execute(one_worker, code, stdin)
            run = alone["run"] or alone["compile"]
            verdict = alone["verdict"]
            if verdict == "AC":
                verdict = "AC" if run["stdout"] == stdin else "WA"
            assert (out["verdict"], out["stdout"]) == (verdict, run["stdout"]), (code, stdin, out, alone)
            assert out["stderr"] == run["stderr"][-1024:], (code, stdin, out, alone)


def test_programs_are_compiled_as_python_compiles_them(one_worker: TestClient) -> None:
    # No __future__ flag of the sandbox's own modules (postponed annotations) reaches a program's compile:
    # alone, in a test series, and in the assert runner's program process.
    code = "def f(x: int): pass\nprint(f.__annotations__, input())"
    assert execute(one_worker, code, "1\n")["run"]["stdout"] == "{'x': <class 'int'>} 1\n"
    outs = evaluate(one_worker, code, [{"stdin": s, "expected_stdout": f"{{'x': <class 'int'>}} {s}"} for s in "12"])
    assert [o["verdict"] for o in outs] == ["AC", "AC"], outs
    program = "def f(x: int):\n    return str(f.__annotations__['x'])"
    check = {"assert_code": "assert f(1) == \"<class 'int'>\", f(1)"}
    body = {"language": "python", "programs": [program, program + "\n"], "tests": [check]}  # two: a test series
    r = one_worker.post("/v1/evaluate", json=body)
    assert [p["verdict"] for p in r.json()["results"]] == ["AC", "AC"], r.text
    assert (
        len(evaluate(one_worker, program, [check])) == 1
        and evaluate(one_worker, program, [check])[0]["verdict"] == "AC"
    )


def test_a_limit_hit_in_one_test_leaves_the_others_alone(one_worker: TestClient) -> None:
    code = """
n = int(input())
if n == 1:
    import time; time.sleep(5)
if n == 2:
    x = bytearray(900 << 20)
if n == 3:
    import sys
    while True: sys.stdout.write("z" * 65536)
print(n)
"""
    tests = [{"stdin": f"{i}\n", "expected_stdout": f"{i}\n"} for i in range(5)]
    outs = evaluate(one_worker, code, tests, limits={"timeout_s": 0.5, "memory_mb": 256})
    assert [o["verdict"] for o in outs] == ["AC", "TLE", "MLE", "OLE", "AC"], outs


def test_early_stop_in_test_series(one_worker: TestClient) -> None:
    tests = [{"stdin": f"{i}\n", "expected_stdout": f"{i}\n"} for i in range(8)]
    code = "n = int(input()); print(n if n != 5 else -1)"
    r = one_worker.post(
        "/v1/evaluate", json={"language": "python", "programs": [code], "tests": tests, "early_stop": True}
    ).json()["results"][0]
    assert r["verdict"] == "WA" and r["passed"] == 5 and r["stopped_early"]
    assert [t["verdict"] for t in r["tests"]] == ["AC"] * 5 + ["WA"]


def test_compiled_languages_batch_too(one_worker: TestClient) -> None:
    code = '#include <cstdio>\nint main(){int a,b; std::scanf("%d %d",&a,&b); std::printf("%d\\n",a*b);}'
    tests = [{"stdin": f"{i} {i + 1}", "expected_stdout": f"{i * (i + 1)}\n"} for i in range(3)]
    r = one_worker.post("/v1/evaluate", json={"language": "cpp", "programs": [code], "tests": tests}).json()
    assert [t["verdict"] for t in r["results"][0]["tests"]] == ["AC"] * 3


def test_assert_tests_of_different_tasks_share_a_test_series(one_worker: TestClient) -> None:
    # One runner for every assert test: a batch's runs of several tasks go to the worker in one exchange,
    # each forked from the process that compiled the runner, and none sees another's program or tests.
    # What the program finds of the others: their functions, or files beside the runner and its own text.
    spy = "import os\nseen = [n for n in dir() if n.startswith('f')]\n"
    spy += "seen += [n for n in os.listdir() if n not in ('main.py', 'solution.py')]\n"
    groups = [
        {
            "language": "python",
            "programs": [spy + f"def f{i}():\n    return {i}"],
            "tests": [{"assert_code": f"assert f{i}() == {i} and seen == [], seen"}],
        }
        for i in range(4)
    ]
    before = forked(one_worker)
    r = one_worker.post("/v1/evaluate/batch", json={"requests": groups})
    assert r.status_code == 200, r.text
    assert [resp["results"][0]["verdict"] for resp in r.json()["responses"]] == ["AC"] * 4, r.text
    assert forked(one_worker) - before == 4


def test_a_test_series_goes_on_across_requests_that_run_the_same(one_worker: TestClient) -> None:
    def batch(*checks: str) -> list[str]:
        groups = [{"language": "python", "programs": ["import os"], "tests": [{"assert_code": c}]} for c in checks]
        r = one_worker.post("/v1/evaluate/batch", json={"requests": groups})
        assert r.status_code == 200, r.text
        return [resp["results"][0]["verdict"] for resp in r.json()["responses"]]

    clean = "assert sorted(os.listdir()) == ['main.py', 'solution.py'], os.listdir()"  # the runner, the program
    assert batch(clean, clean) == ["AC", "AC"]  # two runs: a test series, left open when they are done
    before = forked(one_worker)
    assert batch(clean) == ["AC"]  # one run, and yet forked: from the series the last request left open
    assert forked(one_worker) - before == 1
    # A run that leaves a file ends the series: the next request starts from a fresh box.
    assert batch("open('left', 'w').write('x')", clean) == ["AC", "AC"]
    assert batch(clean) == ["AC"]
    # So does a request that runs anything else.
    assert execute(one_worker, "open('left', 'w').write('x')", "")["verdict"] == "AC"
    assert batch(clean, clean) == ["AC", "AC"]
    # Only the assert runner, which other requests run too, leaves its series open; a program's stdin tests
    # do not (the box is renewed while the server reads their answer instead).
    code = "print(input())"
    assert [o["verdict"] for o in evaluate(one_worker, code, [{"stdin": "1", "expected_stdout": "1"}] * 2)] == [
        "AC"
    ] * 2
    before = forked(one_worker)
    assert evaluate(one_worker, code, [{"stdin": "1", "expected_stdout": "1"}])[0]["verdict"] == "AC"
    assert forked(one_worker) == before
