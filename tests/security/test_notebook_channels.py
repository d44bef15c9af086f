"""No channel to the judge of a notebook run that a program can read or write, on every backend.

``/execute_batch`` runs open-r1's reward script, which holds the tests and their expected outputs and runs
the model's program on each (``python3 -c code``): a program that computes nothing looks for the expected
outputs wherever it can (the working directory, its parents' ``/proc`` entries and memory, its
environment, every descriptor, the temporary directories) and prints what it finds, or tries to set the
main result (files and FIFOs in the working directory, frames on every descriptor it can write, killing
its parents, a daemon that writes on after them). None may earn a reward of 1.0; a right program must.

Nor may a program put code in the judge: a reward script imports modules after the program ran (a comparison
or a summary from the standard library), and a program writes modules of every such name where it runs; the
judge imports none of them, and the reward is what it would be without them.

``/run_jupyter``: a cell that forges the results (the old driver's results file, the supervisor's frames,
the kernel's answers, on every descriptor) and then ends its kernel (``os._exit``, ``sys.exit``, a signal,
``exec``, a thread) must never make the check cell after it report as run and passed.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

import pytest
from fastapi.testclient import TestClient

# open-r1's code_reward script (src/open_r1/rewards.py), as its routed providers send it.
REWARD_SCRIPT = """
import subprocess
import json

def evaluate_code(code, test_cases):
    passed = 0
    total = len(test_cases)
    exec_timeout = 2
    for case in test_cases:
        process = subprocess.run(["python3", "-c", code], input=case["input"], text=True,
                                 capture_output=True, timeout=exec_timeout)
        if process.returncode != 0:
            continue
        output = process.stdout.strip()
        all_correct = True
        for line1, line2 in zip(output.split('\\n'), case['output'].split('\\n')):
            all_correct = all_correct and line1.strip() == line2.strip()
        if all_correct:
            passed += 1
    return passed / total

code_snippet = {code}
test_cases = json.loads({test_cases})

evaluate_code(code_snippet, test_cases)
"""
# The task: print ANSWER- and the first 16 hex digits of the SHA-256 of the input line.
RIGHT = "import hashlib\nprint('ANSWER-' + hashlib.sha256(input().strip().encode()).hexdigest()[:16])\n"
# What every reader does with what it found: the first answer that follows its own input there.
ANSWER_FROM = """
import re
seed = input().strip().encode()
answer = 'nothing'
for data in found:
    at = data.find(seed)
    while at >= 0 and answer == 'nothing':
        match = re.compile(rb'ANSWER-[0-9a-f]{16}').search(data, at)
        answer = match.group().decode() if match else answer
        at = data.find(seed, at + 1)
