"""bench/selfplay_curve.py: the intervals, what the seeds support, and a whole --quick run with a tiny model."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "selfplay_curve.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("selfplay_curve", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_wilson_interval(bench: ModuleType) -> None:
    low, high = bench.wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-3) and high == pytest.approx(0.7634, abs=1e-3)
    assert bench.wilson(10, 10)[1] == 1.0 and bench.wilson(0, 0) == (0.0, 1.0)


def result(bench: ModuleType, mode: str, seed: int, before: int, after: int) -> object:
    seat = bench.Seat
    return bench.RunResult(
        mode,
        seed,
        {"X": seat(before, 0, 10 - before, 0), "O": seat(0, 0, 10, 10)},
        {"X": seat(after, 0, 10 - after, 0), "O": seat(0, 0, 10, 10)},
        [(1, 20.0), (3, 12.0)],
        1.0,
    )


def test_verdicts_over_seeds(bench: ModuleType) -> None:
    up = [result(bench, "rae", 0, 2, 6), result(bench, "rae", 1, 3, 6)]
    assert up[0].win_change() == pytest.approx(0.2)  # 4 more wins of 20 games, both seats pooled
    assert bench.verdict(up, "rae").endswith("the gain holds over seeds")
    assert "response length -8.0" in bench.verdict(up, "rae")
    mixed = [result(bench, "rae", 0, 2, 6), result(bench, "rae", 1, 6, 5)]
    assert bench.verdict(mixed, "rae").endswith("within seed noise)")
    down = [result(bench, "no-rae", 0, 4, 2), result(bench, "no-rae", 1, 4, 4)]
    assert bench.verdict(down, "no-rae").endswith("a null result)")
    assert bench.verdict(up[:1], "rae").endswith("one seed cannot separate learning from noise")
    lines = bench.table(up)
    assert lines[0].startswith("| mode | seed | X win vs random before | after | O win vs random before | after |")
    assert lines[2].startswith("| rae | 0 | 0.20 [") and "0 -> 10 of 20" in lines[2] and "20.0 -> 12.0" in lines[2]
    assert len({line.count("|") for line in lines}) == 1  # every row has the header's columns


def test_quick_run_with_a_tiny_model(bench: ModuleType, tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    assert bench.main(["--quick", "--model", str(tiny_model_dir), "--out", str(out)]) == 0
    saved = json.loads((out / "results.json").read_text())
    runs = saved["runs"]
    assert [(r["mode"], r["seed"]) for r in runs] == [("rae", 0), ("no-rae", 0)]
    for r in runs:
        assert [step for step, _ in r["lengths"]] == [1]
        assert sum(seat["wins"] + seat["draws"] + seat["losses"] for seat in r["after"].values()) == 4
        assert r["before"] == runs[0]["before"]  # one evaluation of the base model serves both modes
    assert (out / "selfplay_curve.png").stat().st_size > 1000
    assert "| rae | 0 |" in (out / "report.md").read_text()
    # a second invocation reads every finished run back instead of training again
    stamp = (out / "rae_seed_0" / "result.json").stat().st_mtime
    assert bench.main(["--quick", "--model", str(tiny_model_dir), "--out", str(out)]) == 0
    assert (out / "rae_seed_0" / "result.json").stat().st_mtime == stamp
    # other settings are another run: trained again, not read back
    assert bench.main(["--quick", "--model", str(tiny_model_dir), "--out", str(out), "--lr", "1e-3"]) == 0
    assert (out / "rae_seed_0" / "result.json").stat().st_mtime != stamp


def test_quick_run_of_kuhn_poker(bench: ModuleType, tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "kuhn"
    assert (
        bench.main(
            ["--quick", "--game", "kuhn_poker", "--modes", "rae", "--model", str(tiny_model_dir), "--out", str(out)]
        )
        == 0
    )
    report = (out / "report.md").read_text()
    assert "| first win vs random before | after | second win vs random before | after |" in report
    assert "| rae | 0 |" in report and "kuhn_poker" in report
