"""``POST /run_jupyter``: cells in order in one namespace, each with its own output, display and error."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient


def jupyter(client: TestClient, cells: list[str], **fields: Any) -> dict[str, Any]:
    r = client.post("/run_jupyter", json={"cells": cells, **fields})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_cells_share_a_namespace_and_keep_their_own_output(client: TestClient) -> None:
    body = jupyter(
        client, ["x = 20\nprint('first')", "import sys\nprint('to err', file=sys.stderr)\nx + 1", "print(x * 2)\nNone"]
    )
    assert body["status"] == "Success" and body["driver"]["status"] == "Finished"
    first, second, third = body["cells"]
    assert first == {"stdout": "first\n", "stderr": "", "display": [], "error": []}
    assert second["stderr"] == "to err\n" and second["display"] == [{"text/plain": "21"}]
    assert third["stdout"] == "40\n" and third["display"] == []


def test_a_failing_cell_does_not_stop_the_next(client: TestClient) -> None:
    body = jupyter(client, ["y = 1", "print('partial')\n1 / 0", "y + 1"])
    assert body["status"] == "Success"
    error = body["cells"][1]["error"][0]
    assert error["ename"] == "ZeroDivisionError" and error["evalue"] == "division by zero"
    assert any("ZeroDivisionError" in line for line in error["traceback"])
    assert body["cells"][1]["stdout"] == "partial\n"
    assert body["cells"][2]["display"] == [{"text/plain": "2"}]
    syntax = jupyter(client, ["def f(:", "'still here'"])["cells"]
    assert syntax[0]["error"][0]["ename"] == "SyntaxError" and syntax[1]["display"] == [{"text/plain": "'still here'"}]


def test_cell_timeout_stops_one_cell_and_total_timeout_the_run(client: TestClient) -> None:
    body = jupyter(client, ["import time\nwhile True: time.sleep(0.05)", "'after'"], cell_timeout=0.5)
    assert body["status"] == "Success"
    assert body["cells"][0]["error"][0]["ename"] == "CellTimeout"
    assert body["cells"][1]["display"] == [{"text/plain": "'after'"}]
    started = time.monotonic()
    body = jupyter(client, ["import time\ntime.sleep(30)"], total_timeout=1)
    assert time.monotonic() - started < 10
    assert body["status"] == "Failed" and body["cells"] == [] and body["driver"]["status"] == "TimeLimitExceeded"


def test_files_in_and_out(client: TestClient) -> None:
    files = {"data.txt": base64.b64encode(b"3 4").decode()}
    cells = ["a, b = map(int, open('data.txt').read().split())", "open('out.txt', 'w').write(str(a * b))"]
    body = jupyter(client, cells, files=files, fetch_files=["out.txt"])
    assert body["status"] == "Success" and base64.b64decode(body["files"]["out.txt"]) == b"12"
    assert body["cells"][1]["display"] == [{"text/plain": "2"}]  # write() returns the count, as a notebook shows


def test_cells_cannot_forge_other_cells_or_reach_the_driver_file(client: TestClient) -> None:
    """A cell that overwrites the driver's results file changes nothing but its own run: the status says
    the results are gone (Failed), never a result the cells did not produce."""
    body = jupyter(client, ["open('.jupyter_output.json', 'w').write('[1]')", "import os\nos._exit(0)"])
    assert body["status"] == "Failed" and body["cells"] == []


def test_an_unknown_kernel_is_a_sandbox_error(client: TestClient) -> None:
    body = jupyter(client, ["1"], kernel="ruby")
    assert body["status"] == "SandboxError" and "ruby" in body["message"]


# Lone surrogates wherever a cell can put one: no JSON answer can carry them as they are.
SURROGATE_CELLS = {
    "stdout": "print('a\\ud800b')",
    "stderr": "import sys\nprint('a\\udfffb', file=sys.stderr)",
    "descriptors": "import os\nos.write(1, b'a\\xed\\xa0\\x80b')\nos.write(2, b'a\\xed\\xbf\\xbfb')",
    "error-message": "raise ValueError('a\\ud800b')",
    "error-str": "class E(Exception):\n    def __str__(self):\n        return 'a\\ud800b'\nraise E()",
    "display-repr": "class A:\n    def __repr__(self):\n        return 'a\\ud800b'\nA()",
}


@pytest.mark.parametrize("where", sorted(SURROGATE_CELLS))
def test_a_lone_surrogate_in_a_cell_comes_back_representable(client: TestClient, where: str) -> None:
    body = jupyter(client, [SURROGATE_CELLS[where], "'next'"])
    json.dumps(body, ensure_ascii=False).encode("utf-8")  # strict: no lone surrogate in any string
    assert body["status"] == "Success", body
    first, second = body["cells"]
    shown = json.dumps(first)
    assert any(mark in shown for mark in ("\\\\ud800", "\\\\udfff", "\\ufffd")), first
    assert second["display"] == [{"text/plain": "'next'"}]


ENDINGS = [
    "import os\nos._exit(0)",
    "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
    "import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'print(1)'])",
]


@pytest.mark.parametrize("ending", ENDINGS)
def test_a_cell_that_ends_the_kernel_leaves_the_later_cells_unrun(client: TestClient, ending: str) -> None:
    forged = json.dumps([{"stdout": "", "stderr": "", "display": [], "error": []}] * 2)
    body = jupyter(client, [f"open('.jupyter_output.json', 'w').write({forged!r})\n{ending}", "print('ran')"])
    assert body["status"] == "Failed" and body["cells"] == [], body


def test_sys_exit_is_the_cells_error_and_the_next_cell_runs(client: TestClient) -> None:
    body = jupyter(client, ["import sys\nsys.exit(3)", "print('ran')"])
    assert body["status"] == "Success" and body["cells"][0]["error"][0]["ename"] == "SystemExit", body
    assert body["cells"][1]["stdout"] == "ran\n"


def test_output_of_subprocesses_is_the_cells(client: TestClient) -> None:
    body = jupyter(client, ["import subprocess\nsubprocess.run(['echo', 'from a child'])\nNone", "1"])
    assert body["cells"][0]["stdout"] == "from a child\n" and body["cells"][1]["stdout"] == "", body


def test_a_cut_output_fails_the_run_and_says_why(client: TestClient) -> None:
    """Cells past the output cap keep what fits and run on, but the run is not answered as a clean one: its
    callers judge what the cells printed, and were not given all of it (``/run_code`` answers the same)."""
    body = jupyter(client, ["print('3')\nimport sys\nsys.stdout.write('\\n' * (6 << 20))", "'after'"])
    assert body["status"] == "Failed" and "passed the cap" in body["message"]
    assert body["driver"]["output_truncated"] is True
    assert body["cells"][0]["stdout"].startswith("3\n") and body["cells"][1]["display"] == [{"text/plain": "'after'"}]


def test_a_request_names_a_bounded_number_of_cells_and_only_those_that_ran_are_read(client: TestClient) -> None:
    """A record was made for every cell a request named, whatever ran: a megabyte of empty cells held some 74 MB
    of the server's memory and its event loop for a second, past the time limit that stopped the first."""
    from codegym_sandbox.agent.cell_frames import read_record
    from codegym_sandbox.api.jupyter import MAX_CELLS

    r = client.post("/run_jupyter", json={"cells": [""] * (MAX_CELLS + 1)})
    assert r.status_code == 422 and "cells" in r.text
    body = jupyter(client, ["import time\ntime.sleep(30)", *[""] * (MAX_CELLS - 1)], total_timeout=1)
    assert body["status"] == "Failed" and body["cells"] == []
    assert len(read_record(b"", 10**6).cells) == 1  # nothing ran: one record, not a million
    assert len(jupyter(client, ["1"] * 50)["cells"]) == 50
