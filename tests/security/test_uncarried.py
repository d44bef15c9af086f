"""What tests observe or set about the program that no call carries to its process: refused, never a pass.

Each form is judged against the reference, python3 running the program and the tests in one file. Tests that patch
a library function the program looks up, trace memory, capture log records or call the program from several threads
at once were answered by the checker's own state: a program that sleeps passed a patch that forbids sleeping, one
that allocates 40 MB a ``tracemalloc`` bound, one that logs ``assertNoLogs``, a racy counter a thread-safety test
(``agent/uncarried.py``). Now such a run is an error (RE, its reason on stderr) wherever the checker cannot make the
call as one process would, and passes where it can: a patch of what the program never looks up, a patch of a
builtin the checker itself uses, a program that imported the patched function before any test ran.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

_SORTS = "def my_sort(xs):\n    out = []\n    for x in xs:\n        i = 0\n        while i < len(out) and out[i] < x:\n"
_SORTS += "            i += 1\n        out.insert(i, x)\n    return out\n"
RACY = "import time\n\nclass Counter:\n    def __init__(self):\n        self.value = 0\n\n    def increment(self):\n"
RACY += "        v = self.value\n        time.sleep(0.0005)\n        self.value = v + 1\n\n    def get(self):\n"
RACY += "        return self.value\n"
LOCKED = "import threading, time\n\nclass Counter:\n    def __init__(self):\n        self.value = 0\n"
LOCKED += "        self.lock = threading.Lock()\n\n    def increment(self):\n        with self.lock:\n"
LOCKED += "            v = self.value\n            time.sleep(0.0005)\n            self.value = v + 1\n\n"
LOCKED += "    def get(self):\n        return self.value\n"
_LOGS = "import logging\n\nlog = logging.getLogger('app')\n\ndef div(a, b):\n    if b == 0:\n"
_LOGS += "        log.error('division by zero')\n        return None\n    return a / b\n"
_SILENT = "def div(a, b):\n    if b == 0:\n        return None\n    return a / b\n"
_CASE = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test(self):\n        with self.{}('app', level='ERROR'):\n"
)
_CASE += "            self.assertIsNone(div(1, 0))\n\nunittest.main()\n"

# Each: the tests, then programs with the verdict each must have (a wrong one first): AC only where python3 passes
# it, and RE (refused) where the checker cannot carry what the tests do.
FORMS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "patch-a-builtin-that-raises": (
        "from unittest import mock\n\nwith mock.patch('builtins.sorted', side_effect=AssertionError('no sorted')):\n"
        "    assert my_sort([3, 1, 2]) == [1, 2, 3]\n",
        [("def my_sort(xs):\n    return sorted(xs)\n", "RE"), (_SORTS, "AC")],
    ),
    "patch-object-builtins-not-called": (
        "import builtins\nfrom unittest import mock\n\nwith mock.patch.object(builtins, 'sorted') as m:\n"
        "    my_sort([3, 1, 2])\n    m.assert_not_called()\n",
        [("def my_sort(xs):\n    return sorted(xs)\n", "RE"), (_SORTS, "AC")],
    ),
    "patch-a-module-function-that-raises": (
        "from unittest import mock\n\nwith mock.patch('time.sleep', side_effect=AssertionError('slept')):\n"
        "    assert wait_then(3) == 3\n",
        [
            ("import time\n\ndef wait_then(x):\n    time.sleep(0.01)\n    return x\n", "RE"),
            ("def wait_then(x):\n    from time import sleep\n    sleep(0.01)\n    return x\n", "RE"),
            ("def wait_then(x):\n    return x\n", "AC"),
            # Bound before any test ran, as in one process: the program's sleep is the real one there too.
            ("from time import sleep\n\ndef wait_then(x):\n    sleep(0)\n    return x\n", "AC"),
            # Other roads to the same module: an alias is followed, the rest make every patch one it may use.
            ("import time\nt = time\n\ndef wait_then(x):\n    t.sleep(0.01)\n    return x\n", "RE"),
            ("import time as t\n\ndef wait_then(x):\n    t.sleep(0.01)\n    return x\n", "RE"),
            ("def wait_then(x):\n    __import__('time').sleep(0.01)\n    return x\n", "RE"),
            (
                "import importlib\n\ndef wait_then(x):\n    importlib.import_module('time').sleep(0)\n    return x\n",
                "RE",
            ),
            ("import sys, time\n\ndef wait_then(x):\n    sys.modules['time'].sleep(0.01)\n    return x\n", "RE"),
            (
                "import time\n\nclass C:\n    clock = time\n\ndef wait_then(x):\n    C.clock.sleep(0)\n    return x\n",
                "RE",
            ),
        ],
    ),
    "patch-a-builtin-reached-by-import": (
        "from unittest import mock\n\nwith mock.patch('builtins.sorted', side_effect=AssertionError('no sorted')):\n"
        "    assert my_sort([3, 1, 2]) == [1, 2, 3]\n",
        [("def my_sort(xs):\n    return __import__('builtins').sorted(xs)\n", "RE"), (_SORTS, "AC")],
    ),
    "a-refusal-the-tests-catch": (
        "from unittest import mock\n\nwith mock.patch('time.sleep') as s:\n    try:\n        wait_then(3)\n"
        "    except BaseException:\n        pass\n    assert s.call_count == 0\n",
        [("import time\n\ndef wait_then(x):\n    time.sleep(0.01)\n    return x\n", "RE")],
    ),
    "stubs-an-honest-program-would-need": (
        "from unittest.mock import patch, mock_open\n\nwith patch('os.path.exists', return_value=True):\n"
        "    assert check('/nowhere') == 'yes'\n\nwith patch('builtins.open', mock_open(read_data='a\\nb\\n')):\n"
        "    assert count_lines('any.txt') == 2\n",
        [
            ("import os\n\ndef check(p):\n    return 'no'\n\ndef count_lines(path):\n    return 2\n", "WA"),
            (
                "import os\n\ndef check(p):\n    return 'yes' if os.path.exists(p) else 'no'\n\n"
                "def count_lines(path):\n    with open(path) as f:\n        return len(f.read().splitlines())\n",
                "RE",
            ),
        ],
    ),
    "a-program-that-reaches-modules-unspelled-and-tests-that-patch-nothing": (
        "import pytest, unittest, warnings\n\ndef test_a():\n    with warnings.catch_warnings(record=True):\n"
        "        assert area(2) == 4\n\ndef test_b():\n    with pytest.raises(ValueError):\n        area(-1)\n\n"
        "class T(unittest.TestCase):\n    def test_c(self):\n        self.assertEqual(area(3), 9)\n",
        [
            ("def area(x):\n    return x * 2\n", "WA"),
            (
                "def area(x):\n    if x < 0:\n        raise ValueError(x)\n"
                "    return getattr(__import__('math'), 'pow')(x, 2)\n",
                "AC",
            ),
        ],
    ),
    "the-tests-capture-their-own-logger": (
        "import io, logging\n\nbuf = io.StringIO()\nlogging.getLogger('tests').addHandler(logging.StreamHandler(buf))\n"
        "logging.getLogger('tests').error('checking')\nassert double(2) == 4 and 'checking' in buf.getvalue()\n",
        [
            ("import logging\n\nlogger = logging.getLogger(__name__)\n\ndef double(x):\n    return x\n", "WA"),
            (
                "import logging\n\nlogger = logging.getLogger(__name__)\n\ndef double(x):\n"
                "    logger.error('doubling %s', x)\n    return 2 * x\n",
                "AC",
            ),
            # A logger by a computed name may be any, the tests' own too.
            (
                "import logging\n\nNAME = 'te' + 'sts'\n\ndef double(x):\n"
                "    logging.getLogger(NAME).error('doubling')\n    return 2 * x\n",
                "RE",
            ),
        ],
    ),
    "tracemalloc-bound": (
        "import tracemalloc\n\ntracemalloc.start()\nassert total(10**6) == 499999500000\n"
        "_, peak = tracemalloc.get_traced_memory()\nassert peak < 1_000_000, peak\n",
        [
            ("def total(n):\n    return sum(list(range(n)))\n", "RE"),
            ("def total(n):\n    s = 0\n    for i in range(n):\n        s += i\n    return s\n", "RE"),
        ],
    ),
    "assert-no-logs": (
        _CASE.format("assertNoLogs"),
        [
            (_LOGS, "RE"),
            (_LOGS.replace("import logging\n", "logging = __import__('logging')\n"), "RE"),
            (_SILENT, "AC"),
        ],
    ),
    "assert-logs": (_CASE.format("assertLogs"), [(_SILENT, "WA"), (_LOGS, "RE")]),
    "threads-at-once": (
        "import threading\n\nc = Counter()\n\ndef work():\n    for _ in range(20):\n        c.increment()\n\n"
        "ts = [threading.Thread(target=work) for _ in range(8)]\nfor t in ts:\n    t.start()\nfor t in ts:\n"
        "    t.join()\nassert c.get() == 160, c.get()\n",
        [(RACY, "RE"), (LOCKED, "RE")],
    ),
    "one-thread-at-a-time": (
        "import threading\n\nc = Counter()\nfor _ in range(3):\n    t = threading.Thread(target=c.increment)\n"
        "    t.start()\n    t.join()\nassert c.get() == 3\n",
        [
            (
                "class Counter:\n    value = 0\n    def increment(self):\n        pass\n    def get(self):\n"
                "        return self.value\n",
                "WA",
            ),
            (RACY, "AC"),
        ],
    ),
}


def _reference(program: str, tests: str, tmp_path: Path) -> int:
    """python3's exit status on the program and the tests in one file."""
    path = tmp_path / "joined.py"
    path.write_text(program + "\n" + tests)
    return subprocess.run([sys.executable, str(path)], capture_output=True, timeout=60).returncode


@pytest.mark.parametrize("form", sorted(FORMS))
def test_what_no_call_carries_is_refused_never_passed(hostile: TestClient, form: str, tmp_path: Path) -> None:
    tests, cases = FORMS[form]
    body: dict[str, Any] = {"language": "python", "programs": [p for p, _ in cases], "tests": [{"assert_code": tests}]}
    r = hostile.post("/v1/evaluate", json={**body, "cache": False, "limits": {"timeout_s": 10}})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    for (program, verdict), result in zip(cases, results, strict=True):
        reference = _reference(program, tests, tmp_path)
        assert result["verdict"] != "AC" or reference == 0, (form, program, result)
        assert result["verdict"] == verdict, (form, program, result)
        if verdict == "RE":
            assert "Refused: " in result["tests"][0]["stderr"], (form, result)
