"""Rounds of the code-output game against a real sandbox server, and a frozen opponent behind a real
OpenAI-compatible app in-process whose predictions are scripted (the stand-in for a model)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from ast import literal_eval
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from codegym_evaluator.ask_again import AskAgain
from codegym_evaluator.model_client import ModelError
from codegym_evaluator.servers import LoopbackServer, free_port, sandbox_server
from codegym_trainer.sandbox import RunSandbox
from codegym_trainer.selfplay.code_game.program_runner import (
    PROGRAM_FILE,
    GameLimits,
    ProgramRunner,
    hash_seeds,
    run_request,
)
from codegym_trainer.selfplay.code_game.rounds import OpponentPredictor, play_rounds
from codegym_trainer.selfplay.code_game.rules import (
    PREDICTOR_CORRECT,
    WRITER_INVALID,
    WRITER_WRONG_OWN_PREDICTION,
    predictor_prompt,
    round_metrics,
)
from fastapi import FastAPI

SET_ORDER = "words = {'apple', 'banana', 'cherry', 'date', 'elder', 'fig', 'grape', 'kiwi'}\nprint(list(words))"


def writer(program: str, prediction: str) -> str:
    return f"Here is my program.\n```python\n{program}\n```\n```output\n{prediction}\n```"


def said(output: str) -> str:
    return f"It prints:\n```output\n{output}\n```"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[LoopbackServer]:
    """A real ``codegym-sandbox serve`` on loopback, shared by this module's tests."""
    with sandbox_server(workers=2, backend="local") as server:
        yield server


@pytest.fixture
def runner(sandbox: LoopbackServer) -> Iterator[ProgramRunner]:
    limits = GameLimits(timeout_s=1.0, memory_mb=256)
    with ProgramRunner(RunSandbox((sandbox.url,), concurrency=4), limits=limits) as r:
        yield r


def test_each_run_is_uncached_with_its_own_hash_seed_and_the_programs_file() -> None:
    request = run_request("print(1)", "7", GameLimits(timeout_s=1.5, memory_mb=128))
    assert request.cache is False
    assert request.limits.timeout_s == 1.5 and request.limits.memory_mb == 128
    assert base64.b64decode(request.files[PROGRAM_FILE] or "").decode() == "print(1)"
    assert "'PYTHONHASHSEED': '7'" in request.code.replace('"', "'") and "-S" in request.code


def test_the_two_runs_agree_on_a_deterministic_program_and_not_on_set_order(runner: ProgramRunner) -> None:
    (a, b), (c, d) = runner.run_twice(["print(sorted({3, 1, 2}), 'x' * 3)", SET_ORDER])
    assert (a.verdict, a.stdout) == (b.verdict, b.stdout) == ("AC", "[1, 2, 3] xxx\n")
    assert c.verdict == d.verdict == "AC"
    # the sandbox runs every program under one hash seed; the launcher's differ, so the orders do
    assert sorted(literal_eval(c.stdout)) == sorted(literal_eval(d.stdout)) and c.stdout != d.stdout


def test_each_program_gets_two_hash_seeds_of_its_own() -> None:
    seeds: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        code = json.loads(request.content)["code"].replace('"', "'")
        seeds.append(code.split("'PYTHONHASHSEED': '")[1].split("'")[0])
        step = {"verdict": "AC", "exit_code": 0, "signal": None, "wall_s": 0.0, "cpu_s": None, "max_rss_kb": None}
        step |= {"stdout": "1\n", "stderr": "", "output_truncated": False, "cached": False}
        return httpx.Response(200, json={"verdict": "AC", "compile": None, "run": step})

    with ProgramRunner(RunSandbox(("http://sandbox",)), transport=httpx.MockTransport(record)) as runner:
        runner.run_twice(["print(1)", "print(2)", "print(3)"])
    # the sandbox's own 0 never; otherwise six draws from 2**32 - 1 seeds, so any repeat is a fixed pair
    assert len(seeds) == 6 and "0" not in seeds and len(set(seeds)) == 6
    drawn = {hash_seeds() for _ in range(50)}
    assert len(drawn) == 50 and all(a != b and 0 < int(a) < 2**32 and 0 < int(b) < 2**32 for a, b in drawn)


