"""LiveCodeBench code generation: stdin/stdout problems (AtCoder, Codeforces) and LeetCode-style ones.

The hub repository ``livecodebench/code_generation_lite`` loads through a script
(``code_generation_lite.py``) that reads one JSON-lines file per release at its root: ``test.jsonl`` holds
release v1, ``test2.jsonl`` to ``test6.jsonl`` what v2 to v6 added. A version (the split, in codegym)
picks files as the script's ``version_tag`` does: ``release_vN`` is v1 to vN, ``vN`` only what vN added,
``vN_vM`` vN to vM, and ``release_latest`` (the default; ``test`` too) every release. A row:
``question_title``, ``question_content``, ``platform``, ``question_id``, ``contest_id``,
``contest_date``, ``starter_code``, ``difficulty``, ``public_test_cases`` (JSON), ``private_test_cases``
(JSON, or base64 of zlib of a pickled JSON string) and ``metadata`` (JSON: ``func_name``).
"""

from __future__ import annotations

import base64
import io
import json
import logging
import pickle
import re
import zlib
from typing import Any

from .model import Task, TaskKind
from .preludes import binds
from .rules import rule
from .sources import DatasetError
from .stdio import LEETCODE_PRELUDE, json_field, method_assert, stdio_tests

LATEST = "release_latest"
log = logging.getLogger(__name__)


def release_file(version: int) -> str:
    """The file holding what release ``version`` added."""
    return "test.jsonl" if version == 1 else f"test{version}.jsonl"


class VersionFiles:
    """The files of a LiveCodeBench version, as the dataset's script maps its ``version_tag`` to files."""

    repo = "livecodebench/code_generation_lite"

    def files(self, split: str) -> tuple[str, ...]:
        if split in (LATEST, "test"):
            return ("test.jsonl", "test[0-9]*.jsonl")
        if m := re.fullmatch(r"release_v([1-9]\d*)", split):
            return tuple(release_file(v) for v in range(1, int(m[1]) + 1))
        if m := re.fullmatch(r"v([1-9]\d*)", split):
            return (release_file(int(m[1])),)
        if (m := re.fullmatch(r"v([1-9]\d*)_v([1-9]\d*)", split)) and int(m[1]) < int(m[2]):
            return tuple(release_file(v) for v in range(int(m[1]), int(m[2]) + 1))
        raise DatasetError(
            f"{self.repo} has no version {split!r}; use {LATEST}, release_vN (releases 1 to N), vN (only what"
            " release N added) or vN_vM (releases N to M), e.g. release_v6, v6, v5_v6"
        )


HUB = VersionFiles()


class _StringsOnly(pickle.Unpickler):
    """The private tests are a pickled JSON string: refuse any object that is not plain data."""

    def find_class(self, module: str, name: str) -> Any:
        # The names are a row's, which a client may send: cut (a 30 MB name was a 500 whose log held it twice).
        raise pickle.UnpicklingError(f"refusing to load {module[:64]}.{name[:64]} from a dataset")


def decode_cases(value: Any) -> list[dict[str, Any]]:
    """Test cases stored as JSON, or as base64 of zlib of a pickled JSON string (the ``lite`` releases)."""
    cases = json_field(value, None)
    if cases is None and isinstance(value, str) and value:
        raw = _StringsOnly(io.BytesIO(zlib.decompress(base64.b64decode(value)))).load()
        cases = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
    return [c for c in cases or [] if isinstance(c, dict)]


class LiveCodeBenchAdapter:
    """Rows of ``livecodebench/code_generation_lite``: public then private test cases.

    ``stdin`` cases become stdin/stdout tests; ``functional`` ones (LeetCode, one JSON argument per input
    line) become assert tests on ``Solution().<func_name>`` (or, as lcb_runner does, a program's top-level
    ``<func_name>`` where it defines no ``Solution``). Both compare as lcb_runner does (``tasks.rules``),
    the program after lcb_runner's prelude (``tasks.preludes``).
    """

    def _cases(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        return decode_cases(sample.get("public_test_cases")) + decode_cases(sample.get("private_test_cases"))

    def _func(self, sample: dict[str, Any]) -> str | None:
        meta = json_field(sample.get("metadata"), {})
        return meta.get("func_name") if isinstance(meta, dict) else None

    def _kind(self, sample: dict[str, Any]) -> TaskKind:
        cases = self._cases(sample)
        return "assert" if cases and cases[0].get("testtype") == "functional" else "stdio"

    def extract_tests(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        """The row's tests; none (a row loaders skip, with a warning) for functional cases that do not read as
        JSON here: an integer past the interpreter's digits (lcb_runner reads up to 50000, and the checker that
        would compare it reads codegym's), or a broken case."""
        cases = self._cases(sample)
        if self._kind(sample) == "stdio":
            return stdio_tests([c["input"] for c in cases], [c["output"] for c in cases])
        fn = self._func(sample)
        if not fn:
            return []
        try:
            return self._method_tests(fn, cases)
        except ValueError as exc:  # json's errors, and an int past the digits limit, are ValueErrors
            log.warning("LiveCodeBench/%s left out: a test case cannot be read: %s", sample.get("question_id"), exc)
            return []

    def _method_tests(self, fn: str, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
        by, fallback = rule("livecodebench").call_comparison, not binds(self.starter("assert"), fn)
        return [
            {
                "assert_code": method_assert(
                    "Solution",
                    fn,
                    [json.loads(line) for line in c["input"].splitlines() if line.strip()],
                    json.loads(c["output"]),
                    by,
                    fallback=fallback,
                )
            }
            for c in cases
        ]

    def starter(self, kind: TaskKind) -> str:
        """What goes before a program of ``kind``: lcb_runner's prelude (``tasks.preludes``), and LeetCode's
        imports before a method."""
        return rule("livecodebench").prelude + (LEETCODE_PRELUDE if kind == "assert" else "")

    def format_problem(self, sample: dict[str, Any]) -> str:
        return str(sample.get("question_content", "")).strip()

    def to_task(self, sample: dict[str, Any], index: int) -> Task | None:
        tests = self.extract_tests(sample)
        if not tests:
            return None
        kind = self._kind(sample)
        return Task(
            task_id=f"LiveCodeBench/{sample.get('question_id', index)}",
            prompt=self.format_problem(sample),
            kind=kind,
            tests=tests,
            entry_point=self._func(sample) if kind != "stdio" else None,
            starter_code=self.starter(kind),
            difficulty=sample.get("difficulty"),
            metadata={
                **rule("livecodebench").metadata(),
                "starter_code": str(sample.get("starter_code") or ""),
                "public_tests": len(decode_cases(sample.get("public_test_cases"))),
                "platform": sample.get("platform"),
                "contest_date": str(sample.get("contest_date") or ""),
                "title": sample.get("question_title"),
            },
        )
