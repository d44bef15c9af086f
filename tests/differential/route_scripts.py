"""The notebook routes' driver scripts: open-r1's routed code reward for Python stdin programs.

The script runs the program on each case in a subprocess (``python3 -c``, in the working directory the
program may write to) and ends with the pass rate. Like many reward scripts, it imports what sums the scores up
after the program ran (``statistics``): a module the program wrote under that name must never be what the
judge imports (issue 31, family 3: ``families.py`` plants them).
"""

from __future__ import annotations

import json
from typing import Any

from codegym_sandbox.judging.compare import Comparison

from .corpus import Item, stdio_cases
from .route_http import Verdict, bounded, client, comparison, limit, post

OPEN_R1_SCRIPT = """\
import json
import subprocess


def evaluate_code(code, test_cases):
    scores = []
    for case in test_cases:
        try:
            process = subprocess.run(["python3", "-c", code], input=case["input"], text=True, capture_output=True,
                                     timeout={timeout})
        except subprocess.TimeoutExpired:
            scores.append(0.0)
            continue
        scores.append(float(process.returncode == 0 and {same}))
    import statistics

    return statistics.fmean(scores)


code_snippet = {code!r}
test_cases = json.loads({cases!r})
evaluate_code(code_snippet, test_cases)
"""


# How the script compares, by the item's rule (open-r1 itself strips lines and zips them, which drops lines).
SAME = {
    Comparison.EXACT: 'process.stdout.rstrip("\\n") == case["output"].rstrip("\\n")',
    Comparison.WHITESPACE: 'process.stdout.split() == case["output"].split()',
}


def open_r1_script(item: Item) -> str:
    """open-r1's ``code_reward`` script for one program, comparing by the item's rule."""
    cases = json.dumps([{"input": i, "output": o} for i, o in stdio_cases(item.task)])
    same = SAME[comparison(item)]
    return OPEN_R1_SCRIPT.format(code=item.program, cases=cases, timeout=limit(item), same=same)


def scripted(item: Item) -> bool:
    """A Python stdin item the open-r1 script can judge (its comparison is one the script makes)."""
    return item.form == "stdio" and item.language == "python" and comparison(item) in SAME


async def execute_batch(url: str, items: list[Item]) -> dict[str, Verdict]:
    """``/execute_batch`` for the Python stdin programs, in batches of 32 scripts, as open-r1's routers send."""
    out: dict[str, Verdict] = {}
    chosen = [i for i in items if scripted(i)]
    async with client(url) as http:

        async def batch(members: list[Item]) -> None:
            body = {"scripts": [open_r1_script(m) for m in members], "languages": ["python"], "timeout": 30}
            r = await post(http, "/execute_batch", body)
            answers = r.json() if r.status_code == 200 else [{"execution": None}] * len(members)
            for m, answer in zip(members, answers, strict=True):
                if answer["execution"] is None:
                    out[m.id] = None
                    continue
                try:
                    out[m.id] = float(answer["text"]) == 1.0
                except (TypeError, ValueError):
                    out[m.id] = False

        await bounded([batch(chosen[i : i + 32]) for i in range(0, len(chosen), 32)])
    return out


async def run_jupyter(url: str, items: list[Item]) -> dict[str, Verdict]:
    """``/run_jupyter`` for the Python stdin programs: open-r1's script as the one cell of a notebook, its
    result the cell's display (``text/plain``), as a notebook-based reward reads it."""
    out: dict[str, Verdict] = {}
    chosen = [i for i in items if scripted(i)]
    async with client(url) as http:

        async def one(item: Item) -> None:
            r = await post(http, "/run_jupyter", {"cells": [open_r1_script(item)], "total_timeout": 30})
            answer: dict[str, Any] = r.json() if r.status_code == 200 else {"status": "SandboxError"}
            if answer["status"] == "SandboxError":
                out[item.id] = None
                return
            shown = [d.get("text/plain") for c in answer.get("cells") or [] for d in c.get("display") or []]
            out[item.id] = answer["status"] == "Success" and shown[-1:] == ["1.0"]

        await bounded([one(i) for i in chosen])
    return out