def test_runs_are_held_to_tight_limits_and_see_only_the_standard_library(runner: ProgramRunner) -> None:
    slow, big, crash = runner.run_twice(["while True:\n    pass", "x = [0] * 10**9\nprint(len(x))", "print(1 // 0)"])
    assert {r.verdict for r in slow} == {"TLE"}
    assert {r.verdict for r in big} == {"MLE"}
    assert {r.verdict for r in crash} == {"RE"} and "ZeroDivisionError" in crash[0].stderr
    (json_run, _), (site, _) = runner.run_twice(["import json\nprint(json.dumps([1]))", "import httpx\nprint(1)"])
    assert json_run.stdout == "[1]\n"
    assert site.verdict == "RE" and "imports no httpx" in site.stderr  # installed, but not for games


# Private helpers of what allowed modules make or return: ``ForwardRef._evaluate`` is ``eval``, an enum class's
# ``_convert_`` makes a module's globals, found by its name, an enum's members. The check refuses them by name.
PRIVATE_EVAL = (
    "import typing\nref = typing.get_args(typing.List['ev' + 'al'])[0]\nev = ref._evaluate({}, {}, frozenset())\n"
    "print(ev(\"__imp\" + \"ort__('po' + 'six').uname()\"))"
)
PRIVATE_SYS = (
    "import enum\nE = enum.Enum\nS = E._convert_('S', 'dataclasses', lambda n: n == 's' + 'ys')\n"
    "print(S['s' + 'ys'].value.modules['po' + 'six'].uname())"
)


# Doors past the static check's reading of the text (each found by an attack round), and the two kinds of answer:
# an act the guard refuses, or what the two runs see differently.
REFUSED = {
    "a generator's frame holds the builtins": "def g():\n    yield 1\nprint(g().gi_frame.f_builtins['open']('x'))",
    "an import by a name in a string": "print(__import__('os').listdir('/'))",
    "a traceback's frame": "try:\n    1 / 0\nexcept Exception as e:\n    print(e.__traceback__.tb_frame.f_globals)",
    "a frame through an allowed module": "import typing\nprint(typing.sys._getframe().f_code)",
    "a file past the standard library's folder": (
        "import dataclasses as d\nroot = d.__file__.rpartition('/')[0]\n"
        "print(d.builtins.open(root + '/../../../etc/hostname').read())"
    ),
    "a module never loaded": "import dataclasses as d\nprint(d.builtins.__import__('pty'))",
    "a module taken out of sys.modules, imported again": (
        "import dataclasses as d\nprint(d.builtins.__import__('posix'))"
    ),
    "eval from a private helper, then a module imported again": PRIVATE_EVAL,
}
# Doors that look a module up by its name: the guard leaves in ``sys.modules`` only what the allowed modules import
# by name as they run, so a program holding ``sys``, or a function told a module's name, finds no other.
BY_NAME = {
    "a module never loaded": "import typing as t\nprint(t.sys.modules['importlib'].import_module('pty'))",
    "the environment through an allowed module": "import typing\nprint(typing.sys.modules['os'].environ['HOME'])",
    "an enum of a module's globals": "import enum\nP = enum.Enum._convert_('P', 'posix', lambda n: n == 'uname')\n"
    "print(P['uname'].value())",
    "sys through an enum of dataclasses' globals": PRIVATE_SYS,
}
DISAGREE = {
    "the working directory through a private helper": (
        "import dataclasses\nprint(dataclasses._create_fn('f', ['d'], ['return d.inspect.os.getcwd()'])(dataclasses))"
    ),
    "the environment through allowed modules' attributes": (
        "import dataclasses\nprint(dataclasses.inspect.os.environ['HOME'])"
    ),
}
FAIR = [
    "import re\nprint('bücher.de'.encode('idna'), 'é'.encode('cp1252'))\n"
    "print(re.findall('\\N{LATIN SMALL LETTER A}', 'aba'))",
    "from dataclasses import dataclass, field\n@dataclass(frozen=True, order=True)\nclass P:\n    x: int\n"
    "    y: list = field(default_factory=list)\nprint(P(1), sorted([P(2), P(1)]))",
    "from collections import namedtuple, Counter\nimport enum, re, json\nT = namedtuple('T', 'a b')\n"
    "C = enum.Enum('C', 'R G')\nprint(T(1, 2), Counter('abca'), list(C), re.findall(r'\\d', 'a1b2'), json.dumps([1]))",
    "from typing import NamedTuple\nfrom decimal import Decimal\nimport statistics, hashlib, functools\n"
    "class N(NamedTuple):\n    a: int\n@functools.lru_cache\ndef f(n):\n    return n\n"
    "print(N(1), Decimal(1) / 7, statistics.mean([1, 2]), hashlib.sha256(b'x').hexdigest()[:4], f(2))",
]


