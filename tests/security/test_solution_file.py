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
