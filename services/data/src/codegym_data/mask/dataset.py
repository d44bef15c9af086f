"""``CodeMaskDataset``: fill-in-the-middle rows cut out of reference solutions, one span masked in each.

For every function of a row's reference solution, ``probability`` decides whether it is masked (one draw per
function). If it is, ``spans_per_function`` of its candidate spans (``spans``) are drawn without replacement,
each with a chance proportional to its score: the weighted sum, over the chosen ``metrics``, of the span's
value divided by the highest value among the function's candidates (so every metric weighs in the same range,
whatever its scale; when every score is 0 the draw is uniform). Spans below a ``minimum`` (``cyclomatic=2``:
only spans with a decision) or longer than ``max_lines`` are not candidates.

Each masked span is one ``MaskRow``: the program's text before the span (``prefix``), the span (``middle``)
and after it (``suffix``), with what judges a fill: the row's tests, entry point and starter code
(``verify`` reassembles and judges). The draws of a function depend only on the seed, the row's id and the
function's name, not on what else is in the dataset.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from codegym_evaluator.tasks import Task
from codegym_evaluator.tasks.rules import JUDGE_KEYS

from .. import solutions
from ..transform import row_rng
from .metrics import METRICS
from .spans import FunctionSpans, Span, function_spans, split_lines


class UnknownMetric(ValueError):
    """A metric name that is not one of ``METRICS``, or a malformed ``name=value`` list."""


def parse_metric_values(spec: str | Mapping[str, float] | Sequence[str], default: float = 1.0) -> dict[str, float]:
    """``"cyclomatic=2,lines"`` (or a mapping, or a list of names) as ``{name: value}``; a bare name gets
    ``default``."""
    if isinstance(spec, Mapping):
        items = [(str(k), float(v)) for k, v in spec.items()]
    else:
        parts = [p.strip() for p in (spec.split(",") if isinstance(spec, str) else spec) if p.strip()]
        items = []
        for part in parts:
            name, sep, number = part.partition("=")
            try:
                items.append((name.strip(), float(number) if sep else default))
            except ValueError:
                raise UnknownMetric(f"{part!r}: expected name=number") from None
    values: dict[str, float] = {}
    for name, weight in items:
        if name not in METRICS:
            raise UnknownMetric(f"unknown metric {name!r}; the metrics are {', '.join(METRICS)}")
        values[name] = weight
    return values


@dataclass(frozen=True)
class MaskRow:
    """One fill-in-the-middle row: ``prefix + middle + suffix`` is the reference program, ``middle`` the span."""

    id: str  # <task_id>#mask:<function>:<start>-<end>
    task_id: str
    prefix: str
    middle: str
    suffix: str
    function: str
    span: dict[str, Any]  # kind, node, start, end (1-based lines of the program, both included)
    metrics: dict[str, Any]  # the span's
    function_metrics: dict[str, Any]
    kind: str  # the task's tests: stdio, call or assert
    tests: list[dict[str, Any]]
    entry_point: str | None = None
    starter_code: str = ""
    language: str = "python"
    judge: dict[str, Any] = field(default_factory=dict)  # comparison options of the task's tests
    dataset: str = ""
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MaskRow:
        """A row as ``to_dict`` (or a formatted row of ``masked.jsonl``) wrote it; extra keys are ignored."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    def task(self) -> Task:
        """The task that judges a reassembled program: the row's tests, entry point and starter code."""
        return Task(
            task_id=self.task_id,
            prompt="",
            kind=self.kind,  # type: ignore[arg-type]  # a row is made from a Task, whose kind it keeps
            tests=self.tests,
            entry_point=self.entry_point,
            starter_code=self.starter_code,
            language=self.language,
            metadata=dict(self.judge),
        )


@dataclass
class Candidates:
    """A task's functions and the spans of each that are candidates under the dataset's thresholds."""

    task: Task
    source: str | None  # None: the task has no Python reference solution that parses
    functions: list[FunctionSpans] = field(default_factory=list)  # each with only its candidate spans
    all_spans: int = 0  # spans before the thresholds