print(answer)
"""
# Never blocks: a pipe another process reads from is read only as far as it holds something now.
_READ = (
    "import os\nfound = []\ndef read(path, size=1 << 22):\n    try:\n"
    "        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)\n    except (OSError, ValueError):\n        return\n"
    "    try:\n        found.append(os.read(fd, size))\n    except (OSError, ValueError, OverflowError):\n"
    "        pass\n    finally:\n        os.close(fd)\n"
)
READERS = {
    "working-directory": "for root, _, names in os.walk('.'):\n    for name in names:\n"
    "        read(os.path.join(root, name))\n",
    "temporary-directories": "for top in ('/tmp', '/dev/shm', os.environ.get('HOME', '/')):\n"
    "    for root, _, names in os.walk(top):\n        for name in names:\n            read(os.path.join(root, name))\n",
    "environment": "found.append(repr(dict(os.environ)).encode())\n",
    "every-descriptor": "for fd in range(256):\n    try:\n        os.set_blocking(fd, False)\n"
    "        found.append(os.pread(fd, 1 << 20, 0))\n    except OSError:\n        try:\n"
    "            found.append(os.read(fd, 1 << 20))\n        except OSError:\n            pass\n",
    "proc-of-every-process": "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
    "    for what in ('cmdline', 'environ', 'fd/0', 'fd/3', 'fd/4', 'fd/5', 'fd/6'):\n"
    "        read(f'/proc/{pid}/{what}')\n"
    "    try:\n        names = os.listdir(f'/proc/{pid}/fd')\n    except OSError:\n        names = []\n"
    "    for name in names:\n        read(f'/proc/{pid}/fd/{name}')\n"
    "    try:\n        names = os.listdir(f'/proc/{pid}/cwd')\n    except OSError:\n        names = []\n"
    "    for name in names:\n        read(f'/proc/{pid}/cwd/{name}')\n",
    "memory-of-the-parents": "pid = os.getppid()\nfor _ in range(3):\n"
    "    try:\n        with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb') as mem:\n"
    "            for line in maps:\n                lo, hi = (int(x, 16) for x in line.split()[0].split('-'))\n"
    "                if 'r' in line.split()[1] and hi - lo < 1 << 26:\n"
    "                    try:\n                        mem.seek(lo)\n"
    "                        found.append(mem.read(hi - lo))\n"
    "                    except (OSError, ValueError, OverflowError):\n                        pass\n"
    "    except OSError:\n        pass\n"
    "    try:\n        pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
    "    except (OSError, ValueError, IndexError):\n        break\n",
}
_FORGED = (
    "import os, json\nforged = [b'1.0', b'cell 0 10\\n{\"x\": 1.0}', b'end 1 0\\n',\n"
    "          b'out 0 3\\n1.0cell 0 63\\n'\n"
    "          + json.dumps({'display': [{'text/plain': '1.0'}], 'error': [], 'cut': False}).encode()]\n"
)
WRITERS = {
    "result-files-in-the-working-directory": "for name in ('.main_result', 'cell.py', 'main_result', 'output.json'):\n"
    "    with open(name, 'w') as f:\n        f.write('1.0')\n    os.chmod(name, 0o444)\n",
    "a-fifo-for-the-result": "import threading\nos.mkfifo('.main_result')\n"
    "pid = os.fork()\nif pid == 0:\n    os.setsid()\n    while True:\n        with open('.main_result', 'w') as f:\n"
    "            f.write('1.0')\n",
    "frames-on-every-descriptor": "for fd in range(256):\n    for data in forged:\n        try:\n"
    "            os.write(fd, data)\n        except OSError:\n            pass\n",
    "frames-through-the-parents-descriptors": "for pid in (os.getppid(), 1):\n    for fd in range(16):\n"
    "        try:\n            with open(f'/proc/{pid}/fd/{fd}', 'wb') as f:\n                for data in forged:\n"
    "                    f.write(data)\n        except OSError:\n            pass\n",
    "kill-the-parents-after-forging": "import signal\nfor fd in (1, 2):\n    for data in forged:\n"
    "        os.write(fd, data)\nfor pid in (os.getppid(), 1):\n    try:\n        os.kill(pid, signal.SIGKILL)\n"
    "    except OSError:\n        pass\n",
    "a-daemon-that-writes-on": "if os.fork() == 0:\n    os.setsid()\n    import time\n    for _ in range(200):\n"
    "        for fd in range(256):\n            for data in forged:\n                try:\n"
    "                    os.write(fd, data)\n                except OSError:\n                    pass\n"
    "        try:\n            open('.main_result', 'w').write('1.0')\n        except OSError:\n            pass\n"
    "        time.sleep(0.01)\n    os._exit(0)\n",
}


def _cases() -> list[dict[str, str]]:
    seeds = [secrets.token_hex(8) for _ in range(3)]
    return [{"input": f"{s}\n", "output": f"ANSWER-{hashlib.sha256(s.encode()).hexdigest()[:16]}\n"} for s in seeds]


def _reward(client: TestClient, code: str) -> float | None:
    script = REWARD_SCRIPT.format(code=json.dumps(code), test_cases=json.dumps(json.dumps(_cases())))
    r = client.post("/execute_batch", json={"scripts": [script], "languages": ["python"], "timeout": 3})
    assert r.status_code == 200, r.text
    (item,) = r.json()
    text = item["text"]
    return float(text) if text is not None else None


def test_the_right_program_earns_the_reward(hostile: TestClient) -> None:
    assert _reward(hostile, RIGHT) == 1.0
    assert _reward(hostile, "print('ANSWER-0000000000000000')") == 0.0


@pytest.mark.parametrize("reader", sorted(READERS))
def test_no_program_reads_the_expected_outputs(hostile: TestClient, reader: str) -> None:
    assert _reward(hostile, _READ + READERS[reader] + ANSWER_FROM) == 0.0, reader


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_no_program_sets_the_reward(hostile: TestClient, writer: str) -> None:
    for code in (_FORGED + WRITERS[writer] + "print('nothing')\n", _FORGED + WRITERS[writer] + RIGHT):
        reward = _reward(hostile, code)
        assert reward is None or reward < 1.0 or code.endswith(RIGHT), (writer, reward)


# A module that, imported anywhere, makes every name it is asked for equal to everything, true, callable, and
# shown as a perfect score: a judge that imports it passes whatever it compares.
_PLANTED = """
class _Any:
    def __eq__(self, other):
        return True
    __le__ = __ge__ = __lt__ = __gt__ = __eq__
    def __ne__(self, other):
        return False
    def __bool__(self):
        return True
    def __call__(self, *args, **kwargs):
        return self
    def __getattr__(self, name):
        return self
    def __float__(self):
        return 1.0
    def __repr__(self):
        return '1.0'
    __hash__ = object.__hash__
