"""``CodeMaskDataset``: seeded and reproducible draws, the weights and thresholds, the rows and their formats."""

from __future__ import annotations

import doctest
from collections import Counter

import pytest
from codegym_data import solutions
from codegym_data.mask import dataset as dataset_module
from codegym_data.mask.dataset import CodeMaskDataset, MaskRow, UnknownMetric, parse_metric_values
from codegym_data.mask.fim import format_row, parse_tokens
from codegym_data.mask.spans import FunctionSpans, function_spans
from codegym_evaluator.tasks import Task, load_tasks
from mask_support import PROGRAM, own_task


@pytest.fixture(scope="module")
def humaneval() -> list[Task]:
    return load_tasks("humaneval", limit=40)


def test_the_same_seed_draws_the_same_rows_whatever_else_is_masked(humaneval: list[Task]) -> None:
    rows = list(CodeMaskDataset(probability=0.6, seed=3)(humaneval))
    assert rows == list(CodeMaskDataset(probability=0.6, seed=3)(humaneval))
    alone = CodeMaskDataset(probability=0.6, seed=3).mask(humaneval[17])
    assert alone == [r for r in rows if r.task_id == humaneval[17].task_id]
    other = list(CodeMaskDataset(probability=0.6, seed=4)(humaneval))
    assert [r.id for r in other] != [r.id for r in rows]


def test_probability_is_the_share_of_functions_masked(humaneval: list[Task]) -> None:
    functions = sum(len(CodeMaskDataset().candidates(t).functions) for t in humaneval)
    assert list(CodeMaskDataset(probability=0.0)(humaneval)) == []
    every = list(CodeMaskDataset(probability=1.0)(humaneval))
    assert len(every) == functions and len({(r.task_id, r.function) for r in every}) == functions
    shares = [len(list(CodeMaskDataset(probability=0.5, seed=s)(humaneval))) / functions for s in range(5)]
    assert 0.35 < sum(shares) / len(shares) < 0.65


def test_spans_per_function_draws_distinct_spans() -> None:
    rows = CodeMaskDataset(probability=1.0, spans_per_function=3, seed=1).mask(own_task())
    assert len(rows) == 3 and len({r.id for r in rows}) == 3
    assert [r.span["start"] for r in rows] == sorted(r.span["start"] for r in rows)
    (function,) = function_spans(PROGRAM)
    assert len(CodeMaskDataset(probability=1.0, spans_per_function=50).mask(own_task())) == len(function.spans)


def test_scores_weigh_each_metric_by_its_highest_value() -> None:
    (function,) = function_spans(PROGRAM)
    masker = CodeMaskDataset(metrics="cyclomatic=2,lines")
    spans = {(s.node, s.start): s for s in function.spans}
    chosen = [spans["FunctionDef.body", 3], spans["For", 4], spans["Return", 13]]
    # cyclomatic 5, 3, 1 (highest 5) with weight 2; lines 11, 4, 1 (highest 11) with weight 1.
    assert masker.scores(chosen) == pytest.approx([2 * 5 / 5 + 11 / 11, 2 * 3 / 5 + 4 / 11, 2 * 1 / 5 + 1 / 11])
    assert CodeMaskDataset(metrics="nesting_depth").scores([spans["Return", 13]]) == [0.0]  # highest 0: no weight


def test_spans_are_drawn_in_proportion_to_their_scores() -> None:
    (function,) = function_spans(PROGRAM)
    masker = CodeMaskDataset(metrics="cyclomatic", probability=1.0)
    scores = masker.scores(function.spans)
    draws = Counter(
        (span.start, span.end)
        for seed in range(3000)
        for span in CodeMaskDataset(metrics="cyclomatic", probability=1.0, seed=seed).choose("own/1", function)
    )
    for span, score in zip(function.spans, scores, strict=True):
        assert draws[span.start, span.end] / 3000 == pytest.approx(score / sum(scores), abs=0.025)


def test_nothing_to_weigh_draws_uniformly() -> None:
    (function,) = function_spans(PROGRAM)
    draws = Counter(
        CodeMaskDataset(metrics="", probability=1.0, seed=seed).choose("own/1", function)[0].start
        for seed in range(2400)
    )
    starts = Counter(s.start for s in function.spans)  # spans per first line
    for start, n in starts.items():
        assert draws[start] / 2400 == pytest.approx(n / len(function.spans), abs=0.03)


