"""A task (one problem with its tests) and the adapter protocol that turns a dataset row into one."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol

from .shown_asserts import first_asserts
from .shown_tests import same_test, written_out

TaskKind = Literal["stdio", "call", "assert"]
KINDS: tuple[TaskKind, ...] = ("stdio", "call", "assert")
PUBLIC_TESTS = 1
"""The default of ``public_tests`` (:meth:`Task.visible_tests`): the tests a model may see of a task whose
dataset has no public/private split. One, as LiveCodeBench's self-repair shows one failing test."""


@dataclass(frozen=True)
class Task:
    """One problem: what a model is shown, and the tests that judge its program.

    ``tests`` are bodies of the sandbox's ``Test`` model: ``{"stdin", "expected_stdout"}`` for ``stdio``,
    ``{"call", "expected"}`` (with ``entry_point`` as the function) for ``call``, ``{"assert_code"}`` for
    ``assert``. The program sent to the sandbox is ``starter_code`` followed by the model's code.
    ``metadata`` may carry ``comparison`` (``exact``, ``whitespace``, ``float``) for stdio tests and
    ``call_comparison`` (``json``, ``python``, ``apps``) for call tests, and a ``float`` comparison's ``rel_tol`` and
    ``abs_tol``; the adapters take them from ``tasks.rules``.
    ``metadata["public_tests"]`` counts the first of ``tests`` that a model may see (a dataset's public tests,
    or the tests its prompt shows; 0: none); the rest are hidden. Without it the task has no public/private
    split, and :meth:`visible_tests` decides.
    """

    task_id: str
    prompt: str
    kind: TaskKind
    tests: list[dict[str, Any]]
    entry_point: str | None = None
    starter_code: str = ""
    language: str = "python"
    difficulty: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"task {self.task_id!r}: kind must be one of {KINDS}, not {self.kind!r}")
        if not self.tests:
            raise ValueError(f"task {self.task_id!r} has no tests")
        if self.kind == "call" and not self.entry_point:
            raise ValueError(f"task {self.task_id!r}: call tests need an entry_point")

    @property
    def public_tests(self) -> list[dict[str, Any]] | None:
        """The dataset's public tests (feedback on them leaks nothing hidden; empty where it marks none), or None:
        the task has no public/private split."""
        count = self.metadata.get("public_tests")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            return None
        return self.tests[:count]

    def visible_tests(self, public_tests: int = PUBLIC_TESTS) -> list[dict[str, Any]]:
        """The tests a model may see: shown in a prompt, run for its feedback. The one rule of every front door
        that shows tests (``codegym-eval --turns``, ``codegym-train --task code-repair``, TRL's
        ``CodeEnvironment``), whose setting ``public_tests`` is the count here.

        A dataset's own public tests where it splits them from hidden ones (:attr:`public_tests`), however many.
        Else the first ``public_tests`` of the tests, which also judge the answer, always leaving at least one
        hidden (a repair that saw every test could fit them all, and be paid for it): a task with one test shows
        none of it, but where it is one assert test (HumanEval's ``check``) that holds more asserts than
        ``public_tests``, its first ``public_tests`` asserts (``shown_asserts``).
        ``public_tests=0`` shows none of a task without a split. The tests left hidden may still be printed by the
        prompt (its examples): a training door asks :meth:`for_training` with the same ``public_tests``, which
        counts both. Take the visible tests from here, never a count of ``tests``: the cut copy of one assert test
        is not the task's own test. ``ValueError`` for a negative count.

        >>> t = Task("t", "", "stdio", [{"stdin": str(i), "expected_stdout": ""} for i in range(3)])
        >>> len(t.visible_tests(1)), len(t.visible_tests(5)), len(t.visible_tests(0))
        (1, 2, 0)
        """
        seen = self._seen(public_tests)
        if self._cut():
            shown = first_asserts(str(self.tests[0].get("assert_code", "")), public_tests)
            return [] if shown is None else [{**self.tests[0], "assert_code": shown}]
        return self.tests[:seen]

    def _cut(self) -> bool:
        """Whether :meth:`visible_tests` shows a cut copy of the task's one test (its first asserts), not tests."""
        return self.public_tests is None and len(self.tests) == 1

    def _seen(self, public_tests: int) -> int:
        """How many of the first tests :meth:`visible_tests` shows whole (a cut copy of one assert test is none)."""
        if public_tests < 0:
            raise ValueError(f"public_tests counts tests, so it cannot be {public_tests}")
        marked = self.public_tests
        if marked is not None:
            return len(marked)
        return 0 if len(self.tests) == 1 else min(public_tests, len(self.tests) - 1)

    def seen_tests(self, prompt: str | None = None, public_tests: int = 0) -> list[bool]:
        """Per test, whether a model shown ``prompt`` (the task's own by default) and the task's visible tests
        (:meth:`visible_tests` with ``public_tests``: its dataset's public tests where it marks them) sees it: it is
        one of those or the same test as one (``shown_tests.same_test``: a hidden copy of a public test, its input
        and expected output alike), or written out in the prompt (an example: a stdin test's input and output, a
        call's arguments and value, each assert of an assert test as written or as an example of its call;
        ``tasks.shown_tests``); of a task's one assert test that :meth:`visible_tests` cuts, each assert is one it
        shows, the same as one, or written out. Seen is what a test asks, never where it stands. A table of the
        seen tests' answers passes them as well as a solution, so no reward pays for them alone:
        :meth:`shows_every_test` masks a task all of whose tests are seen, and partial credit counts the others
        only (``credit.earned``).

        >>> t = Task("t", "", "stdio", [{"stdin": i, "expected_stdout": i} for i in ("1", "2", "1 ")])
        >>> t.seen_tests(public_tests=1)
        [True, False, True]
        """
        seen = self._seen(public_tests)
        cut = public_tests if self._cut() and self.visible_tests(public_tests) else 0
        text = self.prompt if prompt is None else prompt
        shown = {same_test(test) for test in self.tests[:seen]}
        return [
            i < seen or (bool(shown) and same_test(test) in shown) or written_out(test, text, self.entry_point, cut)
            for i, test in enumerate(self.tests)
        ]

    def shows_every_test(self, prompt: str | None = None, public_tests: int = 0) -> bool:
        """Whether a model shown ``prompt`` and the visible tests of ``public_tests`` sees every test that judges
        the task (:meth:`seen_tests`). A reward on such a task pays a table of the answers as well as a solution.
        The one rule of every training front door: the trainer's tasks (:meth:`for_training`), TRL's
        ``CodeReward`` and ``CodeEnvironment``."""
        return all(self.seen_tests(prompt, public_tests))

    def for_training(self, public_tests: int = 0) -> Task | None:
        """The task as a training prompt may show it, to a door that also shows :meth:`visible_tests` with
        ``public_tests`` (code repair's feedback; 0: a door that shows no test), or None where it cannot be one.

        A reward that judges only tests its prompt and feedback show pays a table of their answers as well as a
        solution (an MBPP prompt lists every assert that judges it; a CodeContests row without private tests is
        judged on the examples its statement prints; a statement that prints every test but the first, which a
        repair's feedback then shows). So a task that shows every judged test (:meth:`shows_every_test` with
        ``public_tests``) trains on the prompt its dataset gives for training (``metadata["training_prompt"]``,
        showing ``metadata["training_public_tests"]`` of them) where that prompt shows fewer, and else it is no
        training task."""
        if not self.shows_every_test(public_tests=public_tests):
            return self
        prompt, public = self.metadata.get("training_prompt"), self.metadata.get("training_public_tests")
        if not isinstance(prompt, str) or not isinstance(public, int) or not 0 <= public < len(self.tests):
            return None
        trained = replace(self, prompt=prompt, metadata={**self.metadata, "public_tests": public})
        return None if trained.shows_every_test(public_tests=public_tests) else trained

    def to_dict(self) -> dict[str, Any]:
        """The task in codegym's JSONL task format."""
        return asdict(self)

    def __hash__(self) -> int:
        return hash(self.task_id)


class TestAdapter(Protocol):
    """Turns rows of one dataset into tasks (``extract_tests`` and ``format_problem`` as in earlier systems)."""

    def extract_tests(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        """The row's tests as bodies of the sandbox's ``Test`` model."""
        ...

    def format_problem(self, sample: dict[str, Any]) -> str:
        """The problem statement as shown to a model."""
        ...

    def to_task(self, sample: dict[str, Any], index: int) -> Task | None:
        """The row as a task; None for a row that cannot be judged (no tests), which loaders skip."""
        ...
