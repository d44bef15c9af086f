"""``codegym-eval`` as a user runs it: a real sandbox server started on loopback, files on disk, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from codegym_evaluator.servers import free_port
from codegym_evaluator.tasks import load_tasks
from codegym_evaluator.tasks.hub import ROOT_ENV

TASKS = load_tasks("humaneval", limit=3)
HUB = Path(__file__).parent / "fixtures" / "hub"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codegym_evaluator.cli", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_run_a_samples_file_with_a_sandbox_it_starts_itself(tmp_path: Path) -> None:
    samples = tmp_path / "samples.jsonl"
    rows = [{"task_id": t.task_id, "completion": t.metadata["canonical_solution"]} for t in TASKS]
    rows.append({"task_id": TASKS[0].task_id, "completion": "    return 42\n"})
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    args = ["run", "--dataset", "humaneval", "--samples", str(samples), "--output", str(out), "--sandbox-workers", "2"]
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert "started a local sandbox at http://127.0.0.1:" in done.stderr
    assert "3 tasks, 4 samples" in done.stdout and "verdicts: AC 3, WA 1" in done.stdout
    assert "evaluating" in done.stderr  # the progress bar
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pass_at_k"] == {"pass@1": (0.5 + 1 + 1) / 3}
    assert summary["run"]["samples"] == str(samples)
    assert (out / "report.md").exists() and (out / "pass_rates.png").exists()
    assert len((out / "results.jsonl").read_text().splitlines()) == 4
    again = cli(*args)  # resumed: nothing left to do, same answer
    assert again.returncode == 0 and len((out / "results.jsonl").read_text().splitlines()) == 4


def test_a_hub_dataset_from_a_copy_of_its_repository(tmp_path: Path) -> None:
    # `--dataset apps` reads codeparrot/apps's test.jsonl where CODEGYM_HUB_ROOT says, as it reads the hub.
    apps = load_tasks("apps", hub_root=HUB)
    rows = [{"task_id": t.task_id, "completion": t.metadata["canonical_solution"]} for t in apps]
    rows.append({"task_id": "APPS/4001", "completion": "print(0)\n"})
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["--dataset", "apps", "--samples", str(samples), "--output", str(tmp_path / "out"), "--sandbox-workers", "2"]
    done = cli("run", *args, env={**os.environ, ROOT_ENV: str(HUB)})
    assert done.returncode == 0, done.stderr
    assert "4 tasks, 5 samples" in done.stdout and "verdicts: AC 4, WA 1" in done.stdout


def test_bad_samples_name_the_line(tmp_path: Path) -> None:
    samples = tmp_path / "samples.jsonl"
    samples.write_text('{"task_id": "HumanEval/0", "completion": "x"}\n{"task_id": "Nope/1", "completion": "x"}\n')
    done = cli(
        "run", "--samples", str(samples), "--output", str(tmp_path / "out"), "--sandbox-url", "http://127.0.0.1:9"
    )
    assert done.returncode == 2
    assert f"codegym-eval: error: {samples}:2: unknown task_id 'Nope/1'" in done.stderr


def test_a_model_endpoint_that_is_down(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    done = cli(
        "run",
        "--limit",
        "2",
        "--base-url",
        f"http://127.0.0.1:{port}/v1",
        "--model",
        "m",
        "--model-retries",
        "1",
        "--output",
        str(tmp_path / "out"),
        "--sandbox-url",
        "http://127.0.0.1:9",
    )
    assert done.returncode == 1, done.stderr
    assert f"the run stopped early: model endpoint http://127.0.0.1:{port}/v1/chat/completions failed" in done.stderr
    assert "run again with the same --output to resume" in done.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["stopped_early"]


def test_help_lists_every_option() -> None:
    done = cli("run", "--help")
    assert done.returncode == 0
    flags = "--dataset --samples --base-url --api-key --n --temperature --top-p --max-tokens --model-concurrency"
    for flag in [*flags.split(), "-k", "--sandbox-url", "--timeout-per-test", "--output", "--difficulty"]:
        assert flag in done.stdout
