"""The embedded default, for real: llama.cpp's server on SmolLM2-135M and a sandbox, both started by
``codegym-eval run`` on loopback and stopped at its end. Slow (the model generates on the CPU)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_codegym_eval_with_no_endpoint_runs_smollm2_on_a_few_humaneval_problems(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "codegym_evaluator.cli",
            "run",
            "--dataset",
            "humaneval",
            "--limit",
            "3",
            "--max-tokens",
            "160",
            "--output",
            str(out),
            "--sandbox-workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "starting llama.cpp's server on SmolLM2-135M-Instruct" in done.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in sorted(rows, key=lambda r: r["task_id"])] == [f"HumanEval/{i}" for i in range(3)]
    assert all(r["completion"].strip() for r in rows)  # the model really answered
    assert not any(r["verdict"] == "SE" for r in rows)  # and the sandbox really judged
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["model"] == "smollm2-135m-instruct" and summary["samples"] == 3
    # both servers are gone
    ports = re.findall(r"started (?:a local sandbox|llama.cpp's server) at http://127.0.0.1:(\d+)", done.stderr)
    assert len(ports) == 2
    for port in ports:
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", int(port))) != 0


def test_codegym_eval_turns_on_the_embedded_model(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["run", "--dataset", "humaneval", "--limit", "2", "--max-tokens", "160", "--turns", "2"]
    done = subprocess.run(
        [sys.executable, "-m", "codegym_evaluator.cli", *argv, "--output", str(out), "--sandbox-workers", "2"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    first = {r["task_id"]: r for r in rows if r["turn"] == 1}
    assert sorted(first) == ["HumanEval/0", "HumanEval/1"] and not any(r["verdict"] == "SE" for r in rows)
    wrong = sorted(t for t, r in first.items() if r["verdict"] != "AC")
    assert sorted(r["task_id"] for r in rows if r["turn"] == 2) == wrong  # each wrong answer answered again
    repairs = [json.loads(line) for line in (out / "completions.jsonl").read_text().splitlines()]
    assert all("tests passed" in r["feedback"] for r in repairs if r["turn"] == 2)
    turns = json.loads((out / "summary.json").read_text())["turns"]
    one, two = turns["by_turn"]
    assert one["known"] == two["known"] == 2 and two["asked"] == len(wrong) and one["pass_at_1"] <= two["pass_at_1"]
    assert "## Turns of feedback" in (out / "report.md").read_text()
    assert "after each turn of feedback:" in done.stdout
