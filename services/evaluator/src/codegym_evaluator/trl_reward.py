"""A code reward for TRL's GRPOTrainer that any TRL user can import: the tests come from the dataset's columns.

    from codegym_evaluator.trl_reward import CodeReward
    trainer = GRPOTrainer(model=..., reward_funcs=[CodeReward("http://127.0.0.1:8080")], train_dataset=...)

Nothing here imports the trainer (torch, transformers, trl): only the sandbox's client and output comparison and
the evaluator's scoring (the trainer's ``SandboxReward`` judges through the same ``Scorer.score_group``).
:class:`CodeReward` is a plain function object, :class:`AsyncCodeReward` its ``async`` form (TRL awaits coroutine
reward functions on its own loop). Both take TRL's arguments, ``(prompts, completions, **columns)``, and give one
float per completion: 1.0 when all its tests pass, else the share of its tests passed that its prompt does not write
out (``partial=True``, the default: passed unshown tests over all tests, so a table of the prompt's examples earns
nothing from them, see ``credit``; 0.0 with ``partial=False``); ``None`` when the sandbox itself failed, which TRL
masks instead of teaching the model that a right program was wrong. A row whose prompt shows every test that judges
it (``Task.shows_every_test``, the rule of every training front door: MBPP's prompt lists its asserts, a statement
may print every example) is ``None`` too, with a :class:`ShownTestsWarning`: a table of the shown answers would earn
it.

The tests of each row come from the first of these columns it has (the formats the common datasets use):

- ``verification_info`` (open-r1): ``{"language": ..., "test_cases": [{"input": ..., "output": ...}, ...]}``,
  stdin tests; with ``"fn_name"`` the inputs are argument lists and the outputs return values (calls);
- ``input_output`` (APPS, TACO): ``{"inputs": [...], "outputs": [...]}`` (a JSON string or a dict), stdin
  tests, or with ``"fn_name"`` calls (APPS wraps each expected value in a list; so is it read), or, where the
  row's ``starter_code`` column (or its prompt) holds a LeetCode-style ``class Solution``, asserts on the method,
  as ``APPSAdapter`` reads the row;
- ``tests`` or ``test_list`` (MBPP and others): assert statements (a list, or one string of code), or
  ``{"input": ..., "output": ...}`` dicts; ``test_imports`` (MBPP's sanitized split) and ``test_setup_code``
  run before the asserts when present, and a
  HumanEval-style ``check(candidate)`` is called on ``entry_point`` when that column is there.

Assert tests run with the prompt's own helpers (HumanEval's ``poly``, ``encode_cyclic``): the top-level
definitions of the row's prompt (TRL's ``prompts``: the text where it is Python, else its fenced code; of a
chat prompt, the last user message) that the tests use are put before them, when the row names its
``entry_point`` (the one definition of the prompt that is the program's to write), so a completion that
redefines a helper beside a wrong answer changes nothing the tests call (see ``tasks.prompt_helpers``).

A completion is a string (a base model's) or a chat whose last message is the answer (``messages``). Its
program is taken once its row is known, as the trainer's reward takes it (``extract_code`` with the row as a
task, in ``Scorer.score_group``): the fenced block that defines the row's ``entry_point`` (not a usage example
after it), else the last block in the row's language, sanitised where the row names its function. Where the
prompt is a Python stub of the entry point as a whole (HumanEval's), a completion that does not write the function
itself is its body and is judged after the stub, as a library task's program follows its starter code. Where the
prompt is text that ends in an open code fence (a base model's prompt, as ``prompts.base_prompt`` writes it), the
completion continues that block: it is judged up to the line that closes the fence, never on what follows it
(``prompts.continued_answer``, every route's reading).

Each row's tests compare by the rule of the dataset its columns come from (``tasks.rules``, the one table every
route and adapter reads): open-r1's and APPS's stdin tests token by token (a trailing space or a CRLF is no
error, as in their harnesses; APPS's numbers within np.allclose's tolerances, an integer exactly), APPS's call
tests with Python's ``==``.

The language is the row's ``language`` column (or ``verification_info``'s), else ``language=``. The reward
talks to codegym's native API (``api="native"``: all completions of a row, a GRPO group, in one
``/v1/evaluate`` request) or to any SandboxFusion server (``api="fusion"``).

With ``api="fusion"`` the reward first asks the server, once, whether it is codegym (its ``/v1/languages``);
while the answer cannot tell (the server is down, busy, or failing), every reward of the call is ``None``, never
judged the weaker way below, and the next call asks again.
A codegym server is judged through its native ``/v1/evaluate`` all the same: its checker runs assert tests
apart from the program, so that no exit, hook or patched builtin of the program's earns a pass, and its
verdicts are taken as they are, never derived again here. Any other SandboxFusion server only runs a program:
the reward sends one ``/run_code`` per completion and test (``concurrency`` at a time), compares stdin/stdout
and call tests here as codegym's judge does (``codegym_sandbox.judging.compare``, by the row's rule), and for
assert tests appends, after the asserts, a line that prints a fresh random nonce, counting a pass only when
the run succeeded and its output ends with that line. That is the most such a server allows, and it is not a
guarantee: the program and the tests run in one interpreter, in one file, so a program that reads its own
source (``__file__``, its frames' code) finds the nonce, prints it and exits before the asserts. The nonce
stops the exits that do not look for it (``sys.exit(0)``, ``os._exit(0)``, an ``atexit`` hook, a thread); a
reward that must hold against a program trying to cheat needs codegym. The reward warns
(:class:`UnverifiedServerWarning`) once when it finds such a server.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import httpx
from codegym_sandbox.client import (
    AsyncSandboxClient,
    SandboxError,
    SandboxProtocolError,
    SandboxRejected,
)
from codegym_sandbox.judging.compare import outputs_match, python_match, values_match
from codegym_sandbox.models import CallComparison

from .credit import earned, passes
from .extract import extract_code
from .messages import completion_text
from .prompt_code import prompt_text
from .prompts import continued_answer
from .scoring import InvalidTask, Scorer, build_program
from .tasks import Task
from .trl_rows import RowTests, row_tests

Api = Literal["native", "fusion"]
Server = Literal["codegym", "fusion"]


class UnverifiedServerWarning(UserWarning):
    """The reward judges on a SandboxFusion server that is not codegym, where a program can forge a pass."""


class ShownTestsWarning(UserWarning):
    """A row's prompt shows every test that judges it (``Task.shows_every_test``): its reward is None (masked),
    since a table of the shown answers would earn it as well as a solution."""


def _prompt(prompts: Any, i: int) -> Any:
    """TRL's prompt of completion ``i``, or None where the call gave none."""
    if isinstance(prompts, Sequence) and not isinstance(prompts, str) and i < len(prompts):
        return prompts[i]
    return None


