"""Code repair on the trainer's seam: answer, read the public tests' feedback, answer again; one sample per row.

Each step, :class:`CodeRepairRollout`:

1. asks the policy for an answer to every row's prompt (GRPO's groups, as ``code_rollout`` does);
2. judges each answer on its task's public tests (a stateless ``/v1/evaluate`` through the sandbox client);
3. for each answer that fails them, appends the feedback (``codegym_evaluator.feedback.test_feedback``) as the
   next user message, in the policy's chat template, and continues generating from the exact tokens so far;
   an answer that passes is never asked again; up to ``max_turns`` answers in all;
4. rewards the final answer on all the task's tests (``rewards.schemes.tests_reward``; partial credit only on
   the tests neither the prompt nor the feedback showed), times ``turn_discount ** (turns - 1)`` when it is
   positive.

A sample is one conversation: its completion is answer, feedback, answer...; its ``completion_mask`` is 1 on
the policy's tokens and 0 on the feedback's, so only the policy's own tokens train. Public tests: the task's
``Task.visible_tests(public_tests)``, the rule every front door shares (its dataset's public tests where it has a
split: CodeContests' and LiveCodeBench's public cases, the tests MBPP's prompt shows; else its first
``public_tests`` tests, always leaving one hidden when it has two or more). The run's tasks leave out any whose
prompt prints every test the feedback does not show (``training_tasks``, ``Task.for_training(public_tests)``).
An answer whose task shows no test is not asked again.
The sandbox is reached the seam's one way: a ``Scorer`` from ``context.sandbox`` (the run's ``RunSandbox``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from codegym_evaluator.extract import extract_code
from codegym_evaluator.feedback import test_feedback
from codegym_evaluator.prompts import continued_answer, repair_request
from codegym_evaluator.scoring import Score, Scorer, build_program, evaluate_body
from codegym_evaluator.tasks import PUBLIC_TESTS, Task
from codegym_sandbox.client import SandboxError
from codegym_sandbox.models import ProgramOut, Test
from codegym_sandbox.verdicts import Verdict

from ..rewards.sandbox_reward import answer_text
from ..rewards.schemes import tests_reward
from ..rollout import Rollout, TrainerContext, joined_text
from ..sandbox import RunSandbox
from .metrics import repair_metrics


def public_task(task: Task, public_tests: int) -> Task:
    """``task`` with only the tests a model may see (``Task.visible_tests``); ``ValueError`` where it sees none."""
    return replace(task, tests=task.visible_tests(public_tests))


def feedback_message(task: Task, tests: Sequence[dict[str, Any]], out: ProgramOut | None, budget: int) -> str:
    """The next user message: what the public tests said, and the request to fix the program, worded as the
    evaluator's ``--turns`` asks it (``prompts.repair_request``): a model is evaluated on what it trained on."""
    return repair_request(task, test_feedback([Test.model_validate(t) for t in tests], out, budget=budget))


@dataclass
class _Conversation:
    """One row's conversation so far: the prompt's ids, and the completion's ids, mask, texts and results."""

    prompt: Any
    task: Task
    prompt_ids: list[int]
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    public_passed: list[int] = field(default_factory=list)  # public tests passed after each turn
    public_total: int = 0
    open: bool = True  # asked again when it fails its public tests

    def answered(self, ids: Sequence[int], text: str, logprobs: Sequence[float] | None) -> None:
        self.ids += ids
        self.mask += [1] * len(ids)
        self.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        self.messages.append({"role": "assistant", "content": text})

    def told(self, ids: Sequence[int], text: str) -> None:
        self.ids += ids
        self.mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.messages.append({"role": "user", "content": text})

    @property
    def answer(self) -> str:
        """The last answer as it is judged: the first continues the prompt (a base model's prompt ends in an
        open fence, whose block it completes: ``prompts.continued_answer``); a later one follows the feedback."""
        text = self.messages[-1]["content"]
        return continued_answer(self.prompt, text) if len(self.messages) == 1 else text

    @property
    def turns(self) -> int:
        return len(self.public_passed)


