"""Issue 26's differential verdict test: every route of a codegym server judges the corpus as the plain
reference does (``bench/verdict_diff.py`` prints the same comparison as a table).

No honest program may be judged otherwise than by the reference, no hack may pass, and no item may come back
unjudged (SE) from a healthy server. The corpus must mean what its labels say (the reference's row), apart
from the hacks a plain harness falls for (an object equal to everything passes any ``==`` test), which only
the routes must refuse.
"""

from __future__ import annotations

import pytest

from .corpus import FORMS, LABELS, items
from .report import COLUMNS, Row, families, markdown
from .run import Run, run


@pytest.fixture(scope="module")
def result(sandbox_url: str) -> Run:
    return run(sandbox_url, list(items()))


def test_the_corpus_has_every_form_and_label_and_300_items() -> None:
    corpus = items()
    assert len(corpus) >= 300
    assert {(i.form, i.label) for i in corpus} >= {(f, lab) for f in FORMS for lab in LABELS}
    assert {i.language for i in corpus} >= {"python", "c", "cpp", "nodejs", "bash"}
    assert {i.family for i in corpus} >= {"3", "6", "cut", "exit", "model"}
    assert len([i for i in corpus if i.label == "model"]) >= 100  # the embedded model's answers


def test_the_reference_agrees_with_the_labels(result: Run) -> None:
    row = result.rows(list(items()))[0]
    tricks = {i.split("/", 1)[1] for i in row.cells["hack passed"]}
    assert tricks <= {"call/always_equal", "assert/always_equal"}, tricks
    wrong = {c: ids for c, ids in row.cells.items() if c != "hack passed" and ids}
    assert not wrong, wrong


def test_every_route_judges_as_the_reference(result: Run) -> None:
    rows: list[Row] = result.rows(list(items()))[1:]
    assert {r.route for r in rows} == set(result.verdicts)
    assert all(r.judged for r in rows)
    bad = [r for r in rows if r.disagreements]
    detail = "\n".join(f"{route} / {cell}: {', '.join(kinds)}" for (route, cell), kinds in families(bad).items())
    assert not bad, f"{markdown(bad)}\n\n{detail}\n(columns: {', '.join(COLUMNS)})"
