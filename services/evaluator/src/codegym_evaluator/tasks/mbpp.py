"""MBPP, full (``text``, ``test_list``, ``test_setup_code``) and sanitized (``prompt``, ``test_imports``).

The hub repository ``google-research-datasets/mbpp`` holds parquet files per configuration and split:
``full/{train,test,validation,prompt}-00000-of-00001.parquet`` (``task_id``, ``text``, ``code``,
``test_list``, ``test_setup_code``, ``challenge_test_list``) and the same four under ``sanitized/``
(``source_file``, ``task_id``, ``prompt``, ``code``, ``test_imports``, ``test_list``).
"""

from __future__ import annotations

import re
from typing import Any

from .hub import HubFiles
from .model import Task

SPLITS = ("train", "test", "validation", "prompt")
HUB_FULL = HubFiles("google-research-datasets/mbpp", ("full/{split}-*.parquet",), SPLITS)
HUB_SANITIZED = HubFiles("google-research-datasets/mbpp", ("sanitized/{split}-*.parquet",), SPLITS)

_CALLED = re.compile(r"assert\s+(?:not\s+)?\(?\s*(?:set\(|math\.isclose\(|abs\()?\s*([A-Za-z_]\w*)\s*\(")


def entry_point(sample: dict[str, Any]) -> str | None:
    """The function the tests call: the first name called in an assert that the reference code defines."""
    code = str(sample.get("code", ""))
    for test in sample.get("test_list", []):
        for name in re.findall(r"([A-Za-z_]\w*)\s*\(", test):
            if re.search(rf"\bdef\s+{name}\s*\(", code):
                return str(name)
    m = _CALLED.search(sample.get("test_list", [""])[0] if sample.get("test_list") else "")
    return m.group(1) if m else None


class MBPPAdapter:
    """Rows of ``mbpp`` (full or ``sanitized``): each assert of ``test_list`` is one assert test.

    As in the MBPP paper's prompt, the problem is shown with its tests, which also fixes the function name.
    ``challenge_test_list`` (full only) is added when ``challenge`` is set. For training, where a reward on
    shown tests would pay a table of their answers, the prompt shows the first assert alone (it still names the
    function) and every assert judges (``Task.for_training``).
    """

    def __init__(self, *, challenge: bool = False) -> None:
        self.challenge = challenge

    def _setup(self, sample: dict[str, Any]) -> str:
        imports = sample.get("test_imports") or []
        setup = "\n".join([*imports, str(sample.get("test_setup_code") or "")]).strip()
        return f"{setup}\n" if setup else ""

    def extract_tests(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        asserts = list(sample.get("test_list") or [])
        if self.challenge:
            asserts += list(sample.get("challenge_test_list") or [])
        setup = self._setup(sample)
        return [{"assert_code": f"{setup}{a}"} for a in asserts if a.strip()]

    def format_problem(self, sample: dict[str, Any], shown: int | None = None) -> str:
        text = str(sample.get("prompt") or sample.get("text") or "").strip()
        tests = "\n".join([a for a in sample.get("test_list") or [] if a.strip()][:shown])
        return f"{text}\nYour code should pass these tests:\n\n{tests}\n"

    def to_task(self, sample: dict[str, Any], index: int) -> Task | None:
        tests = self.extract_tests(sample)
        if not tests:
            return None
        return Task(
            task_id=f"Mbpp/{sample.get('task_id', index)}",
            prompt=self.format_problem(sample),
            kind="assert",
            tests=tests,
            entry_point=entry_point(sample),
            metadata={
                "canonical_solution": str(sample.get("code", "")),
                "test_imports": sample.get("test_imports"),
                # the prompt shows ``test_list``; the challenge tests after them are hidden
                "public_tests": sum(1 for a in sample.get("test_list") or [] if a.strip()),
                "training_prompt": self.format_problem(sample, shown=1),
                "training_public_tests": 1,
            },
        )
