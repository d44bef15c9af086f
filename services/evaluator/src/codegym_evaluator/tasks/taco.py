"""TACO: problems in APPS's format (stdin/stdout, or calls of ``fn_name``) from many judges, with skill labels.

The hub repository ``BAAI/TACO`` loads through a script (``TACO.py``) that reads Arrow shards
(``train/data-0000N-of-00009.arrow``, ``test/data-00000-of-00001.arrow``). The same rows are in parquet under
``ALL/`` (``ALL/train-0000N-of-00009.parquet``, ``ALL/test-00000-of-00001.parquet``), which codegym reads.
A row: ``question``, ``solutions`` and ``input_output`` (JSON text, as in APPS), ``starter_code``,
``difficulty`` (EASY, MEDIUM, MEDIUM_HARD, HARD, VERY_HARD or UNKNOWN_DIFFICULTY), ``source``, ``name``,
``url``, ``tags`` and ``skill_types`` (Python list literals, as text), ``time_limit``, ``memory_limit`` and a
few more, all text. Rows have no id: a task's id is its row's position in the split.
"""

from __future__ import annotations

from typing import Any

from .. import python_syntax
from .apps import APPSAdapter
from .hub import HubFiles

DIFFICULTIES = ("EASY", "MEDIUM", "MEDIUM_HARD", "HARD", "VERY_HARD", "UNKNOWN_DIFFICULTY")
HUB = HubFiles("BAAI/TACO", ("ALL/{split}-*.parquet",), ("train", "test"))


def literal_list(value: Any) -> list[str]:
    """A list the dataset stores as the text of a Python literal (``"['Sorting', 'Greedy']"``); [] if not one."""
    if isinstance(value, list):
        return [str(v) for v in value]
    try:
        parsed = python_syntax.literal_eval(value) if isinstance(value, str) else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return []
    return [str(v) for v in parsed] if isinstance(parsed, (list, tuple)) else []


class TACOAdapter(APPSAdapter):
    """Rows of ``BAAI/TACO``: the tests as in APPS, with the judge, tags, skills and limits as metadata."""

    dataset = "taco"

    def task_id(self, sample: dict[str, Any], index: int) -> str:
        return f"TACO/{index}"

    def metadata(self, sample: dict[str, Any]) -> dict[str, Any]:
        return {
            **super().metadata(sample),
            "source": sample.get("source"),
            "name": sample.get("name"),
            "tags": literal_list(sample.get("tags")),
            "skill_types": literal_list(sample.get("skill_types")),
            "time_limit": sample.get("time_limit"),
            "memory_limit": sample.get("memory_limit"),
        }
