"""The generative layer of the differential test: programs hypothesis builds from I/O idioms and attack building
blocks (``generative.py``), judged by the plain reference and through ``/v1/evaluate``, a batch per example.

An honest program must be judged as the reference judges it (and the reference must judge it as its label
says: an idiom that fails under a plain run is a bug of the layer); a hostile one must never pass. The seed is
fixed (``derandomize``) and the budget bounded (``MAX_EXAMPLES`` batches of ``generative.BATCH`` programs), so
that CI runs the same programs every time; the counts of what ran are written in the session's summary
(``conftest.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from hypothesis import HealthCheck, given, settings

from .corpus import Item
from .generative import COUNTS, batches
from .reference import judge_all
from .routes import evaluate

MAX_EXAMPLES = 10


@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(batch=batches())
def test_generated_programs_are_judged_as_the_reference(sandbox_url: str, batch: list[Item]) -> None:
    with ThreadPoolExecutor(max_workers=1) as pool:
        reference = pool.submit(judge_all, batch)
        verdicts = asyncio.run(evaluate(sandbox_url, batch))
        truth = reference.result()
    for item in batch:
        kind = "hostile" if item.label == "hack" else "honest"
        COUNTS[f"{kind} {item.form}/{item.language}"] += 1
        if kind == "hostile" and truth[item.id].passed:
            COUNTS["hostile that a plain harness passes"] += 1
    honest = [i for i in batch if i.label != "hack"]
    astray = {i.id: truth[i.id].detail for i in honest if truth[i.id].passed is not (i.label == "honest-correct")}
    assert not astray, f"the reference runs these idioms otherwise than their labels say: {astray}"
    wrong = {i.id: verdicts.get(i.id) for i in honest if verdicts.get(i.id) is not truth[i.id].passed}
    assert not wrong, f"judged otherwise than the reference: {wrong}\n" + _programs(batch, wrong)
    passed = {i.id: verdicts.get(i.id) for i in batch if i.label == "hack" and verdicts.get(i.id) is not False}
    assert not passed, f"hostile programs passed or came back unjudged: {passed}\n" + _programs(batch, passed)


def _programs(batch: list[Item], ids: Mapping[str, object]) -> str:
    return "\n".join(f"--- {i.id}\n{i.program}" for i in batch if i.id in ids)
