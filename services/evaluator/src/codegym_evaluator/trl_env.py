"""A multi-turn code environment for TRL's ``GRPOTrainer(environment_factory=...)``, on a codegym sandbox.

    from codegym_evaluator.trl_env import CodeEnvironment, code_environment
    trainer = GRPOTrainer(model=..., train_dataset=..., environment_factory=CodeEnvironment)  # CODEGYM_SANDBOX_URL
    trainer = GRPOTrainer(..., environment_factory=code_environment("http://sandbox:8080", public_tests=2))

TRL builds a few environments and reuses them from a pool, calling ``reset(**row)`` before each rollout and
never closing them. So :meth:`CodeEnvironment.reset` deletes the previous rollout's interpreter session (best
effort: a session left behind ends by its idle TTL, ``session_ttl_s``), reads the row's tests, and returns the
public ones as text that TRL appends to the prompt. The interpreter of the new rollout is made on its first
``run_python``, so a rollout that never calls it costs no session.

Every public method but ``reset`` and ``get_reward`` is a tool; TRL builds its schema from the type hints and
the Google-style docstring, and awaits the ``async`` ones on its event loop (the synchronous ones would run
one rollout after another):

- ``run_python(code)``: a cell in the rollout's own session (``/v1/sessions``): state kept between calls,
  output cut to ``feedback_budget``, errors as tracebacks, a time-out said plainly. Calls of one turn, which
  TRL makes at once, run one after another in that one session.
- ``run_tests(code)``: the program on the public tests, stateless (``/v1/evaluate``), answered as
  :func:`~codegym_evaluator.feedback.test_feedback` writes it.
- ``submit(code)``: takes a program as the answer without running it.

:meth:`CodeEnvironment.get_reward` judges the last program given to ``run_tests`` or ``submit`` on all the row's
tests, hidden ones included, through the same path as :class:`~codegym_evaluator.trl_reward.CodeReward` (the
evaluator's ``Scorer``, native ``/v1/evaluate``, the row's comparison rule): 1.0 when all pass, else the share of
the tests passed that the model was not shown, in its prompt or by ``reset`` (``partial=True``: passed unshown tests
over all tests, so a table of the shown answers earns nothing from them, see ``credit``) or 0.0; 0.0 for a rollout
that gave no program; ``None`` where the sandbox failed, which TRL masks, and for a row whose prompt and shown tests
hold every test that judges it (``Task.shows_every_test``, the rule of every training front door: a CodeContests row
without private tests, a prompt that prints every assert), which a table of the shown answers would pass; ``reset``
logs a warning.
The reward is never judged in the model's session, so nothing a cell does there
reaches it; the hidden tests go to the sandbox only in ``/v1/evaluate`` requests, never into a session.

The tests of a row come from the columns ``trl_reward`` reads (``verification_info``, ``input_output``,
``tests``/``test_list``); which of them are shown is ``Task.visible_tests`` with ``public_tests``, the rule of
every front door (``trl_rows.split_row``): CodeContests rows (``public_tests``, ``private_tests``,
``generated_tests``) and LiveCodeBench rows (``public_test_cases``, ``private_test_cases``) show their own public
tests and hide the rest; other rows show their first ``public_tests``, always leaving one hidden.

Nothing here imports torch, transformers or TRL.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from codegym_sandbox.client import AsyncSession, SandboxError, SessionGone
from codegym_sandbox.models import Test
from pydantic import ValidationError

from .credit import earned, passes
from .extract import extract_code
from .feedback import cell_feedback, cut, ended_while_running, not_text, shown_tests, test_feedback
from .prompt_code import prompt_text
from .scoring import InvalidTask, Scorer, build_program, evaluate_body
from .tasks import PUBLIC_TESTS, Task
from .trl_rows import split_row

log = logging.getLogger("codegym.evaluator.trl_env")

URL_ENV = "CODEGYM_SANDBOX_URL"
TOKEN_ENV = "CODEGYM_SANDBOX_API_TOKEN"
DEFAULT_URL = "http://127.0.0.1:8080"

SANDBOX_FAILED = "The sandbox failed to run this (its failure, not your code's); try again."
# A session holds its memory from its rollout's first run_python to the environment's next reset, and sessions
# together may hold SESSIONS__MEMORY_SHARE of the sandbox's budget: at the server's 512 MiB a pool of 21
# environments fills the share of a 21 GiB budget. 256 MiB still imports numpy and multiplies 1000 x 1000
# matrices in a cell (at 128 MiB numpy does not import), and fits twice the rollouts.
SESSION_MEMORY_MB = 256

T = TypeVar("T")
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _env_loop() -> asyncio.AbstractEventLoop:
    """The event loop every environment's sandbox client runs on, in a daemon thread of its own. A client
    belongs to one loop, and the tools are awaited on TRL's loop, ``reset`` runs outside any, a script may
    run each call on a loop of its own: on this one, connections are kept between calls whatever the caller."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="codegym-trl-env", daemon=True).start()
        return _loop


