"""Tests that read the program's file read the program: ``solution.py`` in the run's directory, as the reference
layout has it (the program saved as ``solution.py`` beside the tests, which import it as the module ``solution``).

A run's directory held no such file, and the program could write one: a source constraint (``'sorted' not in
open('solution.py').read()``) failed every honest program (``FileNotFoundError``) and passed one that wrote a file of
its own choosing by that name as it was imported. The checker now writes the program's text there before the program
runs, as its own file, read-only, where the program can neither change it nor put another in its place.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

HONEST = "def my_sort(xs):\n    out = list(xs)\n    out.sort()\n    return out\n"
BREAKS = "def my_sort(xs):\n    return sorted(xs)\n"
# One that breaks the constraint and writes a sorted-free ``solution.py`` as it is imported.
DECOY = BREAKS + (
    "import os\n"
    "for way in ('replace', 'unlink', 'chmod', 'write'):\n"
    "    try:\n"
    "        if way == 'replace':\n"
    "            with open('decoy.py', 'w') as fh:\n"
    "                fh.write('def my_sort(xs):\\n    return []\\n')\n"
    "            os.replace('decoy.py', 'solution.py')\n"
    "        elif way == 'unlink':\n"
    "            os.unlink('solution.py')\n"
    "        elif way == 'chmod':\n"
    "            os.chmod('solution.py', 0o666)\n"
    "        with open('solution.py', 'w') as fh:\n"
    "            fh.write('def my_sort(xs):\\n    return []\\n')\n"
    "    except OSError:\n"
    "        pass\n"
)
READS = {
    "open-by-name": "'sorted' not in open('solution.py').read()",
    "open-module-file": "'sorted' not in open(solution.__file__).read()",
    "getsource-module": "'sorted' not in inspect.getsource(solution)",
}


def _verdict(client: TestClient, program: str, tests: str) -> tuple[str, str]:
    body: dict[str, Any] = {"language": "python", "programs": [program], "tests": [{"assert_code": tests}]}
    r = client.post("/v1/evaluate", json={**body, "cache": False, "limits": {"timeout_s": 5}})
    assert r.status_code == 200, r.text
    result = r.json()["results"][0]
    return result["verdict"], result["tests"][0]["stderr"]


@pytest.mark.parametrize("read", sorted(READS))
def test_a_source_constraint_reads_the_programs_own_text(hostile: TestClient, read: str) -> None:
    """As python3 judges the program saved as ``solution.py`` beside the tests: the honest program passes, one that
    breaks the constraint fails, and one that also writes a decoy ``solution.py`` fails all the same."""
    tests = "import inspect\nimport solution\nfrom solution import my_sort\n\nassert my_sort([2, 1]) == [1, 2]\n"
    tests += f"assert {READS[read]}\n"
    for program, want in ((HONEST, "AC"), (BREAKS, "WA"), (DECOY, "WA")):
        verdict, stderr = _verdict(hostile, program, tests)
        assert verdict == want, (program, stderr)


def test_the_program_can_neither_change_nor_replace_its_file(hostile: TestClient) -> None:
    """Whatever the program tries (a write, a chmod, an unlink, a rename over it), ``solution.py`` is the checker's
    file, read-only, holding the program's text to the byte."""
    tests = (
        "import os, stat, solution\n\n"
        "def test_file():\n"
        "    st = os.lstat('solution.py')\n"
        "    assert stat.S_ISREG(st.st_mode) and st.st_mode & 0o222 == 0, oct(st.st_mode)\n"
        "    assert st.st_uid == os.getuid(), (st.st_uid, os.getuid())\n"
        "    assert solution.__file__ == os.path.join(os.getcwd(), 'solution.py')\n"
        f"    assert open('solution.py', 'rb').read() == {DECOY.encode()!r}\n"
        "    assert solution.my_sort([2, 1]) == [1, 2]\n"
    )
    verdict, stderr = _verdict(hostile, DECOY, tests)
    assert verdict == "AC", stderr


def test_the_program_reads_its_own_file(hostile: TestClient) -> None:
    """The program finds ``solution.py`` as it would beside the tests (a program that reads its own text)."""
    program = "TEXT = open('solution.py').read()\n\ndef size():\n    return len(TEXT)\n"
    verdict, stderr = _verdict(hostile, program, f"assert size() == {len(program)}\n")
    assert verdict == "AC", stderr


EQUALS_ALL = (
    "class Anything:\n    def __eq__(self, other):\n        return True\n\n    def __ne__(self, other):\n"
    "        return False\n\n\ndef my_sort(xs):\n    return Anything()\n"
)
# Tests that run the program's text themselves: its code would run in the checker, where its values are objects.
RUNS_TEXT = {
    "exec-file": "ns = {}\nexec(open('solution.py').read(), ns)\n",
    "exec-caught": "ns = {'my_sort': sorted}\ntry:\n    exec(open('solution.py').read(), ns)\nexcept Exception:\n"
    "    pass\n",
    "exec-segment": "import ast\nsrc = open('solution.py').read()\nns = {}\nfor node in ast.parse(src).body:\n"
    "    exec(ast.get_source_segment(src, node), ns)\n",
    "exec-tree": "import ast\nns = {}\nexec(compile(ast.parse(open('solution.py').read()), 'sol', 'exec'), ns)\n",
    "exec-with-more": "ns = {}\nexec(open('solution.py').read() + '\\nseen = True\\n', ns)\n",
}


@pytest.mark.parametrize("form", sorted(RUNS_TEXT))
def test_tests_that_run_the_programs_text_are_the_runs_error(hostile: TestClient, tmp_path: Any, form: str) -> None:
    """python3 passes the always-equal object (the tests ran its code in their own process); the checker compiles
    none of the program's text, for any program."""
    import subprocess
    import sys

    tests = RUNS_TEXT[form] + "assert ns['my_sort']([2, 1]) == [1, 2]\n"
    (tmp_path / "solution.py").write_text(EQUALS_ALL)
    (tmp_path / "main.py").write_text(tests)
    assert subprocess.run([sys.executable, "main.py"], cwd=tmp_path, capture_output=True, timeout=60).returncode == 0
    for program in (EQUALS_ALL, BREAKS):
        verdict, stderr = _verdict(hostile, program, tests)
        assert verdict == "RE", (program, stderr)
        assert "the tests compiled the program's text" in stderr


def test_tests_that_read_the_programs_text_or_run_their_own_are_as_before(hostile: TestClient) -> None:
    """A parse of the text (a tree, no code) and the tests' own code, a line of which the program also has, run."""
    tests = (
        "import ast\ntree = ast.parse(open('solution.py').read())\n"
        "assert not any(isinstance(n, ast.Call) and getattr(n.func, 'id', '') == 'sorted' for n in ast.walk(tree))\n"
        "ns = {}\nexec('LIMIT = 3', ns)\nexec(compile(ast.parse('CUT = 2'), '<own>', 'exec'), ns)\n"
        "assert my_sort([2, 1]) == [1, 2] and ns['LIMIT'] == 3\n"
    )
    for program, want in ((HONEST + "\nLIMIT = 3\nCUT = 2\n", "AC"), (BREAKS + "\nLIMIT = 3\n", "WA")):
        verdict, stderr = _verdict(hostile, program, tests)
        assert verdict == want, (program, stderr)
