"""``codegym-data mask``: the help, --list-metrics, errors, and runs on HumanEval problems in a real sandbox."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from codegym_data.cli import main
from codegym_data.mask.metrics import METRICS
from codegym_data.mask.verify import judge_fills, read_rows
from codegym_evaluator.scoring import Scorer


def test_help_names_every_option_and_gives_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["mask", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    expected = [
        "--dataset",
        "--path",
        "--metrics",
        "--minimum",
        "--max-lines",
        "--probability",
        "--seed",
        "--limit",
        "--out",
        "--sandbox-url",
        "--fim-format",
        "--fim-tokens",
        "--no-require-tested",
        "--list-metrics",
        "examples:",
        "mask --dataset humaneval",
        "CODEGYM_DATA_MASK_",
    ]
    for text in expected:
        assert text in out


def test_list_metrics_says_what_each_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mask", "--list-metrics"]) == 0
    out = capsys.readouterr().out
    for metric in METRICS:
        assert f"`{metric}`" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--metrics", "cyclomatic,loc"], "unknown metric 'loc'"),
        (["--minimum", "lines=few"], "'lines=few': expected name=number"),
        (["--metrics", "lines=-2"], "must not be negative"),
        (["--probability", "1.5"], "probability: Input should be less than or equal to 1"),
        (["--fim-tokens", "<a>,<b>"], "three comma-separated tokens"),
        (["--dataset", "nope"], "unknown dataset 'nope'"),
        (["--limit", "0"], "limit: Input should be greater than or equal to 1"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["mask", *argv, "--sandbox-url", "http://127.0.0.1:9", "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "masked.jsonl").exists()


def test_an_unknown_fim_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["mask", "--fim-format", "spm"])
    assert exit_info.value.code == 2 and "invalid choice: 'spm'" in capsys.readouterr().err


def test_a_run_on_humaneval_writes_verified_rows_and_the_report(
    sandbox_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEGYM_DATA_MASK_SEED", "7")  # settings also come from the environment
    argv = [
        "mask",
        "--dataset",
        "humaneval",
        "--limit",
        "5",
        "--probability",
        "1",
        "--metrics",
        "cyclomatic=2,halstead_volume",
        "--max-lines",
        "8",
        "--fim-format",
        "psm",
        "--sandbox-url",
        sandbox_url,
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| tasks | no solution | functions |" in out and "emitted spans:" in out
    report = json.loads((tmp_path / "report.json").read_text())
    counts = report["counts"]
    assert report["seed"] == 7 and report["metrics"] == {"cyclomatic": 2.0, "halstead_volume": 1.0}
    assert counts["tasks"] == 5 and counts["functions"] == 5 and counts["selected"] == 5
    assert counts["emitted"] + counts["untested"] == 5 and counts["reference_failed"] == 0
    lines = (tmp_path / "masked.jsonl").read_text().splitlines()
    assert len(lines) == counts["emitted"] >= 4
    for line in lines:
        row = json.loads(line)
        assert row["prompt"] == f"<fim_prefix>{row['prefix']}<fim_suffix>{row['suffix']}<fim_middle>"
        assert row["completion"] == row["middle"] and row["seed"] == 7 and row["metrics"]["lines"] <= 8
    assert len((tmp_path / "dropped.jsonl").read_text().splitlines()) == counts["untested"]
    assert "Probability 1 per function" in (tmp_path / "report.md").read_text()

    # The written rows are judged again from the file: the reference middles pass, empty fills do not.
    rows = read_rows(tmp_path / "masked.jsonl")

    async def judge() -> list[str]:
        async with Scorer(sandbox_url) as scorer:
            fills = [(r, r.middle) for r in rows] + [(r, "") for r in rows]
            return [s.verdict for s in await judge_fills(fills, scorer)]

    verdicts = asyncio.run(judge())
    assert verdicts[: len(rows)] == ["AC"] * len(rows) and "AC" not in verdicts[len(rows) :]


def test_the_same_command_writes_the_same_rows(sandbox_url: str, tmp_path: Path) -> None:
    def masked(out: Path) -> str:
        argv = [
            "mask",
            "--limit",
            "6",
            "--probability",
            "0.7",
            "--spans-per-function",
            "2",
            "--seed",
            "3",
            "--sandbox-url",
            sandbox_url,
            "--out",
            str(out),
        ]
        assert main(argv) == 0
        return (out / "masked.jsonl").read_text()

    first = masked(tmp_path / "a")
    assert first and first == masked(tmp_path / "b")


def test_a_sandbox_that_cannot_be_reached_fails_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["mask", "--limit", "2", "--probability", "1", "--sandbox-url", "http://127.0.0.1:9", "--out", str(tmp_path)]
    assert main(argv) == 1
    assert "the sandbox could not judge 2 rows" in capsys.readouterr().err
    assert (tmp_path / "masked.jsonl").read_text() == ""