class _Base:
    __name__ = "code_reward"  # TRL logs each reward under its function's name

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        *,
        api: Api = "native",
        language: str = "python",
        timeout_s: float = 10.0,
        partial: bool = True,
        token: str | None = None,
        concurrency: int = 32,
        retries: int = 3,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if api not in ("native", "fusion"):
            raise ValueError(f"api must be 'native' or 'fusion', not {api!r}")
        self.url = url.rstrip("/")
        self.api = api
        self.language = language
        self.timeout_s = timeout_s
        self.partial = partial
        self.token = token
        self.concurrency = concurrency
        self.retries = retries
        self.transport = transport
        self._server: Server | None = "codegym" if api == "native" else None  # found on first use

    def _scorer(self) -> Scorer:
        """The scorer of one call: its own client, since each call may run on an event loop of its own. No
        result cache: a reward asks for a fresh run of every program."""
        return Scorer(
            self.url,
            token=self.token,
            concurrency=self.concurrency,
            retries=self.retries,
            timeout_per_test=self.timeout_s,
            transport=self.transport,
            request_timeout_s=self.timeout_s * 4 + 60,
            cache=False,
        )

    async def _server_kind(self, client: AsyncSandboxClient) -> Server | None:
        """Whether the server is codegym (judge natively) or another SandboxFusion server, found once; None
        while it cannot be told (no answer, or a 429 or 5xx that says nothing of what the server is). Only an
        answer that shows another server (404, 405, a body that is not codegym's) makes it ``"fusion"``: taken on
        no evidence, the weaker judge would run on a codegym server too, where a program could forge a pass."""
        if self._server is None:
            try:
                codegym = bool(await client.languages())
            except SandboxProtocolError:  # a server that answers something else there
                codegym = False
            except SandboxRejected as exc:
                if exc.status not in (404, 405):  # 404, 405: a server that has no such route
                    return None
                codegym = False
            except SandboxError:
                return None
            if codegym:
                self._server = "codegym"
            else:
                self._server = "fusion"
                warnings.warn(
                    f"{self.url} is not a codegym sandbox: assert tests there pass when the run prints a nonce "
                    "after them, which a program that reads its own source can forge (see CodeReward)",
                    UnverifiedServerWarning,
                    stacklevel=2,
                )
        return self._server

    def _groups(
        self, prompts: Any, completions: Sequence[Any], columns: Mapping[str, Any]
    ) -> dict[tuple[str, str], tuple[RowTests, list[int]]]:
        """Completions that share their tests and their prompt (a GRPO group shares its prompt's row), in one group
        each: two rows with the same tests but prompts that show different tests are two groups."""
        groups: dict[tuple[str, str], tuple[RowTests, list[int]]] = {}
        for i in range(len(completions)):
            prompt = _prompt(prompts, i)
            row = row_tests(columns, i, self.language, prompt)
            groups.setdefault((row.key(), prompt_text(prompt)), (row, []))[1].append(i)
        return groups

    def _fusion_program(
        self, code: str, test: Mapping[str, Any], row: RowTests, nonce: str = ""
    ) -> tuple[str, str | None]:
        """A test as one ``/run_code`` program and its stdin; an assert test prints ``nonce`` after its asserts."""
        if "assert_code" in test:
            return f"{code}\n\n{test['assert_code']}\n\nprint('\\n' + {nonce!r}, flush=True)\n", None
        if "call" in test:
            call = f"{row.function}(*{test['call']!r})"  # JSON values as Python literals
            return f"{code}\n\nimport json as _json\nprint(_json.dumps({call}))\n", None
        return code, test["stdin"]

    def _fusion_passed(
        self, answer: Mapping[str, Any], test: Mapping[str, Any], row: RowTests, nonce: str = ""
    ) -> bool | None:
        """Whether a ``/run_code`` answer passes ``test`` of ``row`` (an assert test: the run printed ``nonce``
        last, so it got past the asserts); None for a sandbox error. Outputs compare as codegym's judge compares
        them, by the row's rule."""
        if answer.get("status") == "SandboxError":
            return None
        run = answer.get("run_result") or {}
        if answer.get("status") != "Success" or run.get("status") != "Finished":
            return False
        stdout = str(run.get("stdout") or "")
        if "assert_code" in test:
            return len(nonce) >= 32 and stdout.endswith(f"\n{nonce}\n")
        rule = row.rule  # the row's dataset's, as codegym's judge takes it (``tasks.rules``)
        if "call" in test:
            try:
                value = json.loads(stdout)
            except (ValueError, RecursionError):  # no JSON, a number past int's digits, nesting past the stack
                return False
            if rule.call_comparison is not CallComparison.JSON:  # JSON holds no tuple: the value is a list already
                return python_match(value, test["expected"])
            return values_match(value, test["expected"])
        return outputs_match(stdout, str(test["expected_stdout"]), rule.comparison, **rule.tolerances())


