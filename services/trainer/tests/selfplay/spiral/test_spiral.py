"""SPIRAL on the seam: the multi-turn rollout with a scripted policy, the advantages by hand, whole runs."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from codegym_trainer.config import TrainConfig
from codegym_trainer.rollout import Generation, Rollout
from codegym_trainer.run import run
from codegym_trainer.selfplay.advantage import RoleAdvantage, RoleBaselines, RoleConditionedAdvantage
from codegym_trainer.selfplay.spiral.evaluation import SelfPlayEvaluator
from codegym_trainer.selfplay.spiral.rollout import THINK, SelfPlayRollout, _Recorder
from rich.console import Console


class ScriptedContext:
    """A TrainerContext whose policy answers by a rule; every answer is numbered, and its ids are its number."""

    def __init__(self, answer: Any, *, busy_elsewhere: int = 0) -> None:
        self.answer = answer
        self.count = 0
        self.calls: list[int] = []
        self.busy_elsewhere = busy_elsewhere  # rounds another process still plays after this one is done
        self.step, self.group_size, self.process_index, self.num_processes, self.tokenizer = 0, 1, 0, 1, None

    def generate(self, prompts: Sequence[Any], *, repeats: int | None = None) -> Generation:
        assert repeats == 1  # self-play prompts are all different positions, never GRPO groups
        self.calls.append(len(prompts))
        texts, ids = [], []
        for prompt in prompts:
            texts.append(f"{self.answer(prompt)} #{self.count}")
            ids.append([self.count])
            self.count += 1
        return Generation([[0, 1]] * len(prompts), ids, texts)

    def score(self, inputs: Sequence[Mapping[str, Any]], prompts: Sequence[Any], generation: Generation) -> Any:
        raise AssertionError("self-play does not call the reward functions")

    def gather(self, values: Sequence[Any]) -> list[Any]:
        return list(values)

    def any_process(self, flag: bool) -> bool:
        if flag:
            return True
        self.busy_elsewhere -= 1
        return self.busy_elsewhere >= 0


def lowest_free_cell(prompt: str) -> str:
    free = re.search(r"Free cells: ([\d, ]+)\.", prompt)
    assert free is not None
    return f"[{free.group(1).split(', ')[0]}]"


def test_every_turn_is_a_sample_with_its_roles_return() -> None:
    # both roles take the lowest free cell: X 1, O 2, X 3, O 4, X 5, O 6, X 7 wins on the 3-5-7 diagonal
    context = ScriptedContext(lowest_free_cell)
    rollout = SelfPlayRollout("tictactoe", games=2, chat=False)(context, [])
    assert len(rollout) == 14 and context.calls == [2] * 7
    assert rollout.extra["role"] == ["X", "O", "X", "O", "X", "O", "X"] * 2
    assert rollout.rewards == [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0] * 2
    assert rollout.groups[:2] == [("tictactoe", "X"), ("tictactoe", "O")]
    assert rollout.extra["turn"][:7] == list(range(7))
    # each sample's ids are those generated for its text, though both games saw the same positions
    for text, ids in zip(rollout.texts, rollout.completion_ids, strict=True):
        assert text.endswith(f"#{ids[0]}")
    assert rollout.metrics["selfplay/X/win_rate"] == 1.0 and rollout.metrics["selfplay/forfeit_rate"] == 0.0
    assert rollout.metrics["selfplay/turns_per_game"] == 7.0


def test_an_illegal_move_loses_for_the_role_that_made_it() -> None:
    # everyone names cell 1: X takes it, then O names an occupied cell and forfeits
    rollout = SelfPlayRollout("tictactoe", games=1, chat=True)(ScriptedContext(lambda prompt: "[1]"), [])
    assert rollout.extra["role"] == ["X", "O"] and rollout.rewards == [1.0, -1.0]
    assert rollout.metrics["selfplay/forfeit_rate"] == 1.0
    assert rollout.prompts[0][0]["role"] == "user" and "as X" in rollout.prompts[0][0]["content"]


def test_kuhn_poker_is_played_through_the_same_rollout() -> None:
    rollout = SelfPlayRollout("kuhn_poker", games=4, chat=False, seed=1)(ScriptedContext(lambda prompt: "[check]"), [])
    # check, check: a showdown worth 1 chip, the higher card wins it
    assert len(rollout) == 8 and sorted(set(rollout.extra["role"])) == ["first", "second"]
    for first, second in zip(rollout.rewards[::2], rollout.rewards[1::2], strict=True):
        assert first is not None and abs(first) == 1.0 and second == -first


def reasoned_move(prompt: Any) -> str:
    """Reasoning that names other cells (and brackets one of them) before its move, the lowest free cell."""
    text = prompt if isinstance(prompt, str) else prompt[0]["content"]
    return f"Cell 5 is the centre, [9] is a corner, 2 or 4 would block. I play {lowest_free_cell(text)}"


@pytest.mark.parametrize("chat", [False, True])
def test_asked_to_think_the_policy_sees_the_request_and_its_last_bracketed_move_counts(chat: bool) -> None:
    rollout = SelfPlayRollout("tictactoe", games=1, chat=chat, think=True)(ScriptedContext(reasoned_move), [])
    texts = [p[0]["content"] if chat else p for p in rollout.prompts]
    assert len(texts) == 7 and all(t.endswith("\n\n" + THINK) and "Free cells" in t for t in texts)
    assert rollout.rewards == [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0]  # the moves were read after the reasoning
    assert rollout.metrics["selfplay/forfeit_rate"] == 0.0
    plain = SelfPlayRollout("tictactoe", games=1, chat=False)(ScriptedContext(lowest_free_cell), [])
    assert not any(THINK in p for p in plain.prompts)


class RecordingTokenizer:
    """A tokenizer that keeps every text it is asked to encode."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.texts: list[str] = []

    def __call__(self, texts: Any, **kwargs: Any) -> Any:
        self.texts.extend([texts] if isinstance(texts, str) else texts)
        return self.tokenizer(texts, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tokenizer, name)


