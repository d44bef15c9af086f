"""``codegym-data synthesize``: the help, refused settings, and runs against a scripted model served on loopback
(the command builds its own clients, so the model has to be a real server) and the session's sandbox."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from codegym_data.cli import main
from codegym_evaluator.servers import free_port
from codegym_evaluator.tasks import load_tasks
from synth_support import GOOD, PLANTED, scripted_model


class _Served:
    """A scripted model app served by uvicorn on a loopback port, in a thread, until ``stop``."""

    def __init__(self, answers: list[str | None], **script: int) -> None:
        self.port = free_port()
        config = uvicorn.Config(scripted_model(answers, **script), host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the scripted model did not start"
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture
def serve() -> Iterator[type[_Served]]:
    started: list[_Served] = []

    class Tracked(_Served):
        def __init__(self, answers: list[str | None], **script: int) -> None:
            super().__init__(answers, **script)
            started.append(self)

    yield Tracked
    for served in started:
        served.stop()


def test_help_names_every_option_and_gives_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["synthesize", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--model-url",
        "--model ",
        "--count",
        "--seed ",
        "--temperature",
        "--concurrency",
        "--min-tests",
        "--mutants",
        "--min-mutation-score",
        "--out",
        "--sandbox-url",
        "--seed-dataset",
        "examples:",
        "CODEGYM_DATA_SYNTHESIZE_",
    ):
        assert flag in out, flag


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--count", "0"], "count: Input should be greater than or equal to 1"),
        (["--min-mutation-score", "1.5"], "min_mutation_score: Input should be less than or equal to 1"),
        (["--seed-dataset", "nope"], "unknown dataset 'nope'"),
    ],
)
def test_bad_settings_are_refused_before_any_work(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = ["--model-url", "http://127.0.0.1:9/v1", "--sandbox-url", "http://127.0.0.1:9"]
    assert main(["synthesize", *argv, *nowhere]) == 2
    assert message in capsys.readouterr().err


def test_a_run_writes_the_tasks_the_report_and_the_rejected(
    serve: type[_Served],
    sandbox_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CODEGYM_DATA_SYNTHESIZE_SEED", "7")  # settings also come from the environment
    model = serve([text for text, _ in PLANTED], seed=7)
    argv = [
        "synthesize",
        "--model-url",
        model.url,
        "--count",
        str(len(PLANTED)),
        "--sandbox-url",
        sandbox_url,
        "--out",
        str(tmp_path),
        "--concurrency",
        "4",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| kept | 1 | 9% |" in out and "| reference_fails | 1 | 9% |" in out and "| weak_tests | 1 | 9% |" in out
    (task,) = load_tasks("jsonl", path=tmp_path / "tasks.jsonl")
    assert task.entry_point == "count_vowels"
    assert task.metadata["synthesized"]["model"] == "scripted"  # the first model the endpoint lists
    assert task.metadata["synthesized"]["seed"] == 7
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["kept"] == 1 and sum(report["rejected"].values()) == len(PLANTED) - 1
    rejected = [json.loads(line) for line in (tmp_path / "rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == len(PLANTED) - 1


def test_a_refused_request_ends_the_run_with_status_1(
    serve: type[_Served], sandbox_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = serve([GOOD, None])
    argv = [
        "synthesize",
        "--model-url",
        model.url,
        "--model",
        "scripted",
        "--count",
        "2",
        "--model-retries",
        "0",
        "--sandbox-url",
        sandbox_url,
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert "| kept | 1 | 50% |" in captured.out and "| model_error | 1 | 50% |" in captured.out
    assert "codegym-data: error: 1 candidates could not be generated or judged (model_error)" in captured.err
    assert len(load_tasks("jsonl", path=tmp_path / "tasks.jsonl")) == 1  # what was judged is still written


def test_an_endpoint_that_is_down(sandbox_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    assert main(["synthesize", "--model-url", url, "--sandbox-url", sandbox_url, "--out", str(tmp_path)]) == 2
    assert f"codegym-data: error: could not list the models of {url}" in capsys.readouterr().err
