"""bench/learning_curve.py: where a gain came from, what the seeds support, and a whole run with a tiny model."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from codegym_evaluator.servers import LoopbackServer
from codegym_trainer.evaluation import EvalPoint

BENCH = Path(__file__).resolve().parents[3] / "bench" / "learning_curve.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("learning_curve", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def evaluation(tmp_path: Path, name: str, step: int, verdicts: dict[str, str], sampled: float | None) -> EvalPoint:
    path = tmp_path / f"{name}.jsonl"
    rows = [{"task_id": t, "greedy": {"verdict": v}, "samples": []} for t, v in verdicts.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    solved = sum(v == "AC" for v in verdicts.values())
    return EvalPoint(
        step, solved / len(verdicts), solved, len(verdicts), 0, {}, 1.0, sampled_pass_at_1=sampled, answers=str(path)
    )


def test_a_gain_is_split_into_format_and_correctness(bench: ModuleType, tmp_path: Path) -> None:
    before = evaluation(tmp_path, "a", 0, {"t1": "CE", "t2": "CE", "t3": "WA", "t4": "AC", "t5": "TLE"}, 0.3)
    after = evaluation(tmp_path, "b", 8, {"t1": "AC", "t2": "WA", "t3": "AC", "t4": "RE", "t5": "AC"}, 0.5)
    shift = bench.shift(before, after)
    assert (shift.format_gains, shift.correctness_gains, shift.losses) == (1, 2, 1)
    assert (shift.ce_before, shift.ce_after, shift.problems) == (2, 0, 5)
    assert shift.gain == pytest.approx(0.4) and shift.sampled_gain == pytest.approx(0.2)
    assert shift.format_share == pytest.approx(1 / 3)


def _result(bench: ModuleType, seed: int, gain: float) -> object:
    shift = bench.Shift(0.2, 0.2 + gain, 0.2, 0.2 + gain, 0, 1, 0, 0, 0, 10)
    return bench.SeedResult(seed, {"heldout": shift}, [], [(0, 0.2)], 1.0)


def test_the_verdict_says_what_the_seeds_support(bench: ModuleType) -> None:
    held = bench.verdict([_result(bench, s, g) for s, g in enumerate([0.2, 0.3, 0.25])], "heldout")
    assert "+0.250 +- 0.050 over 3 seed(s), positive in 3/3" in held and held.endswith("the gain holds over seeds")
    noisy = bench.verdict([_result(bench, s, g) for s, g in enumerate([0.3, -0.2, 0.1])], "heldout")
    assert noisy.endswith("the gain does not hold over seeds (within seed noise)")
    null = bench.verdict([_result(bench, s, g) for s, g in enumerate([0.0, -0.1])], "heldout")
    assert null.endswith("no gain (a null result)")
    one = bench.verdict([_result(bench, 0, 0.5)], "heldout")
    assert one.endswith("one seed cannot separate learning from noise")


@pytest.mark.slow
def test_quick_run_reports_every_seed_and_resumes(
    bench: ModuleType, tiny_model_dir: Path, tmp_path: Path, sandbox_process: LoopbackServer
) -> None:
    out = tmp_path / "curve"
    argv = [
        "--quick",
        "--model",
        str(tiny_model_dir),
        "--sandbox-url",
        sandbox_process.url,
        "--out",
        str(out),
        "--lr",
        "1e-3",
    ]
    assert bench.main(argv) == 0
    assert "### humaneval" not in (out / "report.md").read_text()
    trained = {seed: (out / f"seed_{seed}" / "metrics.jsonl").stat().st_mtime_ns for seed in (0, 1)}
    # HumanEval asked for afterwards: each finished seed's saved final model is evaluated, not trained anew
    argv += ["--humaneval-limit", "3"]
    assert bench.main(argv) == 0
    assert {seed: (out / f"seed_{seed}" / "metrics.jsonl").stat().st_mtime_ns for seed in (0, 1)} == trained
    report = (out / "report.md").read_text()
    for needle in ("### heldout", "### humaneval", "| 0 |", "| 1 |", "over 2 seed(s)"):
        assert needle in report, needle
    assert (out / "learning_curve.png").stat().st_size > 1000
    saved = json.loads((out / "results.json").read_text())
    assert [s["seed"] for s in saved["seeds"]] == [0, 1]
    for seed in (0, 1):
        answers = out / f"seed_{seed}" / "evaluations"
        rows = [json.loads(x) for x in (answers / "step_00002.jsonl").read_text().splitlines()]
        assert len(rows) == 4 and len(rows[0]["samples"]) == 2 and rows[0]["greedy"]["verdict"]
        assert len((answers / "humaneval" / "step_00002.jsonl").read_text().splitlines()) == 3
        assert not list((out / f"seed_{seed}").glob("checkpoint-*"))  # optimiser states are not kept
    # the same command again reads every finished seed back instead of training it anew
    marker = out / "seed_0" / "final" / "config.json"
    marker.unlink()
    assert bench.main(argv) == 0
    assert not marker.exists() and (out / "report.md").read_text().split("\n", 1)[1] == report.split("\n", 1)[1]


def _sandboxes(pid: int) -> list[int]:
    """The sandbox servers ``pid`` started."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and b"codegym_sandbox" in (stat.parent / "cmdline").read_bytes():
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
def test_sigterm_stops_the_sandbox_the_run_started(tiny_model_dir: Path, tmp_path: Path) -> None:
    # a Slurm job past its time limit gets SIGTERM: the sandbox the bench started must not outlive it
    argv = [
        sys.executable,
        str(BENCH),
        "--quick",
        "--model",
        str(tiny_model_dir),
        "--out",
        str(tmp_path / "o"),
        "--humaneval-limit",
        "0",
        "--seeds",
        "0",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        children: list[int] = []
        while not children and time.monotonic() < deadline and proc.poll() is None:
            children = _sandboxes(proc.pid)
            time.sleep(0.05)
        assert children, "the bench started no sandbox"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
        for child in children:
            assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]
    finally:
        proc.kill()
        proc.wait()
