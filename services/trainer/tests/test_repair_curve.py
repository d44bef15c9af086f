"""bench/learning_curve.py --task code-repair: the budget rule, the report, a whole --quick run with a tiny model."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from codegym_evaluator.servers import LoopbackServer

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def curve() -> ModuleType:
    return _load("learning_curve")


@pytest.fixture(scope="module")
def repair(curve: ModuleType) -> ModuleType:
    return _load("repair_curve")  # learning_curve put bench/ on the path, as its own import does


def test_both_arms_get_the_same_most_answers_per_prompt_and_step(
    curve: ModuleType, repair: ModuleType, tmp_path: Path
) -> None:
    argv = ["--task", "code-repair", "--max-turns", "3", "--group-size", "2", "--batch-size", "2"]
    args = curve.parse(argv)
    single = repair.arm_config(args, "single-turn", 0, tmp_path, "http://sandbox")
    repaired = repair.arm_config(args, "code-repair", 0, tmp_path, "http://sandbox")
    assert (single.task, single.group_size) == ("code", 6)  # K x group size completions
    assert (repaired.task, repaired.group_size, repaired.max_turns) == ("code-repair", 2, 3)  # of up to K answers
    assert single.batch_size == repaired.batch_size and single.train_steps == repaired.train_steps
    assert single.max_completion_length == repaired.max_completion_length
    assert single.skip_eval and repaired.skip_eval  # both evaluated by turn afterwards, the same way
    assert single.output_dir != repaired.output_dir
    tools = repair.arm_config(curve.parse([*argv, "--tools"]), "code-repair", 0, tmp_path, "http://sandbox")
    # TRL's tool loop caps the whole conversation: K answers' worth of tokens
    assert tools.tools and tools.max_completion_length == 3 * single.max_completion_length


def _point(repair: ModuleType, turns: list[float]) -> object:
    return repair.TurnPoint(turns, [0, 4], [0, 1], 1.5, 2, 1.0)


def test_the_report_compares_the_arms_seed_by_seed(curve: ModuleType, repair: ModuleType) -> None:
    args = curve.parse(["--task", "code-repair", "--seeds", "0", "1"])
    base = _point(repair, [0.5, 0.6])
    results = [
        repair.ArmResult(arm, seed, _point(repair, after), [], 16.0, 700.0, 1.0)
        for arm, seed, after in [
            ("single-turn", 0, [0.5, 0.6]),
            ("code-repair", 0, [0.5, 0.8]),
            ("single-turn", 1, [0.6, 0.6]),
            ("code-repair", 1, [0.6, 0.9]),
        ]
    ]
    text = "\n".join(repair.report(args, base, results, 1.0))
    assert "| code-repair | 0 | 0.500 | +0.000 | 0.800 | +0.200 | 1/4 | 16.0 | 700 |" in text
    assert "| code-repair | 2 | 0.850 +- 0.071 | +0.250 +- 0.071 | the gain holds over seeds |" in text
    assert "pass@1 after turn 2: +0.250 +- 0.071 over 2 seed(s): code repair ahead, over seeds" in text
    assert "pass@1 after turn 1: +0.000 +- 0.000 over 2 seed(s): no difference beyond seed noise" in text
    assert repair.ahead([-0.2, -0.1]) == "single-turn ahead, over seeds"
    assert repair.ahead([-0.2, 0.1]).startswith("no difference")


@pytest.mark.slow
def test_quick_run_trains_both_arms_and_reports_pass_at_1_by_turn(
    curve: ModuleType, tiny_model_dir: Path, tmp_path: Path, sandbox_process: LoopbackServer
) -> None:
    out = tmp_path / "repair"
    argv = ["--task", "code-repair", "--quick", "--seeds", "0", "--model", str(tiny_model_dir)]
    argv += ["--sandbox-url", sandbox_process.url, "--out", str(out), "--lr", "1e-3"]
    assert curve.main(argv) == 0
    report = (out / "report.md").read_text()
    for needle in ("base model: turn 1", "| single-turn | 0 |", "| code-repair | 0 |", "turn 2 after"):
        assert needle in report, needle
    saved = json.loads((out / "results.json").read_text())
    arms = {a["arm"]: a for a in saved["arms"]}
    assert arms["single-turn"]["answers_per_step"] == 2 * 4 * 2  # prompts x group size x K, every step
    assert 2 * 4 <= arms["code-repair"]["answers_per_step"] <= 2 * 4 * 2  # at most the same budget
    for arm in arms.values():
        assert len(arm["after"]["pass_at_1"]) == 2 and arm["after"]["samples"] == 2
        rows = (out / arm["arm"] / "seed_0" / "turns" / "results.jsonl").read_text().splitlines()
        assert {json.loads(row)["turn"] for row in rows} == {1, 2}  # the tiny model fails: asked again
    # the same command again reads the base evaluation and both arms back
    base = (out / "base" / "turns.json").stat().st_mtime_ns
    assert curve.main(argv) == 0
    assert (out / "base" / "turns.json").stat().st_mtime_ns == base
    assert (out / "report.md").read_text().split("\n", 1)[1] == report.split("\n", 1)[1]