def test_what_a_program_reaches_past_its_text_is_refused_or_seen_to_differ(runner: ProgramRunner) -> None:
    runs = runner.run_twice([*REFUSED.values(), *BY_NAME.values(), *DISAGREE.values(), *FAIR])
    refused, by_name = runs[: len(REFUSED)], runs[len(REFUSED) : len(REFUSED) + len(BY_NAME)]
    disagree, fair = runs[len(REFUSED) + len(BY_NAME) : -len(FAIR)], runs[-len(FAIR) :]
    for door, (a, b) in zip(REFUSED, refused, strict=True):
        assert a.verdict == b.verdict == "RE" and "Error: the code game" in a.stderr, (door, a)
    for door, (a, b) in zip(BY_NAME, by_name, strict=True):
        assert a.verdict == b.verdict == "RE" and "KeyError" in a.stderr, (door, a)
    for door, (a, b) in zip(DISAGREE, disagree, strict=True):
        assert a.verdict == b.verdict == "AC" and a.stdout != b.stdout, (door, a, b)
    for a, b in fair:
        assert a.verdict == b.verdict == "AC" and a.stdout == b.stdout and a.stdout, (a, b)


DEPTH = (
    "def f(n):\n    try:\n        return f(n + 1)\n    except RecursionError:\n        return n\n"
    "def main():\n    return f(0)\nprint(f(0), main())"
)


def test_a_recursion_goes_as_deep_as_under_python3(runner: ProgramRunner, tmp_path: Path) -> None:
    (tmp_path / PROGRAM_FILE).write_text(DEPTH)
    python3 = subprocess.run([sys.executable, "-S", "-s", "-B", PROGRAM_FILE], cwd=tmp_path, capture_output=True)
    ((a, b),) = runner.run_twice([DEPTH])
    assert a.verdict == b.verdict == "AC" and a.stdout == b.stdout == python3.stdout.decode(), (a, python3)


def test_an_unreachable_sandbox_gives_sandbox_errors_after_the_retries() -> None:
    with ProgramRunner(RunSandbox((f"http://127.0.0.1:{free_port()}",), retries=1)) as dead:
        (a, b) = dead.run_twice(["print(1)"])[0]
    assert a.sandbox_error and b.sandbox_error and "unreachable" in (a.error or "")