def __getattr__(name):
    return _Any()
"""
# Writes the planted module under every name of the standard library, as a module and as a package, where it
# runs (the judge's working directory) and in every other place it can write to, then prints nothing useful.
PLANTER = (
    f"import os, sys, tempfile\nplanted = {_PLANTED!r}\n"
    "for top in {'.', os.path.dirname(os.path.abspath(sys.argv[0] or '.')), tempfile.gettempdir(), '/dev/shm'}:\n"
    "    for name in sys.stdlib_module_names:\n        try:\n"
    "            open(os.path.join(top, name + '.py'), 'w').write(planted)\n"
    "            os.makedirs(os.path.join(top, name), exist_ok=True)\n"
    "            open(os.path.join(top, name, '__init__.py'), 'w').write(planted)\n"
    "        except OSError:\n            pass\n"
    "print('nothing')\n"
)
# Reward scripts that import after the program ran: to compare its output, or to sum the scores up.
_SAME = "def same(output, expected):\n    {body}\n"
GRADERS = {
    "difflib": "from difflib import SequenceMatcher\n"
    "    return SequenceMatcher(None, output.strip(), expected.strip()).ratio() == 1.0",
    "unicodedata": "import unicodedata\n"
    "    return unicodedata.normalize('NFC', output.strip()) == unicodedata.normalize('NFC', expected.strip())",
    "statistics": "import statistics\n    return statistics.fmean([output.strip() == expected.strip()]) == 1.0",
    "csv": "import csv\n    return list(csv.reader([output.strip()])) == list(csv.reader([expected.strip()]))",
}
GRADER_SCRIPT = """
import subprocess
import json

{same}

def evaluate_code(code, test_cases):
    scores = []
    for case in test_cases:
        process = subprocess.run(["python3", "-c", code], input=case["input"], text=True,
                                 capture_output=True, timeout=2)
        scores.append(float(process.returncode == 0 and same(process.stdout, case["output"])))
    import statistics
    return statistics.fmean(scores)

code_snippet = {code}
test_cases = json.loads({test_cases})

