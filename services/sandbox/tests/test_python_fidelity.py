"""A Python run is `python3 main.py`: the same snippets, run by the sandbox and by a clean interpreter.

Each snippet runs three ways: alone (``/run_code``), as one of several stdin tests of a test series (forked from
the process that compiled it), and through the interpreter itself, ``python3 main.py`` in a directory of its
own. Standard output and the exit status must be the same; standard error too, once the directory's name is
the same. The interpreter is the one the local backend runs programs with; a container has its own, so
there only the output and the exit status are compared.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from codegym_sandbox import languages
from codegym_sandbox.main import create_app
from fastapi.testclient import TestClient
from sandbox_support import settings_for

SNIPPETS = {
    "argv": "import sys\nprint(sys.argv, len(sys.argv))\n",
    "argv-as-input-file": "import sys\nif len(sys.argv) > 1:\n    sys.stdin = open(sys.argv[1])\n"
    "print(input()[::-1])\n",
    "name-and-file": "import os\nprint(__name__, os.path.basename(__file__), os.path.isabs(__file__))\n",
    "path-and-cwd": "import os, sys\nhere = os.path.dirname(os.path.abspath(__file__))\n"
    "print(sys.path[0] == here, os.getcwd() == here)\n",
    "atexit-and-del": "import atexit\natexit.register(lambda: print('atexit'))\nclass A:\n"
    "    def __del__(self):\n        print('del')\na = A()\nprint('main')\n",
    "del-after-an-error": "class A:\n    def __del__(self):\n        print('del')\na = A()\nraise ValueError('x')\n",
    "keyboard-interrupt": "print('before', flush=True)\nraise KeyboardInterrupt\n",
    "exit-codes": "import sys\nprint('out')\nsys.exit(3)\n",
    "exit-with-a-message": "import sys\nsys.exit('bye')\n",
    # The interpreter takes any int as the status, a bool too (`sys.exit(not ok)`), as a C long, read as it is.
    "exit-with-a-bool": "import sys\nprint('out')\nok = True\nsys.exit(not ok)\n",
    "exit-with-true": "import sys\nsys.exit(True)\n",
    "exit-past-a-long": "import sys\nsys.exit(2**70)\n",
    "exit-with-an-int-of-its-own": "import sys\nclass C(int):\n    def __and__(self, other):\n        return 0\n"
    "    def __index__(self):\n        return 9\nsys.exit(C(3))\n",
    "uncaught-error": "def f():\n    return 1 / 0\nf()\n",
    "syntax-error": "print(\n",
    "syntax-warning": "print(1 is 1)\n",
    "annotations": "def f(x: int) -> str: ...\nprint(f.__annotations__)\n",
    "non-daemon-thread": "import threading, time\n"
    "threading.Thread(target=lambda: (time.sleep(0.1), print('thread'))).start()\nprint('main')\n",
    "no-final-newline": "import sys\nsys.stdout.write('partial')\n",
    "stdin-to-the-end": "import sys\nprint(len(sys.stdin.read()))\n",
    # The standard streams opened again by path or by number, as programs do.
    "stdin-by-path": "print(open('/dev/stdin').read()[::-1], open('/proc/self/fd/0').read() == '')\n",
    "stdin-by-number": "print(open(0).read().upper(), end='')\n",
    "stdout-and-stderr-by-path": "open('/dev/stdout', 'w').write('out\\n')\nopen('/dev/stderr', 'w').write('err\\n')\n"
    "with open('/dev/fd/1', 'w') as out, open('/dev/fd/0') as stdin:\n    out.write(stdin.read())\n",
    # Output that only the interpreter's exit writes: a file held in a reference cycle (a class, an object or a
    # function that refers to itself), freed by the garbage collection at exit, and text left in the original
    # stdout by a program that rebound sys.stdout after printing.
    "file-held-by-a-class": "class Out:\n    f = open(1, 'w')\nOut.f.write(input()[::-1] + '\\n')\n",
    "file-held-in-a-cycle": "class W:\n    pass\nw = W()\nw.me = w\nw.f = open(1, 'w')\nw.f.write(input() + '\\n')\n",
    "file-held-by-a-closure": "def make():\n    f = open(1, 'w')\n    def put(s):\n        f.write(s)\n"
    "    put.me = put\n    return put\nput = make()\nput(input() + '\\n')\n",
    "del-in-a-cycle": "class A:\n    def __del__(self):\n        print('del')\na = A()\na.me = a\nprint('main')\n",
    "stdout-rebound-to-stderr": "import sys\nprint(input())\nsys.stdout = sys.stderr\nprint('debug')\n",
    "stdout-rebound-to-devnull": "import os, sys\nprint(input())\nsys.stdout = open(os.devnull, 'w')\nprint('noise')\n",
    "stdout-rebound-to-a-stringio": "import io, sys\nprint(input())\nsys.stdout = io.StringIO()\nprint('kept')\n",
    "stdout-set-to-none": "import sys\nprint(input())\nsys.stdout.flush()\nsys.stdout = None\n",
    # The streams' encoding and error handlers are the interpreter's own (surrogateescape under C.UTF-8).
    "stream-error-handlers": "import sys\nprint(sys.stdin.encoding, sys.stdin.errors)\n"
    "print(sys.stdout.encoding, sys.stdout.errors, sys.stderr.encoding, sys.stderr.errors)\n"
    "print('caf' + b'\\xc3\\xa9'.decode('ascii', 'surrogateescape'))\n",
    # The whole recursion limit is the program's: the runner's own frames take none of it.
    "recursion-headroom": "import sys\ndef g(n):\n    return 0 if n == 0 else 1 + g(n - 1)\nbest = 0\n"
    "for n in range(900, 1001):\n    try:\n        g(n)\n        best = n\n    except RecursionError:\n        break\n"
    "sys.setrecursionlimit(sys.getrecursionlimit())\nprint(sys.getrecursionlimit(), best, g(990))\n",
    "recursion-limit-at-its-largest": "import sys\nsys.setrecursionlimit(2**31 - 1)\nprint('set')\n",
}
STDIN = "olleh\n"


@pytest.fixture(scope="module")
def sandbox(backend: str) -> Iterator[TestClient]:
    with TestClient(create_app(settings_for(backend, workers=1, cache_entries=0))) as c:
        yield c


def _interpreter(code: str) -> tuple[str, str, int]:
    """``python3 main.py`` in a directory of its own, with the environment the sandbox gives Python runs."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "main.py"), "w") as f:
            f.write(code)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        run = subprocess.run(
            [languages.base_python(), "main.py"],
            cwd=tmp,
            input=STDIN,
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
        return run.stdout, run.stderr.replace(tmp, "/tmp/box"), run.returncode


def _alone(client: TestClient, code: str) -> tuple[str, str, int]:
    r = client.post("/run_code", json={"code": code, "language": "python", "stdin": STDIN})
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()["run_result"]
    return result["stdout"], result["stderr"], result["return_code"]


def _in_a_test_series(client: TestClient, code: str) -> list[tuple[str, str]]:
    tests = [{"stdin": STDIN, "expected_stdout": ""}] * 2
    r = client.post("/v1/evaluate", json={"language": "python", "programs": [code], "tests": tests})
    assert r.status_code == 200, r.text
    return [(t["stdout"], t["stderr"]) for t in r.json()["results"][0]["tests"]]


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_a_python_run_is_python3_main_py(sandbox: TestClient, backend: str, name: str) -> None:
    code = SNIPPETS[name]
    out, err, status = _interpreter(code)
    got_out, got_err, got_status = _alone(sandbox, code)
    assert (got_out, got_status) == (out, status), (name, got_err)
    if backend == "local":
        assert got_err == err, name
    for series_out, series_err in _in_a_test_series(sandbox, code):
        assert series_out == out, name
        if backend == "local":
            assert series_err == err[-1024:], name