class CodeMaskDataset:
    """Masks spans of reference solutions chosen by complexity metrics (see the module's docstring).

    >>> masker = CodeMaskDataset(metrics={"cyclomatic": 1.0}, probability=1.0, seed=0, minimum="statements=3")
    >>> task = Task("t/1", "", "assert", [{"assert_code": "assert f(-1) == 1"}], "f",
    ...             metadata={"canonical_solution": "def f(x):\\n    if x < 0:\\n        x = -x\\n    return x\\n"})
    >>> [row.middle for row in masker.mask(task)]
    ['    if x < 0:\\n        x = -x\\n    return x\\n']
    """

    def __init__(
        self,
        metrics: str | Mapping[str, float] | Sequence[str] = ("cyclomatic",),
        probability: float = 0.5,
        seed: int = 0,
        *,
        minimum: str | Mapping[str, float] = "",
        max_lines: int | None = None,
        spans_per_function: int = 1,
        dataset: str = "",
    ) -> None:
        if not 0.0 <= probability <= 1.0:
            raise ValueError(f"probability must be within [0, 1], not {probability}")
        if spans_per_function < 1:
            raise ValueError(f"spans_per_function must be at least 1, not {spans_per_function}")
        self.metrics = parse_metric_values(metrics)
        if any(w < 0 for w in self.metrics.values()):
            raise UnknownMetric("metric weights must not be negative")
        self.minimum = parse_metric_values(minimum)
        self.probability = probability
        self.seed = seed
        self.max_lines = max_lines
        self.spans_per_function = spans_per_function
        self.dataset = dataset

    def candidates(self, task: Task) -> Candidates:
        """The task's functions, each with its spans that pass ``minimum`` and ``max_lines``."""
        ref = solutions.reference(task)
        if ref is None:
            return Candidates(task, None)
        try:
            functions = function_spans(ref.source)
        except (SyntaxError, ValueError):
            return Candidates(task, None)
        found = Candidates(task, ref.source)
        for function in functions:
            found.all_spans += len(function.spans)
            kept = [s for s in function.spans if self._eligible(s)]
            found.functions.append(FunctionSpans(function.function, kept))
        return found

    def choose(self, task_id: str, function: FunctionSpans) -> list[Span]:
        """The spans of ``function`` masked in the task's rows (none when the probability draw says so)."""
        rng = row_rng(self.seed, "mask", f"{task_id}:{function.function.name}")
        if not function.spans or rng.random() >= self.probability:
            return []
        pool, weights = list(function.spans), self.scores(function.spans)
        chosen: list[Span] = []
        while pool and len(chosen) < self.spans_per_function:
            i = _weighted_index(rng, weights)
            chosen.append(pool.pop(i))
            weights.pop(i)
        return sorted(chosen, key=lambda s: (s.start, -s.end))

    def scores(self, spans: Sequence[Span]) -> list[float]:
        """Each span's score: the weighted sum of its metrics, each divided by its highest value among ``spans``."""
        highest = {m: max(s.metrics.value(m) for s in spans) for m in self.metrics}
        return [
            sum(w * s.metrics.value(m) / highest[m] for m, w in self.metrics.items() if highest[m] > 0) for s in spans
        ]

    def mask(self, task: Task) -> list[MaskRow]:
        """The rows of one task, in source order (unverified: ``verify.mask_and_verify`` judges them)."""
        return self.rows_of(self.candidates(task))

    def rows_of(self, candidates: Candidates) -> list[MaskRow]:
        """The rows of a task whose candidates are already known."""
        if candidates.source is None:
            return []
        lines = split_lines(candidates.source)
        return [
            self._row(candidates.task, lines, function, span)
            for function in candidates.functions
            for span in self.choose(candidates.task.task_id, function)
        ]

    def __call__(self, tasks: Iterable[Task]) -> Iterator[MaskRow]:
        """The rows of every task, task by task."""
        for task in tasks:
            yield from self.mask(task)

    def _eligible(self, span: Span) -> bool:
        if self.max_lines is not None and span.metrics.lines > self.max_lines:
            return False
        return all(span.metrics.value(m) >= v for m, v in self.minimum.items())

    def _row(self, task: Task, lines: Sequence[str], function: FunctionSpans, span: Span) -> MaskRow:
        return MaskRow(
            id=f"{task.task_id}#mask:{span.function}:{span.start}-{span.end}",
            task_id=task.task_id,
            prefix="".join(lines[: span.start - 1]),
            middle="".join(lines[span.start - 1 : span.end]),
            suffix="".join(lines[span.end :]),
            function=span.function,
            span={"kind": span.kind, "node": span.node, "start": span.start, "end": span.end},
            metrics=span.metrics.to_dict(),
            function_metrics=function.function.metrics.to_dict(),
            kind=task.kind,
            tests=task.tests,
            entry_point=task.entry_point,
            starter_code=task.starter_code,
            language=task.language,
            judge={k: task.metadata[k] for k in JUDGE_KEYS if k in task.metadata},
            dataset=self.dataset,
            seed=self.seed,
        )


def _weighted_index(rng: random.Random, weights: Sequence[float]) -> int:
    total = sum(weights)
    if total <= 0:
        return rng.randrange(len(weights))
    return rng.choices(range(len(weights)), weights=weights)[0]
