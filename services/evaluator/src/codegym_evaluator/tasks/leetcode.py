"""LeetCodeDataset: LeetCode problems, each a method of ``class Solution``, judged by the dataset's ``check``.

The hub repository ``newfacade/LeetCodeDataset`` holds ``LeetCodeDataset-train.jsonl`` and
``LeetCodeDataset-test.jsonl`` at its root. A row: ``task_id`` (the problem's slug), ``question_id``,
``difficulty`` (Easy, Medium, Hard), ``tags``, ``problem_description``, ``starter_code`` (the class and the
method to write), ``prompt`` (the imports and the ``ListNode``/``TreeNode`` helpers, ``list_node`` and
``tree_node`` among them, that solutions and tests use), ``completion`` (a reference solution),
``entry_point`` (``Solution().twoSum``), ``test`` (``def check(candidate):`` and its asserts),
``input_output``, ``estimated_date``, ``query`` and ``response``.
"""

from __future__ import annotations

from typing import Any

from .hub import HubFiles
from .model import Task
from .stdio import LEETCODE_PRELUDE

HUB = HubFiles("newfacade/LeetCodeDataset", ("LeetCodeDataset-{split}.jsonl",), ("train", "test"))


class LeetCodeAdapter:
    """Rows of ``newfacade/LeetCodeDataset`` as assert tasks on the method ``entry_point`` names.

    The whole ``check`` runs as one assert test, called on ``Solution().<method>``, as the dataset's own
    evaluation runs it; the row's ``prompt`` (imports and helpers) runs before the model's code, so the
    tests' ``list_node``/``tree_node`` and the solution's ``List``/``ListNode`` are defined.
    """

    def extract_tests(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        test, entry = str(sample.get("test") or ""), str(sample.get("entry_point") or "")
        if "def check(" not in test or not entry:
            return []
        return [{"assert_code": f"{test.rstrip()}\n\n\ncheck({entry})\n"}]

    def format_problem(self, sample: dict[str, Any]) -> str:
        return str(sample.get("problem_description") or "").strip()

    def to_task(self, sample: dict[str, Any], index: int) -> Task | None:
        tests = self.extract_tests(sample)
        if not tests:
            return None
        return Task(
            task_id=f"LeetCode/{sample.get('task_id') or sample.get('question_id') or index}",
            prompt=self.format_problem(sample),
            kind="assert",
            tests=tests,
            entry_point=str(sample["entry_point"]).rsplit(".", 1)[-1],  # the method: twoSum
            starter_code=str(sample.get("prompt") or LEETCODE_PRELUDE),
            difficulty=sample.get("difficulty"),
            metadata={
                "starter_code": str(sample.get("starter_code") or ""),
                "canonical_solution": str(sample.get("completion") or ""),
                "question_id": sample.get("question_id"),
                "tags": list(sample.get("tags") or []),
                "estimated_date": sample.get("estimated_date"),
            },
        )