@pytest.mark.parametrize(("failures", "runs", "verdict"), [(1, 2, "AC"), (2, 2, "SE")])
def test_a_run_that_came_back_se_is_asked_again_by_the_evaluators_policy(
    monkeypatch: pytest.MonkeyPatch, failures: int, runs: int, verdict: str
) -> None:
    asked: list[int] = []
    again = AskAgain.again

    def spy(self: AskAgain, attempt: int, answers: Any) -> float | None:
        asked.append(attempt)
        return again(self, attempt, answers)

    monkeypatch.setattr(AskAgain, "again", spy)
    sent: list[str] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        got = "SE" if len(sent) <= failures else "AC"
        step = {"verdict": got, "exit_code": 0, "signal": None, "wall_s": 0.0, "cpu_s": None, "max_rss_kb": None}
        step |= {"stdout": "1\n", "stderr": "", "output_truncated": False, "cached": False}
        return httpx.Response(200, json={"verdict": got, "compile": None, "run": step})

    sandbox = RunSandbox(("http://sandbox",), retries=1)
    with ProgramRunner(sandbox, transport=httpx.MockTransport(flaky)) as runner:
        out = runner.run_once("print(1)", "7")
    assert out.verdict == verdict and sent == ["/v1/execute"] * runs and asked == list(range(runs))


