"""A task (one problem with its tests) and the adapter protocol that turns a dataset row into one."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

TaskKind = Literal["stdio", "call", "assert"]
KINDS: tuple[TaskKind, ...] = ("stdio", "call", "assert")


@dataclass(frozen=True)
class Task:
    """One problem: what a model is shown, and the tests that judge its program.

    ``tests`` are bodies of the sandbox's ``Test`` model: ``{"stdin", "expected_stdout"}`` for ``stdio``,
    ``{"call", "expected"}`` (with ``entry_point`` as the function) for ``call``, ``{"assert_code"}`` for
    ``assert``. The program sent to the sandbox is ``starter_code`` followed by the model's code.
    ``metadata`` may carry ``comparison`` (``exact``, ``whitespace``, ``float``) for stdio tests and
    ``call_comparison`` (``json``, ``python``) for call tests; the adapters take them from ``tasks.rules``.
    ``metadata["public_tests"]`` counts the first of ``tests`` that a model may see (a dataset's public tests,
    or the tests its prompt shows); the rest are hidden. Without it the task has no public/private split.
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
        """The tests a model may see (feedback on them leaks nothing hidden), or None: no public/private split."""
        count = self.metadata.get("public_tests")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            return None
        return self.tests[:count]

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
