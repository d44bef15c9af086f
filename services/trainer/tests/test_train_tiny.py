"""Whole GRPO runs with a tiny model: outputs, resume, a sandbox that dies mid-run, Ctrl-C."""

from __future__ import annotations

import http.server
import io
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
from codegym_evaluator.servers import LoopbackServer
from codegym_trainer.config import TrainConfig
from codegym_trainer.run import run
from rich.console import Console


def tiny_config(model: Path, out: Path, **over: object) -> TrainConfig:
    values: dict[str, object] = {
        "model": str(model),
        "train_steps": 2,
        "batch_size": 2,
        "group_size": 2,
        "max_completion_length": 8,
        "eval_limit": 2,
        "eval_max_new_tokens": 8,
        "save_steps": 1,
        "completions_interval": 1,
        "sandbox_workers": 2,
        "output_dir": out,
        "progress": False,
        "threads": 1,
        "learning_rate": 1e-3,
    }
    values.update(over)
    return TrainConfig(**values)  # type: ignore[arg-type]


def train_rows(out: Path) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["kind"] == "train"]


def test_short_run_writes_its_outputs_and_resumes(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    summary = run(tiny_config(tiny_model_dir, out), console=Console(file=io.StringIO()))
    assert summary.steps == 2
    assert [p.step for p in summary.evals] == [0, 2]  # before the first step and at the end
    rows = train_rows(out)
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        for key in (
            "reward",
            "verdicts/pass",
            "verdicts/CE",
            "verdicts/TLE",
            "verdicts/RE",
            "verdicts/SE",
            "time/generation",
            "time/scoring",
            "time/optimisation",
            "time/scoring_share",
        ):
            assert key in r, key
    evals = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if '"kind": "eval"' in x]
    assert [e["step"] for e in evals] == [0, 2] and "eval/pass@1" in evals[0]
    table = [json.loads(x) for x in (out / "completions" / "step_00002.jsonl").read_text().splitlines()]
    assert len(table) == 4 and {"prompt", "completion", "verdict", "reward", "advantage"} <= set(table[0])
    assert (out / "reward_curve.png").stat().st_size > 1000
    assert (out / "final" / "config.json").exists() and (out / "final" / "tokenizer_config.json").exists()
    assert (out / "checkpoint-1").is_dir() and (out / "checkpoint-2").is_dir()
    assert any((out / "tensorboard").iterdir())
    saved = json.loads((out / "summary.json").read_text())
    assert saved["pass_at_1_before"] is not None and saved["pass_at_1_after"] is not None

    resumed = run(
        tiny_config(tiny_model_dir, out, train_steps=3, resume="latest", skip_eval=True),
        console=Console(file=io.StringIO()),
    )
    assert resumed.steps == 3
    assert [r["step"] for r in train_rows(out)] == [1, 2, 3]  # step 3 only: 1 and 2 were not redone


class GoesAway(http.server.ThreadingHTTPServer):
    """A door to a real sandbox that answers the first ``/v1/evaluate`` and then hangs up on everything:
    the sandbox is gone from the second step on, whatever the timing of the steps."""

    def __init__(self, sandbox_url: str) -> None:
        self.sandbox_url, self.gone = sandbox_url, False
        super().__init__(("127.0.0.1", 0), _Door)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Door(http.server.BaseHTTPRequestHandler):
    server: GoesAway

    def do_POST(self) -> None:
        if self.server.gone:
            self.connection.shutdown(socket.SHUT_RDWR)  # no answer at all, as from a process that died
            self.close_connection = True
            return
        body = self.rfile.read(int(self.headers["Content-Length"]))
        answer = httpx.post(
            self.server.sandbox_url + self.path, content=body, headers={"content-type": "application/json"}
        )
        self.server.gone = self.path.startswith("/v1/evaluate")  # one group, or a batch of them
        self.send_response(answer.status_code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, *args: object) -> None:
        pass


def test_sandbox_going_away_mid_run_masks_rewards(
    tiny_model_dir: Path, tmp_path: Path, sandbox_process: LoopbackServer
) -> None:
    out = tmp_path / "run"
    door = GoesAway(sandbox_process.url)
    config = tiny_config(tiny_model_dir, out, train_steps=4, skip_eval=True, sandbox_url=[door.url], sandbox_retries=1)
    console_text = io.StringIO()
    try:
        summary = run(config, console=Console(file=console_text, width=200))
    finally:
        door.shutdown()
        door.server_close()
    assert summary.steps == 4  # no crash
    rows = train_rows(out)
    assert rows[0]["rewards/masked"] == 0.0
    for row in rows[1:]:
        assert row["rewards/masked"] == 1.0 and row["verdicts/SE"] == 1.0
        assert row["reward"] is None  # masked, not a silent zero
    assert summary.masked_rewards >= 4
    assert "SANDBOX UNAVAILABLE" in console_text.getvalue()  # loud, on the run's console


def test_ctrl_c_writes_a_checkpoint(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "codegym_trainer.cli",
        "--model",
        str(tiny_model_dir),
        "--train-steps",
        "200",
        "--batch-size",
        "2",
        "--group-size",
        "2",
        "--max-completion-length",
        "8",
        "--skip-eval",
        "--save-steps",
        "1000",
        "--output-dir",
        str(out),
        "--no-progress",
        "--threads",
        "1",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not ((out / "metrics.jsonl").exists() and train_rows(out)):
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "no training step within 300 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = output.decode()
    assert proc.returncode == 0, text
    checkpoints = sorted(out.glob("checkpoint-*"))
    assert checkpoints, text
    step = int(checkpoints[-1].name.split("-")[1])
    assert 1 <= step < 200
    assert "resume with --resume latest" in " ".join(text.split())
