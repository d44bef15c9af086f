from __future__ import annotations

from pathlib import Path

from codegym_trainer.logs import MetricsSink, read_metrics


def test_a_sink_writes_rows_and_a_disabled_one_writes_nothing(tmp_path: Path) -> None:
    sink = MetricsSink(tmp_path / "first")
    sink.write(1, {"reward": 0.5, "loss": float("nan")})
    sink.write(1, {"eval/pass@1": 0.25}, kind="eval")
    sink.close()
    rows = read_metrics(tmp_path / "first" / "metrics.jsonl")
    assert [(r["step"], r["kind"]) for r in rows] == [(1, "train"), (1, "eval")]
    assert rows[0]["reward"] == 0.5 and rows[0]["loss"] is None
    assert any((tmp_path / "first" / "tensorboard").iterdir())

    # another training process: the same calls, and no file of the run is opened or written
    quiet = MetricsSink(tmp_path / "other", enabled=False)
    quiet.write(1, {"reward": 0.5})
    quiet.close()
    assert not (tmp_path / "other").exists()