@dataclass
class CodeRepairRollout:
    """The seam's rollout function of ``--task code-repair`` (see the module's docstring).

    ``tasks`` by ``task_id`` (the dataset's column); ``tokenizer`` is the policy's (its chat template formats
    the feedback turns); ``chat`` whether prompts are chat messages. Its sandbox is the context's.
    """

    tasks: Mapping[str, Task]
    tokenizer: Any
    chat: bool
    max_turns: int = 2
    turn_discount: float = 1.0
    public_tests: int = PUBLIC_TESTS
    partial_credit: bool = False
    feedback_budget: int = 2000
    last: list[_Conversation] = field(default_factory=list)  # the last step's, for a test or a reader
    _sampled: bool = field(default=True, repr=False)

    def __post_init__(self) -> None:
        if self.max_turns < 1 or self.public_tests < 0:
            raise ValueError("code repair needs at least one turn, and public_tests counts tests (0 or more)")
        if not 0.0 < self.turn_discount <= 1.0:
            raise ValueError("the turn discount lies in (0, 1]")

    def __call__(self, context: TrainerContext, inputs: list[dict[str, Any]]) -> Rollout:
        prompts = [row["prompt"] for row in inputs]
        first = context.generate(prompts)
        self._sampled = True
        talks = [
            _Conversation(p, self.tasks[row["task_id"]], list(ids))
            for p, row, ids in zip(prompts, inputs, first.prompt_ids, strict=True)
        ]
        for i, talk in enumerate(talks):
            logprobs = first.logprobs[i] if first.logprobs is not None else None
            talk.answered(first.completion_ids[i], first.texts[i], logprobs)
        for turn in range(1, self.max_turns + 1):
            outs = asyncio.run(self._judge_public(context.sandbox, talks))
            for talk, (passed, total, out) in zip(talks, outs, strict=True):
                if talk.open:
                    talk.public_passed.append(passed)
                    talk.public_total = total
                    # a right answer, or one the sandbox could not judge, is not asked again
                    talk.open = out is not None and out.verdict is not Verdict.SE and passed < total
            again = [t for t in talks if t.open] if turn < self.max_turns else []
            # every process generates in the same rounds (a collective): one with nothing to ask sends a filler
            if not context.any_process(bool(again)):
                break
            self._ask_again(context, again, outs, talks)
        for talk in talks:
            talk.open = False
        scores = asyncio.run(self._judge_all(context.sandbox, talks))
        self.last = talks
        # the sampler's logprobs (vLLM) for the loss's correction, where every turn's generation reported them
        return self._rollout(context, talks, scores, sampled=first.logprobs is not None and self._sampled)

    def _ask_again(
        self,
        context: TrainerContext,
        again: list[_Conversation],
        outs: list[tuple[int, int, ProgramOut | None]],
        talks: list[_Conversation],
    ) -> None:
        sequences = []
        for talk in again:
            out = outs[talks.index(talk)][2]
            text = feedback_message(talk.task, talk.task.visible_tests(self.public_tests), out, self.feedback_budget)
            talk.told(self._feedback_ids(talk, text), text)
            sequences.append(talk.prompt_ids + talk.ids)
        generation = context.generate_ids(sequences or [talks[0].prompt_ids])
        self._sampled = self._sampled and generation.logprobs is not None
        for i, talk in enumerate(again):
            logprobs = generation.logprobs[i] if generation.logprobs is not None else None
            talk.answered(generation.completion_ids[i], generation.texts[i], logprobs)

    def _feedback_ids(self, talk: _Conversation, text: str) -> list[int]:
        """The tokens between the policy's last answer and its next: the end of its turn where it did not end
        it (a truncated answer), the feedback as a user message, and the start of the next answer."""
        tok = self.tokenizer
        eos = tok.eos_token_id
        closing = [] if talk.ids and talk.ids[-1] == eos else [eos]
        if not self.chat:
            return closing + list(tok(f"\n\n{text}\n\n", add_special_tokens=False)["input_ids"])
        # as TRL does for a tool result: the template's rendering of a dummy turn with and without the message
        dummy = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
        prefix = list(tok.apply_chat_template(dummy, tokenize=True, return_dict=False))
        full = list(
            tok.apply_chat_template(
                [*dummy, {"role": "user", "content": text}],
                tokenize=True,
                add_generation_prompt=True,
                return_dict=False,
            )
        )
        ends = [i for i, t in enumerate(prefix) if t == eos]
        if ends:  # the policy's answer ends at its EOS; what the template writes after that is the feedback's
            prefix = prefix[: ends[-1] + 1]
        if full[: len(prefix)] != prefix:
            raise ValueError("the chat template does not render a conversation as a prefix of its continuation")
        return closing + full[len(prefix) :]

    async def _judge_public(
        self, sandbox: RunSandbox, talks: list[_Conversation]
    ) -> list[tuple[int, int, ProgramOut | None]]:
        async with sandbox.scorer() as scorer:
            return list(await asyncio.gather(*(self._public(scorer, t) for t in talks)))

    async def _public(self, scorer: Scorer, talk: _Conversation) -> tuple[int, int, ProgramOut | None]:
        visible = talk.task.visible_tests(self.public_tests)
        if not talk.open or not visible:  # a task that shows no test gives no feedback: the answer stands
            return 0, len(visible), None
        task = replace(talk.task, tests=visible)
        program = build_program(task, extract_code(talk.answer, task, which=scorer.which).code)
        body = evaluate_body(task, [program], timeout_s=scorer.timeout_per_test, cache=scorer.cache)
        try:
            out = (await scorer.client.evaluate(body)).results[0]
        except SandboxError:
            return 0, len(task.tests), None
        return out.passed, len(task.tests), out

    async def _judge_all(self, sandbox: RunSandbox, talks: list[_Conversation]) -> list[Score]:
        async with sandbox.scorer() as scorer:
            groups = await asyncio.gather(*(scorer.score_group(t.task, [answer_text(t.answer)]) for t in talks))
        return [g[0] for g in groups]

    def _reward(self, score: Score, task: Task, turns: int) -> float | None:
        # the tests the prompt and the feedback showed earn no partial credit (a table of them would)
        seen = task.seen_tests(public_tests=self.public_tests)
        reward = tests_reward(score, seen=seen, partial_credit=self.partial_credit)
        if reward is not None and reward > 0:
            reward *= self.turn_discount ** (turns - 1)
        return reward

    def _rollout(
        self, context: TrainerContext, talks: list[_Conversation], scores: list[Score], *, sampled: bool
    ) -> Rollout:
        rewards = [self._reward(s, t.task, t.turns) for s, t in zip(scores, talks, strict=True)]
        offset = context.process_index * len(talks)
        return Rollout(
            prompts=[t.prompt for t in talks],
            completions=[list(t.messages) if self.chat else joined_text(t.messages) for t in talks],
            prompt_ids=[t.prompt_ids for t in talks],
            completion_ids=[t.ids for t in talks],
            completion_mask=[t.mask for t in talks],
            logprobs=[t.logprobs for t in talks] if sampled else None,
            rewards=rewards,
            reward_parts={"code_repair": rewards},
            groups=[(offset + i) // context.group_size for i in range(len(talks))],
            extra={
                "verdict": [str(s.verdict) for s in scores],
                "tests": [f"{s.passed}/{s.total}" for s in scores],
                "turns": [t.turns for t in talks],
            },
            metrics=repair_metrics(
                [t.public_passed for t in talks], [t.public_total for t in talks], scores, self.max_turns
            ),
        )