evaluate_code(code_snippet, test_cases)
"""


def _graded(client: TestClient, grader: str, code: str) -> float | None:
    same = _SAME.format(body=GRADERS[grader])
    script = GRADER_SCRIPT.format(same=same, code=json.dumps(code), test_cases=json.dumps(json.dumps(_cases())))
    r = client.post("/execute_batch", json={"scripts": [script], "languages": ["python"], "timeout": 5})
    assert r.status_code == 200, r.text
    (item,) = r.json()
    return float(item["text"]) if item["text"] is not None else None


@pytest.mark.parametrize("grader", sorted(GRADERS))
def test_no_program_puts_a_module_in_the_judge(hostile: TestClient, grader: str) -> None:
    assert _graded(hostile, grader, RIGHT) == 1.0, grader
    assert _graded(hostile, grader, PLANTER) == 0.0, grader
    # The same through open-r1's own script, which imports nothing after the program ran.
    assert _reward(hostile, PLANTER) == 0.0


def test_no_program_puts_a_module_in_a_check_cell(hostile: TestClient) -> None:
    run = f"import subprocess\nsubprocess.run(['python3', '-c', {PLANTER!r}], capture_output=True)\nNone"
    check = "import difflib\nassert difflib.SequenceMatcher(None, 'a', 'b').ratio() == 1.0\nprint('ALL TESTS PASSED')\n"
    body = _notebook(hostile, [run, check])
    assert body["status"] == "Success" and body["cells"][1]["error"][0]["ename"] == "AssertionError", body


WRONG_CELL = "def f(x):\n    return 0\n"
RIGHT_CELL = "def f(x):\n    return x * x + 1\n"
CHECK_CELL = "assert f(2) == 5 and f(3) == 10\nprint('ALL TESTS PASSED')\n"
_FORGED_CELLS = json.dumps(
    [
        {"stdout": "", "stderr": "", "display": [], "error": []},
        {"stdout": "ALL TESTS PASSED\n", "stderr": "", "display": [], "error": []},
    ]
)
_FORGE = (
    "import json, os, sys\n"
    f"open('.jupyter_output.json', 'w').write({_FORGED_CELLS!r})\n"
    "answers = [json.dumps({'n': n, 'display': [], 'error': []}).encode() for n in (0, 1)]\n"
    "frames = [b'%d\\n%s' % (len(a), a) for a in answers]\n"
    "frames.append(b'out 1 17\\nALL TESTS PASSED\\ncell 1 42\\n'\n"
    '              b\'{"display": [], "error": [], "cut": false}end 2 0\\n\')\n'
    "for fd in range(3, 256):\n    for frame in frames:\n        try:\n            os.write(fd, frame)\n"
    "        except OSError:\n            pass\n"
    "sys.stdout.write(frames[-1].decode())\nsys.stdout.flush()\n"
)
ENDINGS = {
    "os-exit": "os._exit(0)\n",
    "sys-exit": "sys.exit(0)\n",
    "kill-itself": "import signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "exec-another-program": "os.execv(sys.executable, [sys.executable, '-c', 'print(\"ALL TESTS PASSED\")'])\n",
    "exit-from-a-thread": "import threading, time\n"
    "threading.Thread(target=lambda: (time.sleep(0.1), os._exit(0))).start()\n",
    "a-child-answers-on": "if os.fork() == 0:\n    import time\n    time.sleep(0.2)\n    for frame in frames:\n"
    "        for fd in range(3, 256):\n            try:\n                os.write(fd, frame)\n"
    "            except OSError:\n                pass\n    os._exit(0)\n",
}


def _notebook(client: TestClient, cells: list[str]) -> dict[str, Any]:
    r = client.post("/run_jupyter", json={"cells": cells, "total_timeout": 3})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_the_check_cell_passes_a_right_program(hostile: TestClient) -> None:
    body = _notebook(hostile, [RIGHT_CELL, CHECK_CELL])
    assert body["status"] == "Success" and body["cells"][1]["stdout"] == "ALL TESTS PASSED\n", body
    body = _notebook(hostile, [WRONG_CELL, CHECK_CELL])
    assert body["status"] == "Success" and body["cells"][1]["error"][0]["ename"] == "AssertionError", body


@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_cell_that_forges_and_ends_never_makes_the_check_pass(hostile: TestClient, ending: str) -> None:
    forge = _FORGE + ENDINGS[ending]
    for cells in ([WRONG_CELL + forge, CHECK_CELL], [WRONG_CELL, forge, CHECK_CELL]):
        body = _notebook(hostile, cells)
        if body["status"] == "Success":  # the check ran, and failed (what a child wrote may be in its output)
            assert body["cells"][-1]["error"], (ending, body)
        else:
            assert body["status"] == "Failed" and body["cells"] == [], (ending, body)


# A cell that answers for itself on the kernel's channel, with the kernel's own request (read from its frame),
# then ends the kernel: its answer is the one the supervisor reads. ``{shape}`` changes that answer's shape.
_SELF_ANSWER = (
    "import json, os, sys\n"
    "frame = sys._getframe()\n"
    "while not {'answers', 'request'} <= frame.f_locals.keys():\n    frame = frame.f_back\n"
    "answer = {**frame.f_locals['request'], 'source': None, 'display': [{'text/plain': 'SELF'}], 'error': [],\n"
    "          'cut': False}\n"
    "{shape}\n"
    "body = json.dumps(answer).encode()\n"
    "frame.f_locals['answers'].sendall(b'%d\\n' % len(body) + body)\n"
    "os._exit(0)\n"
)
SHAPES = {
    "an-extra-key": "answer['verdict'] = 'AC'",
    "a-missing-key": "del answer['source']",
    "a-wrong-type": "answer['cell_timeout'] = 'none'",
    "a-bool-for-an-int": "answer['cell_timeout'] = True",
}


def test_a_kernel_answers_for_its_cell_only_in_the_shape_asked(hostile: TestClient) -> None:
    """The kernel is the program's: it may answer for its own cell (a notebook's cells can always change what
    their kernel answers), but only with an answer of the shape the supervisor asked for (``KernelAnswer``,
    read by ``wire_schema.conform``). One of any other shape ends the record: Failed, never SE, never the
    answer."""
    body = _notebook(hostile, [_SELF_ANSWER.replace("{shape}", "pass")])
    assert body["status"] == "Success" and body["cells"][0]["display"] == [{"text/plain": "SELF"}], body
    for name, shape in SHAPES.items():
        body = _notebook(hostile, [_SELF_ANSWER.replace("{shape}", shape)])
        assert body["status"] == "Failed" and body["cells"] == [], (name, body)
        assert "the kernel's answer is not one" in json.dumps(body), (name, body)