class CodeReward(_Base):
    """TRL reward function: ``reward(prompts, completions, **columns) -> list[float | None]``.

    ``api="fusion"`` on a server that is not codegym cannot keep a program that reads its own source from
    forging an assert test's pass (see the module's docstring); ``transport`` lets tests reach a server
    in-process.
    """

    def __call__(self, prompts: Any = None, completions: Sequence[Any] = (), **columns: Any) -> list[float | None]:
        return asyncio.run(AsyncCodeReward._score_all(self, prompts, completions, columns))


class AsyncCodeReward(_Base):
    """The same reward as a coroutine function, for TRL's async reward functions (or any event loop)."""

    async def __call__(
        self, prompts: Any = None, completions: Sequence[Any] = (), **columns: Any
    ) -> list[float | None]:
        return await self._score_all(self, prompts, completions, columns)

    @staticmethod
    async def _score_all(
        reward: _Base, prompts: Any, completions: Sequence[Any], columns: Mapping[str, Any]
    ) -> list[float | None]:
        # A completion of a prompt that ends in an open code fence (a base model's) is the block it continues.
        texts = [continued_answer(_prompt(prompts, i), completion_text(c)) for i, c in enumerate(completions)]
        rewards: list[float | None] = [None] * len(texts)
        limit = asyncio.Semaphore(reward.concurrency)
        async with reward._scorer() as scorer:
            # Each completion's program is extracted once its row is known, by the scorer's rule (the block that
            # defines the entry point, the sanitiser), as the trainer's reward extracts it.

            async def native(row: RowTests, task: Task, seen: list[bool], members: list[int]) -> None:
                try:
                    scores = await scorer.score_group(task, [row.answer(texts[i]) for i in members])
                except InvalidTask:
                    return  # tests the sandbox would refuse: None (masked), as for any request it refuses
                for i, score in zip(members, scores, strict=True):
                    if score.judged:
                        rewards[i] = earned(passes(score), seen, partial=reward.partial)

            async def fusion_one(i: int, row: RowTests, task: Task, test: Mapping[str, Any]) -> bool | None:
                nonce = secrets.token_hex(16)  # a new one for every run: no run's output tells another's
                code = build_program(task, extract_code(row.answer(texts[i]), task, which=scorer.which).code)
                program, stdin = reward._fusion_program(code, test, row, nonce)
                body = {
                    "code": program,
                    "language": row.language,
                    "stdin": stdin,
                    "run_timeout": reward.timeout_s,
                    "compile_timeout": reward.timeout_s,
                }
                async with limit:
                    try:
                        answer = await scorer.client.run_code(body)
                    except SandboxError:
                        return None
                return reward._fusion_passed(answer.model_dump(mode="json"), test, row, nonce)

            async def fusion(row: RowTests, task: Task, seen: list[bool], members: list[int]) -> None:
                for i in members:
                    outcomes = await asyncio.gather(*(fusion_one(i, row, task, t) for t in row.tests))
                    if all(o is not None for o in outcomes):
                        rewards[i] = earned([bool(o) for o in outcomes], seen, partial=reward.partial)

            kind = await reward._server_kind(scorer.client)
            if kind is None:
                return rewards  # all None (masked, as for any sandbox failure); the next call asks again
            run = native if kind == "codegym" else fusion
            judged, masked = [], []
            for row, members in reward._groups(prompts, texts, columns).values():
                try:
                    task = row.task(f"row {members[0]}")
                except ValueError:
                    continue  # a row without tests: None (masked), as a request the sandbox refuses
                # What the prompt shows: every test (masked), or those partial credit leaves out (``credit``).
                seen = task.seen_tests(prompt_text(_prompt(prompts, members[0])))
                if all(seen):
                    masked.append(members[0])
                    continue
                judged.append(run(row, task, seen, members))
            await asyncio.gather(*judged)
            # Told once every row is judged: a warning made an error (as tests make them) leaves no row unawaited.
            for first in masked:
                warnings.warn(
                    f"row {first}: its prompt shows every test that judges it, which a table of the shown "
                    "answers would pass as well as a solution; its reward is None (masked). Show fewer "
                    "tests in the prompt, or give the row hidden ones",
                    ShownTestsWarning,
                    stacklevel=3,
                )
        return rewards
