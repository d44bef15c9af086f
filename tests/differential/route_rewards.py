"""The ``CodeReward`` route: the corpus as TRL's dataset columns, judged in one call per time limit."""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from typing import Any

from codegym_evaluator.trl_reward import CodeReward, ShownTestsWarning

from .corpus import Item, call_cases, stdio_cases
from .route_http import CONCURRENCY, FUSION_LANGUAGES, Driver, Verdict, apps_row, limit

_MASKED = re.compile(r"row (\d+): its prompt shows every test")


def reward_columns(items: list[Item]) -> dict[str, list[Any]]:
    """TRL's dataset columns for ``CodeReward``: ``verification_info`` (stdin and call tests, open-r1's format),
    APPS's ``input_output`` for an APPS item, or HumanEval's ``tests`` with ``entry_point``, one row per
    completion."""
    info: list[Any] = []
    io: list[Any] = []
    tests: list[Any] = []
    entry: list[Any] = []
    for item in items:
        if item.dataset == "apps":
            info.append(None)
            io.append(apps_row(item)["input_output"])
        elif item.form == "stdio":
            cases = [{"input": i, "output": o} for i, o in stdio_cases(item.task)]
            info.append({"language": item.language, "test_cases": cases})
            io.append(None)
        elif item.form == "call":
            cases = [{"input": json.dumps(a), "output": json.dumps(e)} for a, e in call_cases(item.task)]
            info.append({"language": "python", "fn_name": item.task.entry, "test_cases": cases})
            io.append(None)
        else:
            info.append(None)
            io.append(None)
        tests.append(item.task.check_source() if item.form == "assert" else None)
        entry.append(item.task.entry if item.form == "assert" else None)
    return {
        "verification_info": info,
        "input_output": io,
        "tests": tests,
        "entry_point": entry,
        "language": [i.language for i in items],
    }


def rewarded(item: Item, api: str) -> bool:
    """An item ``CodeReward`` can judge: open-r1's and APPS's items in their columns, codegym's own in open-r1's
    where its verdict is the same under either rule (not ``bound``); a plain fusion server lacks plain C."""
    expressible = item.dataset in ("apps", "open-r1") or not item.bound
    return expressible and (api == "native" or item.language in FUSION_LANGUAGES)


def code_reward(api: str) -> Driver:
    """``CodeReward(api=...)`` on every item at once; passed when the reward is 1.0 (all tests)."""

    async def drive(url: str, items: list[Item]) -> dict[str, Verdict]:
        out: dict[str, Verdict] = {}
        for seconds in sorted({limit(i) for i in items}):  # a reward has one time limit: one call per limit
            chosen = [i for i in items if rewarded(i, api) and limit(i) == seconds]
            reward = CodeReward(url, api=api, timeout_s=seconds, concurrency=CONCURRENCY)  # type: ignore[arg-type]
            # The prompt as TRL gives it: the text the completion follows (its helpers are the tests' own).
            prompts = [i.task.starter if i.form != "stdio" else "" for i in chosen]
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always", ShownTestsWarning)
                scores = await asyncio.to_thread(reward, prompts, [i.fenced for i in chosen], **reward_columns(chosen))
            # A row whose prompt shows every test (a docstring's examples that are its asserts) is masked by design:
            # no training reward pays a table of the shown answers. Not this route's to judge, as a row it cannot
            # express; any other None is the route's failure to judge (SE).
            masked = {int(m.group(1)) for w in warned if (m := _MASKED.match(str(w.message)))}
            out.update(
                {
                    i.id: None if s is None else s == 1.0
                    for n, (i, s) in enumerate(zip(chosen, scores, strict=True))
                    if n not in masked
                }
            )
        return out

    return drive