async def _on_env_loop(coro: Coroutine[Any, Any, T]) -> T:
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, _env_loop()))


def _wait(coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
    return asyncio.run_coroutine_threadsafe(coro, _env_loop()).result(timeout_s)


@dataclass
class _Held:
    """What an environment holds: its client, the rollout's interpreter, made on its first run_python, and the
    lock its cells take (made on the environments' loop, where they run)."""

    scorer: Scorer
    session: AsyncSession | None = None
    lock: asyncio.Lock | None = None


async def _close_session(session: AsyncSession) -> None:
    try:
        await session.close()
    except SandboxError as exc:
        log.warning("could not delete session %s (its TTL ends it): %s", session.session_id, exc)


async def _release(held: _Held) -> None:
    if held.session is not None:
        await _close_session(held.session)
    await held.scorer.aclose()


def _schedule_release(held: _Held) -> None:
    """Give back what a gone environment held: its session and its client's connections, on their loop."""
    if _loop is not None and not _loop.is_closed():
        asyncio.run_coroutine_threadsafe(_release(held), _loop)


class CodeEnvironment:
    """One rollout's code environment at a time (see the module's docstring); reused across rollouts by TRL.

    Args:
        url: The sandbox server; default ``$CODEGYM_SANDBOX_URL``, else ``http://127.0.0.1:8080``.
        token: Its API token; default ``$CODEGYM_SANDBOX_API_TOKEN``.
        language: The language of rows that do not name one.
        public_tests: How many of a row's tests are shown and run by ``run_tests`` where the data has no split
            of its own, always leaving one hidden (``Task.visible_tests``); the reward uses all of them.
        partial: Reward the share of the tests passed that the model was not shown (``credit.earned``), not only
            1.0 for all.
        timeout_s: Wall-clock limit of each test's run.
        cell_timeout_s: Wall-clock limit of each ``run_python`` cell.
        session_ttl_s: Idle time after which the server ends a session left behind.
        session_memory_mb: Memory of each session in MiB, held for its life (None: the server's
            ``SESSIONS__MEMORY_MB``); the pool's sessions together must fit the sandbox's sessions' share.
        feedback_budget: Characters of each tool's answer, and of the public tests shown by ``reset``.
        retries: How often a failed request is sent again (with backoff) before it counts as the sandbox's failure.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        language: str = "python",
        public_tests: int = PUBLIC_TESTS,
        partial: bool = True,
        timeout_s: float = 10.0,
        cell_timeout_s: float = 10.0,
        session_ttl_s: float = 300.0,
        session_memory_mb: int | None = SESSION_MEMORY_MB,
        feedback_budget: int = 2000,
        retries: int = 3,
    ) -> None:
        self.url = (url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self.language = language
        self.public_tests = public_tests
        self.partial = partial
        self.timeout_s = timeout_s
        self.cell_timeout_s = cell_timeout_s
        self.session_ttl_s = session_ttl_s
        self.session_memory_mb = session_memory_mb
        self.feedback_budget = feedback_budget
        self.retries = retries
        self._task: Task | None = None  # the row's tests, all of them
        self._public: Task | None = None  # those shown and run by run_tests (None: none shown)
        self._program: str | None = None  # the answer: the last program given to run_tests or submit
        self._rewards: dict[str, float | None] = {}  # of this row's programs judged so far
        self._seen: list[bool] = []  # per test, whether the prompt or reset shows it (``Task.seen_tests``)
        # The client of every call, on the environments' loop (a reward asks for a fresh run of every program,
        # as CodeReward does: no result cache). Closed, with the session, once the environment is gone.
        scorer = Scorer(
            self.url,
            token=self.token,
            retries=self.retries,
            timeout_per_test=self.timeout_s,
            request_timeout_s=self.timeout_s * 4 + 60,
            cache=False,
        )
        # What the environment holds: given back once it is gone (TRL never closes one). The finalizer holds
        # them, never the environment.
        self._held = _Held(scorer)
        weakref.finalize(self, _schedule_release, self._held).atexit = False

    def reset(self, **row: Any) -> str | None:
        """Start a rollout on ``row`` (a dataset row's columns): end the previous rollout's session, read the
        row's tests, and give the public ones as text for the prompt (None when none are shown)."""
        session, self._held.session = self._held.session, None
        if session is not None:
            # Blocking, since TRL calls reset outside its loop, and brief: a server that does not answer in
            # time leaves the session to its TTL.
            try:
                _wait(_close_session(session), self.timeout_s + 5)
            except TimeoutError:
                log.warning("could not delete session %s in time (its TTL ends it)", session.session_id)
        task, visible = self._split(row)
        self._task = task
        # A row whose prompt and shown tests hold every judged test is paid for a table of the shown answers; of
        # the others, the shown tests earn no partial credit.
        self._seen = task.seen_tests(prompt_text(row.get("prompt")), self.public_tests)
        if all(self._seen):
            log.warning(
                "%s: the prompt and the tests shown show every test that judges it (a table of the shown answers"
                " would pass): its reward is None (masked)",
                task.task_id,
            )
        # The visible tests themselves, never a count of the task's: of one assert test they are a cut copy.
        self._public = replace(task, tests=visible) if visible else None
        self._program = None
        self._rewards = {}
        shown = self._shown(self._public) if self._public is not None else ""
        if not shown:
            return None
        return (
            "\n\nPublic tests (run your program on them with the run_tests tool; hidden tests also grade it):\n\n"
            + cut(shown, self.feedback_budget)
        )

    def _split(self, row: Mapping[str, Any]) -> tuple[Task, list[dict[str, Any]]]:
        """A row's task (all its tests, which judge the reward) and the tests a model may see
        (:meth:`Task.visible_tests`): a subclass whose rows name tasks of its own reads them here (the trainer's
        ``--tools``, by ``task_id``)."""
        return split_row(row, self.public_tests, self.language)

    async def run_python(self, code: str) -> str:
        """Run Python code in an interpreter of your own; variables, imports and functions persist between calls.

        Args:
            code: Python source, run like a notebook cell; the value of its last expression is shown.

        Returns:
            What the code printed, the value of its last expression, or its traceback.
        """
        if refused := not_text(code):
            return refused
        return await _on_env_loop(self._run_python(code))

    async def run_tests(self, code: str) -> str:
        """Run a complete program on the task's public tests and report each test's result.

        The program given here last (or to submit) is your answer: it is graded on all the task's tests,
        hidden ones included.

        Args:
            code: The whole program, as it would be submitted (a fenced code block is fine).

        Returns:
            Per test, passed or why not; for the first failing test its input, the expected and the actual output.
        """
        task, public = self._tests()
        if refused := not_text(code):
            return refused  # the answer given before stays the answer
        self._program = extract_code(code, task).code
        if public is None:
            return "This task shows no public tests; your program is kept as your answer."
        try:
            program = build_program(public, self._program)
            # Afresh, as the reward is: a cached answer would be another rollout's run of the same text.
            body = evaluate_body(public, [program], timeout_s=self.timeout_s, cache=self._held.scorer.cache)
            tests = [Test.model_validate(t) for t in public.tests]
        except (ValueError, ValidationError):
            return "The task's tests cannot be run by the sandbox; your program is kept as your answer."
        try:
            out = (await _on_env_loop(self._held.scorer.client.evaluate(body))).results[0]
        except SandboxError as exc:
            log.warning("run_tests: %s", exc)
            out = None
        return test_feedback(tests, out, budget=self.feedback_budget)

    async def submit(self, code: str) -> str:
        """Give your final program without running it; it is graded on all the task's tests, hidden ones included.

        Args:
            code: The whole program (a fenced code block is fine).

        Returns:
            A confirmation.
        """
        if refused := not_text(code):
            return refused
        self._program = extract_code(code, self._tests()[0]).code
        return "Your program is recorded as your answer."

    async def get_reward(self) -> float | None:
        """The answer judged on all the row's tests: 1.0, the share passed of the tests not shown (``partial``)
        or 0.0; 0.0 when no program was given; None when the sandbox failed, or the row shows every test that
        judges it."""
        task, _ = self._tests()
        program = self._program
        if all(self._seen):
            return None
        if program is None:
            return 0.0
        if program not in self._rewards:
            self._rewards[program] = await _on_env_loop(self._judge(task, program))
        return self._rewards[program]

    async def _judge(self, task: Task, program: str) -> float | None:
        try:
            score = (await self._held.scorer.score_group(task, [program], extract=False))[0]
        except UnicodeError:
            return 0.0  # a program no request can carry is the program's doing (tools refuse them: see not_text)
        except InvalidTask:
            return None  # tests the sandbox would refuse: masked, as CodeReward does
        if not score.judged or score.total == 0:
            return None
        return earned(passes(score), self._seen, partial=self.partial)

    async def _run_python(self, code: str) -> str:
        # TRL gathers a turn's tool calls: without the lock each call of one rollout would make a session of its
        # own (all but one left to their TTL, holding the sessions' memory share from every other rollout), and
        # a second cell at once in one session answers 409. So they run one after another in one session.
        if self._held.lock is None:
            self._held.lock = asyncio.Lock()
        async with self._held.lock:
            return await self._run_cell(code)

    async def _run_cell(self, code: str) -> str:
        note = ""
        try:
            session = await self._open_session()
            try:
                cell = await session.execute(code, timeout_s=self.cell_timeout_s)
            except SessionGone as gone:
                self._held.session = None
                if gone.ran:  # it ended as the cell ran: run again, the cell would have run twice
                    return cut(ended_while_running(gone.detail), self.feedback_budget)
                # It expired between calls (idle past its TTL): the cell never ran.
                note = "[The interpreter had ended (idle too long); this ran in a fresh one: earlier state is gone.]\n"
                cell = await (await self._open_session()).execute(code, timeout_s=self.cell_timeout_s)
        except SandboxError as exc:
            log.warning("run_python: %s", exc)
            return SANDBOX_FAILED
        if not cell.alive:
            self._held.session = None  # the server ended it; the next call makes a fresh one
        return note + cell_feedback(cell, budget=self.feedback_budget)

    async def _open_session(self) -> AsyncSession:
        if self._held.session is None:
            self._held.session = await self._held.scorer.client.session(
                "python",
                ttl_s=self.session_ttl_s,
                memory_mb=self.session_memory_mb,
                cell_timeout_s=self.cell_timeout_s,
            )
        return self._held.session

    def _tests(self) -> tuple[Task, Task | None]:
        if self._task is None:
            raise RuntimeError("reset(**row) gives the environment its task before any tool is called")
        return self._task, self._public

    def _shown(self, public: Task) -> str:
        try:
            tests = [Test.model_validate(t) for t in public.tests]
        except ValidationError:
            return ""
        return shown_tests(tests, function=public.entry_point, budget=self.feedback_budget)


def code_environment(url: str | None = None, **settings: Any) -> Callable[[], CodeEnvironment]:
    """A factory of :class:`CodeEnvironment` with ``settings`` (its keyword arguments), for TRL's
    ``environment_factory``."""
    return functools.partial(CodeEnvironment, url, **settings)
