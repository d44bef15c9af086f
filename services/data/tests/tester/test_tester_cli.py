"""``codegym-data test`` end to end against the session's sandbox: a table, JSON, rows, and exit statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from codegym_data.cli import main

SOLUTION = "def inc(x):\n    return x + 1\n\n\ndef dec(x):\n    return x - 1\n"
# Executable lines 1, 2, 5, 6. The two asserts call inc only: both run 1 and 5 (the defs) and 2.
TESTS = "import math\n\nassert inc(1) == 2\nassert inc(math.floor(2.5)) == 4\n"


def test_python_table_and_exit_status(tmp_path: Path, sandbox_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    sol, tests = tmp_path / "sol.py", tmp_path / "test_sol.py"
    sol.write_text(SOLUTION)
    tests.write_text(TESTS)
    argv = ["test", "--language", "python", "--code", str(sol), "--tests", str(tests), "--sandbox-url", sandbox_url]
    assert main(argv) == 1  # inc(2) is 3, not 4
    out = capsys.readouterr().out
    assert "python: WA, 1/2 passed (AC 1, WA 1)" in out
    assert "coverage: 3/4 lines (75.0%), uncovered: 6" in out
    rows = [line.split() for line in out.splitlines() if line[:2] in ("0 ", "1 ")]
    assert [(r[0], r[1], r[2], r[4], r[5]) for r in rows] == [
        ("0", "assert", "AC", "3/4", "1-2,5"),
        ("1", "assert", "WA", "3/4", "1-2,5"),
    ]


def test_json_rows(tmp_path: Path, sandbox_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"id": "inc", "language": "python", "code": SOLUTION, "tests": ["assert inc(1) == 2"]},
        {
            "id": "echo",
            "language": "bash",
            "code": "read x\necho $x\n",
            "tests": [{"stdin": "hi\n", "expected_stdout": "hi\n"}],
        },
    ]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["test", "--rows", str(tmp_path / "rows.jsonl"), "--json", "--sandbox-url", sandbox_url]) == 0
    inc, echo = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert inc["id"] == "inc" and inc["verdict"] == "AC" and inc["verdicts"] == {"AC": 1}
    assert inc["coverage"] == {
        "covered": 3,
        "executable": 4,
        "percent": 75.0,
        "covered_lines": [1, 2, 5],
        "uncovered_lines": [6],
    }
    assert echo["verdict"] == "AC" and echo["coverage"] is None and "bash" in echo["coverage_note"]


def test_c_with_jsonl_tests(tmp_path: Path, sandbox_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sol.c").write_text('#include <stdio.h>\nint main(void) {\n    puts("ok");\n    return 0;\n}\n')
    (tmp_path / "cases.jsonl").write_text(json.dumps({"stdin": "", "expected_stdout": "ok\n"}) + "\n")
    argv = [
        "test",
        "--language",
        "c",
        "--code",
        str(tmp_path / "sol.c"),
        "--tests",
        str(tmp_path / "cases.jsonl"),
        "--json",
        "--sandbox-url",
        sandbox_url,
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    # gcov: main's entry (2), the puts (3), the return (4): all run.
    assert report["coverage"]["covered_lines"] == [2, 3, 4] and report["coverage"]["percent"] == 100.0


def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", "--language", "python"]) == 2
    assert "give --language, --code and --tests, or --rows" in capsys.readouterr().err
    (tmp_path / "rows.jsonl").write_text(json.dumps({"language": "python", "code": "x = 1\n"}) + "\n")
    assert main(["test", "--rows", str(tmp_path / "rows.jsonl"), "--sandbox-url", "http://127.0.0.1:9"]) == 2
    assert "row 1 needs language, code and tests" in capsys.readouterr().err