class ScriptedPredictor:
    """Self-play's predictor in the tests: the policy's completions, scripted per program, recorded."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[tuple[list[str], int]] = []

    def __call__(self, prompts: Sequence[str], m: int) -> list[list[str]]:
        self.asked.append((list(prompts), m))
        by_prompt = {predictor_prompt(program): texts for program, texts in self.answers.items()}
        return [by_prompt[p][:m] for p in prompts]


def test_a_batch_of_rounds_scores_every_outcome(runner: ProgramRunner) -> None:
    easy, hard, own_wrong = "print(2 + 2)", "print(sum(i * i for i in range(7)) % 10)", "print(3 * 3)"
    completions = [
        writer(easy, "4"),
        writer(hard, "1"),
        writer(own_wrong, "6"),
        "I would rather not.",
        writer("import random\nprint(random.random())", "0.5"),
        writer("print(1 // 0)", "0"),
        writer(SET_ORDER, "[]"),
    ]
    predict = ScriptedPredictor(
        {easy: [said("4")] * 3, hard: [said("1"), said("9"), "no idea"], own_wrong: [said("9"), said("6"), said("9")]}
    )
    rounds = play_rounds(completions, runner, predict, 3)

    # only programs with one output to predict reach the predictors, all in one call, output hidden
    assert predict.asked == [([predictor_prompt(easy), predictor_prompt(hard), predictor_prompt(own_wrong)], 3)]
    assert "```output" not in predictor_prompt(hard).split("```python")[1].split("```")[0]
    outcomes = [r.result.outcome for r in rounds]
    assert outcomes == [
        "played",
        "played",
        "wrong_own_prediction",
        "unparsable",
        "rejected",
        "failed",
        "nondeterministic",
    ]
    assert rounds[0].result.writer == -1.0 and rounds[0].result.predictors == (PREDICTOR_CORRECT,) * 3
    assert rounds[1].result.writer == pytest.approx(1 - 2 / 3)  # 91 % 10: one predictor of three right
    assert rounds[1].result.predictors == (1.0, 0.0, 0.0) and rounds[1].result.output == "1"
    assert rounds[2].result.writer == WRITER_WRONG_OWN_PREDICTION and rounds[2].result.predictors == (1.0, 0.0, 1.0)
    for played in rounds[3:]:
        assert played.result.writer == WRITER_INVALID and played.prediction_prompt is None and not played.predictions
    assert rounds[3].runs == () and rounds[4].runs == ()  # nothing to run: unparsable, or rejected by the check
    assert len(rounds[6].runs) == 2 and rounds[6].runs[0].stdout != rounds[6].runs[1].stdout
    assert rounds[1].predictions == (said("1"), said("9"), "no idea")

    metrics = round_metrics([r.result for r in rounds])
    assert metrics["code_game/writer_win_rate"] == pytest.approx(1 / 7)
    assert metrics["code_game/predictor_accuracy"] == pytest.approx(6 / 9)
    assert metrics["code_game/invalid_rate"] == pytest.approx(4 / 7)
    assert metrics["code_game/nondeterministic_rate"] == pytest.approx(1 / 7)


def test_a_private_helper_of_an_allowed_modules_object_loses_the_round(runner: ProgramRunner) -> None:
    predict = ScriptedPredictor({})
    rounds = play_rounds([writer(PRIVATE_EVAL, "x"), writer(PRIVATE_SYS, "x")], runner, predict, 3)
    assert [r.result.outcome for r in rounds] == ["rejected", "rejected"] and predict.asked == [([], 3)]
    assert all(r.result.writer == WRITER_INVALID and r.runs == () for r in rounds)


def test_a_predictor_that_answers_the_wrong_number_of_times_is_an_error(runner: ProgramRunner) -> None:
    with pytest.raises(ValueError, match="asked 2 predictions"):
        play_rounds([writer("print(1)", "1")], runner, lambda prompts, m: [[said("1")] for _ in prompts], 2)
    with pytest.raises(ValueError, match="at least one"):
        play_rounds([writer("print(1)", "1")], runner, lambda prompts, m: [], 0)


def opponent_app(predictions: dict[str, list[str]], served: str = "frozen-coder") -> FastAPI:
    """An OpenAI-compatible app whose answers are scripted per program (``app.state.requests`` keeps bodies)."""
    app = FastAPI()
    app.state.requests = []

    def answer(prompt: str, i: int) -> str:
        program = prompt.split("```python\n", 1)[1].split("\n```", 1)[0]
        return said(predictions[program][i])

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": served, "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(body: dict[str, Any]) -> dict[str, Any]:
        app.state.requests.append(body)
        prompt = body["messages"][-1]["content"]
        choices = [
            {"index": i, "message": {"role": "assistant", "content": answer(prompt, i)}, "finish_reason": "stop"}
            for i in range(int(body.get("n", 1)))
        ]
        return {"object": "chat.completion", "model": body["model"], "choices": choices}

    @app.post("/v1/completions")
    async def completions(body: dict[str, Any]) -> dict[str, Any]:
        app.state.requests.append(body)
        choices = [{"index": i, "text": answer(body["prompt"], i)} for i in range(int(body.get("n", 1)))]
        return {"object": "text_completion", "model": body["model"], "choices": choices}

    return app


def test_a_frozen_opponent_predicts_through_an_openai_compatible_endpoint(runner: ProgramRunner) -> None:
    easy, hard = "print(len('abc'))", "print(''.join(sorted('game', reverse=True)))"
    app = opponent_app({easy: ["3", "3"], hard: ["mgea", "game"]})
    opponent = OpponentPredictor(
        "http://opponent/v1", temperature=0.7, max_tokens=64, transport=httpx.ASGITransport(app=app)
    )
    rounds = play_rounds([writer(easy, "3"), writer(hard, "mgea"), writer("print(", "?")], runner, opponent, 2)

    assert [r.result.writer for r in rounds] == [-1.0, 0.0, WRITER_INVALID]
    assert rounds[1].result.predictors == (1.0, 0.0)
    assert opponent.model == "frozen-coder"  # the endpoint's first model, looked up once
    bodies = app.state.requests
    assert len(bodies) == 2 and all(b["n"] == 2 and b["temperature"] == 0.7 and b["max_tokens"] == 64 for b in bodies)
    assert {b["messages"][0]["content"] for b in bodies} == {predictor_prompt(easy), predictor_prompt(hard)}
    assert all(b["model"] == "frozen-coder" for b in bodies)

    text = OpponentPredictor("http://opponent/v1", "named", api="completion", transport=httpx.ASGITransport(app=app))
    assert text([predictor_prompt(easy)], 1) == [[said("3")]]
    assert app.state.requests[-1]["prompt"] == predictor_prompt(easy) and app.state.requests[-1]["model"] == "named"


def test_an_opponent_that_serves_no_model_is_an_error() -> None:
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": []}

    opponent = OpponentPredictor("http://opponent/v1", transport=httpx.ASGITransport(app=app))
    with pytest.raises(ModelError, match="serves no model"):
        opponent(["What does it print?"], 1)