def test_thresholds_leave_out_spans(humaneval: list[Task]) -> None:
    rows = list(CodeMaskDataset(probability=1.0, minimum="cyclomatic=2,statements=2", max_lines=6)(humaneval))
    assert rows and all(r.metrics["cyclomatic"] >= 2 and r.metrics["statements"] >= 2 for r in rows)
    assert all(r.metrics["lines"] <= 6 for r in rows)
    found = CodeMaskDataset(minimum="cyclomatic=2").candidates(own_task())
    assert found.all_spans == 12 and len(found.functions[0].spans) == 5  # block, for, for's body, if, if


def test_a_row_is_the_program_cut_in_three_with_what_judges_it() -> None:
    task = load_tasks("humaneval", limit=1)[0]
    (row,) = CodeMaskDataset(probability=1.0, seed=0, dataset="humaneval").mask(task)
    ref = solutions.reference(task)
    assert ref is not None and row.prefix + row.middle + row.suffix == ref.source
    assert row.id == f"HumanEval/0#mask:has_close_elements:{row.span['start']}-{row.span['end']}"
    assert row.middle == "".join(ref.source.splitlines(keepends=True)[row.span["start"] - 1 : row.span["end"]])
    judged = row.task()
    assert (judged.task_id, judged.tests, judged.entry_point, judged.starter_code) == (
        task.task_id,
        task.tests,
        task.entry_point,
        task.starter_code,
    )
    assert MaskRow.from_dict(row.to_dict()) == row
    (own,) = CodeMaskDataset(probability=1.0).mask(own_task())
    assert own.judge == {"comparison": "exact"} and own.task().metadata == {"comparison": "exact"}


def test_rows_without_a_solution_give_nothing() -> None:
    assert CodeMaskDataset(probability=1.0).mask(own_task(code="")) == []
    assert CodeMaskDataset(probability=1.0).mask(own_task(code="def f(:\n")) == []
    assert CodeMaskDataset(probability=1.0).mask(own_task(code="x = 1\n")) == []  # no function: no span


def test_fim_formats() -> None:
    (row,) = CodeMaskDataset(probability=1.0).mask(own_task())
    plain = format_row(row)
    assert plain == row.to_dict() and "prompt" not in plain
    psm = format_row(row, "psm")
    assert psm["prompt"] == f"<fim_prefix>{row.prefix}<fim_suffix>{row.suffix}<fim_middle>"
    assert psm["completion"] == row.middle and psm["text"] == psm["prompt"] + row.middle
    assert MaskRow.from_dict(psm) == row  # a formatted row reads back
    llama = format_row(row, "psm", parse_tokens("<PRE>, <SUF>,<MID>"))
    assert llama["prompt"].startswith("<PRE>") and llama["prompt"].endswith("<MID>")
    with pytest.raises(ValueError, match="three comma-separated tokens"):
        parse_tokens("<PRE>,<SUF>")
    with pytest.raises(ValueError, match="unknown FIM format"):
        format_row(row, "spm")  # type: ignore[arg-type]


def test_bad_metric_lists_are_refused() -> None:
    assert parse_metric_values("cyclomatic=2, lines") == {"cyclomatic": 2.0, "lines": 1.0}
    assert parse_metric_values(["nesting_depth"]) == {"nesting_depth": 1.0}
    with pytest.raises(UnknownMetric, match="unknown metric 'loc'"):
        parse_metric_values("loc")
    with pytest.raises(UnknownMetric, match="expected name=number"):
        parse_metric_values("lines=many")
    with pytest.raises(UnknownMetric, match="must not be negative"):
        CodeMaskDataset(metrics="lines=-1")
    with pytest.raises(ValueError, match="probability"):
        CodeMaskDataset(probability=1.5)


def test_the_docstring_example() -> None:
    assert doctest.testmod(dataset_module).failed == 0


def test_candidates_keep_every_function() -> None:
    found = CodeMaskDataset(max_lines=1).candidates(own_task())
    assert [f.function.name for f in found.functions] == ["f"] and isinstance(found.functions[0], FunctionSpans)
    assert all(s.metrics.lines == 1 for s in found.functions[0].spans)
