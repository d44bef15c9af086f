"""``/submit``'s answers in upstream SandboxFusion's shapes: a test's run as ``/run_code`` answers it, a test's
case as upstream truncates it, and the answer for a completion the server could not read."""

from __future__ import annotations

from typing import Any

from codegym_sandbox.models import TestOut
from codegym_sandbox.verdicts import Verdict

TEST_INFO_CHARS = 1000  # as upstream truncates a case's input and output in test_info


def unread(id_: int | str, why: str) -> dict[str, Any]:
    """``/submit``'s answer for a completion the server could not read within its bounds: not accepted, no program
    run (a compile error's verdict: the completion's doing, never the sandbox's, so no reward masks it)."""
    extra = {"verdict": Verdict.CE.value, "passed": 0, "total": 0, "error": why}
    answer: dict[str, Any] = {"id": id_, "accepted": False, "extracted_code": "", "full_code": "", "test_code": None}
    return answer | {"tests": [], "extracted_type": "unread", "extra": extra}


def exec_info(test: TestOut) -> dict[str, Any]:
    """A test's run in ``/run_code``'s answer shape (``RunCodeResponse``)."""
    verdict = test.verdict
    if verdict is Verdict.SE:
        return {"status": "SandboxError", "message": test.stderr, "compile_result": None, "run_result": None}
    ran = verdict in (Verdict.AC, Verdict.WA)
    run = {
        "status": "TimeLimitExceeded" if verdict is Verdict.TLE else "Finished",
        "execution_time": test.wall_s,
        "cpu_time": test.cpu_s,
        "return_code": 0 if ran else None,
        "stdout": test.stdout,
        "stderr": test.stderr,
    }
    return {
        "status": "Success" if ran else "Failed",
        "message": "",
        "compile_result": None,
        "run_result": run,
        "executor_pod_name": None,
        "files": {},
    }


def test_info(test: dict[str, Any], full: bool) -> dict[str, Any]:
    if full:
        return dict(test)
    return {k: v[:TEST_INFO_CHARS] if isinstance(v, str) else v for k, v in test.items()}