@pytest.mark.parametrize("think", [False, True])
def test_the_evaluation_shows_the_policy_what_training_does(tiny_model_dir: Path, think: bool) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = RecordingTokenizer(AutoTokenizer.from_pretrained(tiny_model_dir))
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    evaluator = SelfPlayEvaluator(
        "tictactoe", tokenizer, games=1, chat=False, max_new_tokens=2, opponents=["random"], think=think
    )
    evaluator(model, 0)
    prompts = [t for t in tokenizer.texts if "Your move" in t]
    assert prompts and all(t.endswith(THINK) == think for t in prompts)


def test_a_finished_process_generates_while_another_still_plays() -> None:
    context = ScriptedContext(lambda prompt: "[1]", busy_elsewhere=2)
    recorder = _Recorder(context, chat=False)
    recorder.idle_until_all_done()
    assert context.calls == [1, 1]  # two filler rounds, then every process is done


def turns(episodes: Sequence[tuple[str, Sequence[tuple[str, float]]]]) -> Rollout:
    """A rollout of tic-tac-toe turns: (episode, [(role, return) per turn])."""
    rows = [(episode, role, value) for episode, played in episodes for role, value in played]
    n = len(rows)
    return Rollout(
        prompts=["p"] * n,
        completions=["c"] * n,
        prompt_ids=[[1]] * n,
        completion_ids=[[2]] * n,
        rewards=[value for _, _, value in rows],
        groups=[("tictactoe", role) for _, role, _ in rows],
        extra={"episode": [episode for episode, _, _ in rows]},
    )


def test_role_advantages_by_hand() -> None:
    advantage = RoleAdvantage.create(enabled=True)
    # step 1: game a, X won after 3 turns (O played 2); game b, O won by X's forfeit on turn 1 (O never played)
    first = turns([("a", [("X", 1.0), ("O", -1.0), ("X", 1.0), ("O", -1.0), ("X", 1.0)]), ("b", [("X", -1.0)])])
    # baselines start at 0 and are read before the update: the advantage is the return
    assert advantage(first, context=ScriptedContext(str)) == [1.0, -1.0, 1.0, -1.0, 1.0, -1.0]
    # X brought two returns (a: +1, b: -1; a game counts once, not per turn): mean 0 -> b_X stays 0
    # O brought one (-1): b_O = 0.95 * 0 + 0.05 * -1 = -0.05
    assert advantage.rae.baselines.get(("tictactoe", "X")) == pytest.approx(0.0)
    assert advantage.rae.baselines.get(("tictactoe", "O")) == pytest.approx(-0.05)
    assert first.metrics["rae/baseline/tictactoe/O"] == pytest.approx(-0.05)
    # step 2: a draw: every turn's advantage is 0 - b of its role
    second = turns([("c", [("X", 0.0), ("O", 0.0), ("X", 0.0)])])
    assert advantage(second, context=ScriptedContext(str)) == pytest.approx([0.0, 0.05, 0.0])
    assert advantage.rae.baselines.get(("tictactoe", "O")) == pytest.approx(0.95 * -0.05)


def test_without_rae_the_advantage_is_the_return() -> None:
    advantage = RoleAdvantage(RoleConditionedAdvantage(RoleBaselines(values={("tictactoe", "X"): 0.5}), enabled=False))
    rollout = turns([("a", [("X", 1.0), ("O", -1.0), ("X", 1.0)])])
    assert advantage(rollout, context=ScriptedContext(str)) == [1.0, -1.0, 1.0]
    assert advantage.rae.baselines.get(("tictactoe", "X")) == pytest.approx(0.95 * 0.5 + 0.05)  # still tracked


