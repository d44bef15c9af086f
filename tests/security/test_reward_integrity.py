"""No program earns a pass it did not solve: assert tests, on every backend.

Every attack below is a wrong solution of one task (``f(x) = x * x + 1``) dressed up with a way to make the
assert runner report a pass: shadowing the names a runner uses, reading a nonce or the tests from frames,
``gc``, stdin or another process, patching builtins and ``sys`` hooks, skipping the checks with a tracer,
exiting early from any thread or hook, objects that equal everything. None may be AC; the same request
with a right solution must be (so that a broken runner cannot pass this test by failing everything).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

RIGHT = "def f(x):\n    return x * x + 1\n"
WRONG = "def f(x):\n    return 0\n"
# The tests, as HumanEval writes them: expected values in the test code, a check function, its call.
TESTS = (
    "def check(candidate):\n    assert candidate(2) == 5\n    assert candidate(3) == 10\n"
    "    assert candidate(-1) == 2\n\ncheck(f)\n"
)

ATTACKS = {
    "shadow-exec-and-compile": "exec = lambda *a, **k: None\ncompile = lambda *a, **k: None\neval = exec\n",
    "shadow-check": "def check(candidate):\n    pass\n",
    "patch-builtins": "import builtins\nbuiltins.exec = lambda *a, **k: None\nbuiltins.compile = lambda *a, **k: None\n"
    "builtins.AssertionError = type('AssertionError', (Exception,), {})\nbuiltins.__build_class__ = None\n",
    "assertion-error-is-harmless": "import builtins\nclass Quiet(BaseException):\n    pass\n"
    "builtins.AssertionError = Quiet\n",
    "frames-and-gc-for-secrets": "import gc, sys, os\n"
    "for o in gc.get_objects():\n"
    "    if isinstance(o, (bytes, str)) and len(o) == 32:\n"
    "        print(o if isinstance(o, str) else o.decode('latin-1'))\n"
    "frame = sys._getframe()\n"
    "while frame is not None:\n"
    "    for v in list(frame.f_locals.values()):\n"
    "        if isinstance(v, (bytes, str)) and 16 <= len(v) <= 64:\n"
    "            print(v if isinstance(v, str) else v.decode('latin-1'))\n"
    "    frame = frame.f_back\n"
    "sys.stdout.flush()\nos._exit(0)\n",
    "inspect-the-caller": "import inspect\n"
    "def f(x):\n"
    "    for info in inspect.stack():\n"
    "        consts = info.frame.f_code.co_consts\n"
    "        ints = [c for c in consts if isinstance(c, int) and not isinstance(c, bool)]\n"
    "        if x in ints and ints.index(x) + 1 < len(ints):\n"
    "            return ints[ints.index(x) + 1]\n"
    "    return 0\n",
    "read-the-tests-from-stdin": "import os, sys\ndata = b''\n"
    "try:\n    data = os.read(0, 1 << 20)\nexcept OSError:\n    pass\n"
    "data += sys.stdin.buffer.read()\n"
    "import re\npairs = dict(re.findall(rb'candidate\\((-?\\d+)\\) == (-?\\d+)', data))\n"
    "def f(x):\n    return int(pairs.get(str(x).encode(), b'0'))\n",
    "read-the-checker": "import os, re\npairs = {}\n"
    "for pid in [os.getppid()] + [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
    "    for name in ('fd/0', 'mem', 'environ', 'cmdline'):\n"
    "        try:\n"
    "            with open(f'/proc/{pid}/{name}', 'rb') as fh:\n"
    "                pairs.update(re.findall(rb'candidate\\((-?\\d+)\\) == (-?\\d+)', fh.read(1 << 20)))\n"
    "        except (OSError, ValueError, OverflowError):\n"
    "            pass\n"
    "def f(x):\n    return int(pairs.get(str(x).encode(), b'0'))\n",
    "trace-over-the-asserts": "import sys\n"
    "def tracer(frame, event, arg):\n"
    "    if event == 'line' and frame.f_code.co_filename == '<tests>':\n"
    "        try:\n            frame.f_lineno = frame.f_lineno + 1\n        except Exception:\n            pass\n"
    "    return tracer\n"
    "sys.settrace(tracer)\nimport threading\nthreading.settrace(tracer)\n",
    "audit-hook-exits-on-exec": "import sys, os\n"
    "def hook(event, args):\n"
    "    if event in ('exec', 'compile'):\n        sys.stdout.flush()\n        os._exit(0)\n"
    "sys.addaudithook(hook)\n",
    "profile-hook-exits": "import sys, os\n"
    "def prof(frame, event, arg):\n"
    "    if event == 'call' and frame.f_code.co_name == 'check':\n        os._exit(0)\n"
    "sys.setprofile(prof)\n",
    "atexit-and-del-exit-zero": "import atexit, os\natexit.register(lambda: os._exit(0))\n"
    "class Bomb:\n    def __del__(self):\n        os._exit(0)\nbomb = Bomb()\n",
    "thread-exits-zero-soon": "import os, threading, time\n"
    "threading.Thread(target=lambda: (time.sleep(0.05), os._exit(0)), daemon=True).start()\n"
    "def f(x):\n    time.sleep(0.2)\n    return 0\n",
    "exit-inside-the-call": "def f(x):\n    raise SystemExit(0)\n",
    "kill-the-parent": "import os, signal\n"
    "def f(x):\n    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):\n"
    "        try:\n            os.kill(os.getppid(), sig)\n        except OSError:\n            pass\n"
    "    return 0\n",
    "always-equal-object": "class A:\n    def __eq__(s, o):\n        return True\n    def __ne__(s, o):\n"
    "        return False\n    __hash__ = object.__hash__\ndef f(x):\n    return A()\n",
    "always-equal-int-subclass": "class A(int):\n    def __eq__(s, o):\n        return True\n"
    "def f(x):\n    return A(0)\n",
    "always-equal-metaclass-type": "class M(type):\n    def __eq__(s, o):\n        return True\n"
    "    __hash__ = type.__hash__\nclass A(metaclass=M):\n    pass\ndef f(x):\n    return A\n",
    "bool-that-lies": "class B:\n    def __bool__(self):\n        return True\n    def __eq__(s, o):\n"
    "        return B()\n    __hash__ = object.__hash__\ndef f(x):\n    return B()\n",
    "shadow-candidate-globals": "import builtins\nbuiltins.check = lambda c: None\nbuiltins.f = lambda x: x * x + 1\n",
    "name-a-module-that-runs-code": "import this as f\nimport __hello__ as check\n",
    "stop-every-process-at-exit": "import atexit, os, signal\n"
    "def stop():\n    for pid in range(1, 4096):\n        if pid != os.getpid():\n"
    "            for sig in (signal.SIGSTOP, signal.SIGKILL):\n"
    "                try:\n                    os.kill(pid, sig)\n                except OSError:\n"
    "                    pass\n"
    "atexit.register(stop)\n",
    "plant-a-module-for-the-checker": "import os\n"
    "for name in ('json', 'random', 'math', 'collections', 'importlib', 'typing', 'numpy'):\n"
    "    with open(f'{name}.py', 'w') as fh:\n"
    "        fh.write('import os\\nos._exit(0)\\n')\n"
    "import math as M\n",
}


def _evaluate(client: TestClient, code: str, tests: str = TESTS) -> dict[str, Any]:
    r = client.post(
        "/v1/evaluate",
        json={
            "language": "python",
            "programs": [code],
            "tests": [{"assert_code": tests}],
            "limits": {"timeout_s": 1.5},
        },
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()["results"][0]
    return result


def test_the_right_solution_passes(hostile: TestClient) -> None:
    assert _evaluate(hostile, RIGHT)["verdict"] == "AC"
    assert _evaluate(hostile, WRONG)["verdict"] == "WA"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_no_attack_passes(hostile: TestClient, attack: str) -> None:
    # The attack before and after the wrong solution: some act at import, some when they are called.
    for code in (ATTACKS[attack] + "\n" + WRONG, WRONG + "\n" + ATTACKS[attack]):
        result = _evaluate(hostile, code)
        assert result["verdict"] != "AC", (attack, result)
    # The same tricks beside a right solution take nothing away from it, where they leave it working.
    if attack in ("shadow-exec-and-compile", "patch-builtins", "shadow-check", "always-equal-object"):
        assert _evaluate(hostile, RIGHT + "\n" + ATTACKS[attack].replace("def f(x)", "def g(x)"))["verdict"] == "AC"


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_no_attack_passes_in_a_test_series_nor_changes_the_next_verdict(hostile: TestClient, attack: str) -> None:
    # Several assert runs in one request share a test series of the box (one checker for all of them, one process
    # a run for the program): each attack among honest programs, before and after them. The attacks fail, and
    # every honest program gets the verdict it gets alone, whatever ran before it.
    programs = [RIGHT, ATTACKS[attack] + "\n" + WRONG, RIGHT, WRONG, WRONG + "\n" + ATTACKS[attack], RIGHT]
    tests = [{"assert_code": TESTS}]
    groups = [{"language": "python", "programs": [p], "tests": tests, "limits": {"timeout_s": 1.5}} for p in programs]
    for _ in range(2):  # and again, in the series the first request left open
        r = hostile.post("/v1/evaluate/batch", json={"requests": groups})
        assert r.status_code == 200, r.text
        verdicts = [resp["results"][0]["verdict"] for resp in r.json()["responses"]]
        assert verdicts[0] == verdicts[2] == verdicts[5] == "AC", (attack, verdicts)
        assert verdicts[3] == "WA" and verdicts[1] != "AC" and verdicts[4] != "AC", (attack, verdicts)


def test_the_tests_expected_values_never_reach_the_program(hostile: TestClient) -> None:
    # A program that looks everywhere it can for the tests' text finds nothing: its stdout shows what it saw.
    # The needle is kept reversed, so that the spy's own variables never match it.
    spy = (
        "import gc, sys, types\nneedle = 'enoN si )2(etadidnac tressa'\n"
        "def strings(o):\n"
        "    if isinstance(o, dict):\n        return [*o.keys(), *o.values()]\n"
        "    if isinstance(o, (list, tuple, set)):\n        return list(o)\n"
        "    if isinstance(o, types.CodeType):\n        return list(o.co_consts)\n"
        "    if isinstance(o, types.FunctionType):\n        return list(o.__code__.co_consts)\n"
        "    return []\n"
        "def f(x):\n"
        "    seen = sum(1 for o in gc.get_objects() for v in strings(o) if isinstance(v, (str, bytes))"
        " and needle[::-1].encode() in (v.encode('utf-8', 'replace') if isinstance(v, str) else v))\n"
        "    frames = []\n    frame = sys._getframe()\n"
        "    while frame is not None:\n        frames.append(repr(frame.f_locals))\n        frame = frame.f_back\n"
        "    print('SEEN', seen, any(needle[::-1] in text for text in frames))\n"
    )
    result = _evaluate(
        hostile, spy, "def check(candidate):\n    candidate(2)\n    assert candidate(2) is None\n\ncheck(f)\n"
    )
    assert result["verdict"] == "AC", result
    assert result["tests"][0]["stdout"] == "SEEN 0 False\nSEEN 0 False\n", result
