"""The embedded default, for real: ``codegym-data synthesize`` with no model URL starts llama.cpp's server on
SmolLM2-135M, asks it for a few candidates and judges them in the session's sandbox. A model this small writes
few usable problems; what is checked is that every candidate ends kept or rejected for a named reason, and that
what is kept is a task file. Slow (the model generates on the CPU)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from codegym_data.synthesize import REASONS
from codegym_evaluator.tasks import read_task_file

pytestmark = pytest.mark.slow


def test_synthesize_with_no_endpoint_runs_smollm2_and_accounts_for_every_candidate(
    sandbox_url: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "codegym_data.cli",
            "synthesize",
            "--count",
            "3",
            "--max-tokens",
            "300",
            "--sandbox-url",
            sandbox_url,
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "starting llama.cpp's server on SmolLM2-135M-Instruct" in done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["model"] == "smollm2-135m-instruct" and report["candidates"] == 3
    assert report["kept"] + sum(report["rejected"].values()) == 3
    assert set(report["rejected"]) <= set(REASONS) - {"model_error", "sandbox_error"}
    rejected = [json.loads(line) for line in (tmp_path / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == 3 - report["kept"]
    assert all(r["reason"] in REASONS and r["answer"].strip() for r in rejected)  # the model really answered
    assert len(read_task_file(tmp_path / "tasks.jsonl")) == report["kept"]
    # the model server is gone
    (port,) = re.findall(r"started llama.cpp's server at http://127.0.0.1:(\d+)", done.stderr)
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", int(port))) != 0