def spiral_config(model: Path, out: Path, **over: object) -> TrainConfig:
    values: dict[str, object] = {
        "task": "spiral",
        "model": str(model),
        "train_steps": 2,
        "selfplay_games_per_step": 3,
        "max_completion_length": 6,
        "selfplay_eval_games": 2,
        "selfplay_eval_every": 1,
        "output_dir": out,
        "progress": False,
        "threads": 1,
        "save_steps": 1,
        "completions_interval": 1,
        "learning_rate": 1e-3,
    }
    values.update(over)
    return TrainConfig(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("game", "opponents", "roles"),
    [
        ("tictactoe", ("random", "minimax"), ("X", "O")),
        ("kuhn_poker", ("random", "equilibrium"), ("first", "second")),
    ],
)
def test_a_spiral_run_trains_evaluates_and_resumes(
    tiny_model_dir: Path, tmp_path: Path, game: str, opponents: tuple[str, str], roles: tuple[str, str]
) -> None:
    out = tmp_path / "run"
    printed = io.StringIO()
    summary = run(spiral_config(tiny_model_dir, out, game=game), console=Console(file=printed, width=200))
    assert summary.steps == 2 and summary.final_model is not None
    # the plain console's progress lines: the game's own numbers each step, each seat's wins at each evaluation
    lines = printed.getvalue().splitlines()
    number, rate = r"-?\d+\.\d+", r"\d+%"
    step_line = rf"step (\d)/2  return {number}  {roles[0]} wins {rate}  {roles[1]} wins {rate}  forfeits {rate}  "
    step_line += rf"tokens {number}  gen s {number}  optim s {number}"
    assert [m.group(1) for m in map(re.compile(step_line).fullmatch, lines) if m] == ["1", "2"], lines
    eval_line = re.compile(rf"win rate vs random at step (\d): {roles[0]} {rate}, {roles[1]} {rate}")
    assert [m.group(1) for m in map(eval_line.fullmatch, lines) if m] == ["0", "1", "2"], lines
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2]
    for key in ("selfplay/response_length", "selfplay/forfeit_rate", f"rae/baseline/{game}/{roles[0]}", "reward"):
        assert key in train[0], key
    evals = [r for r in rows if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 1, 2]  # before, every step, and after
    for opponent in opponents:
        for role in roles:
            point = evals[0]
            rates = [point[f"selfplay/eval/{opponent}/{role}/{k}"] for k in ("win", "draw", "loss")]
            assert sum(rates) == pytest.approx(1.0)
    assert (out / "selfplay_eval" / "step_00000.jsonl").exists()
    table = [json.loads(line) for line in (out / "completions" / "step_00002.jsonl").read_text().splitlines()]
    assert table and {"prompt", "completion", "role", "episode", "reward", "advantage"} <= set(table[0])
    saved = json.loads((out / "checkpoint-2" / "rae_baselines.json").read_text())
    assert {role for _, role, _ in saved["values"]} <= set(roles) and saved["values"]
    assert json.loads((out / "summary.json").read_text())["selfplay_evaluations"][-1]["step"] == 2

    resumed = run(
        spiral_config(tiny_model_dir, out, game=game, train_steps=3, resume="latest", skip_eval=True),
        console=Console(file=io.StringIO()),
    )
    assert resumed.steps == 3
    step3 = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()][-1]
    # the resumed run went on from the checkpoint's baselines: step 3's returns, one per game and role that
    # played, moved the saved values
    played = [json.loads(line) for line in (out / "completions" / "step_00003.jsonl").read_text().splitlines()]
    returns: dict[str, dict[str, float]] = {}
    for row in played:
        returns.setdefault(row["role"], {})[row["episode"]] = row["reward"]
    saved_values = {role: value for _, role, value in saved["values"]}
    assert step3["step"] == 3 and returns
    for role, by_game in returns.items():
        keep = 0.95 ** len(by_game)
        expected = keep * saved_values.get(role, 0.0) + (1 - keep) * sum(by_game.values()) / len(by_game)
        assert step3[f"rae/baseline/{game}/{role}"] == pytest.approx(expected)


def test_the_rae_flag_reaches_the_run() -> None:
    from codegym_trainer.cli import parse_config

    config = parse_config(["--task", "spiral", "--game", "kuhn_poker", "--no-rae", "--selfplay-games-per-step", "4"])
    assert (config.task, config.game, config.rae, config.selfplay_games_per_step) == ("spiral", "kuhn_poker", False, 4)
    assert not config.selfplay_think and parse_config(["--task", "spiral", "--selfplay-think"]).selfplay_think
