"""What an assert run's outcome is as the run's exit: the checker's word (``assert_runner.check``) and the program's
process's end together, which the program cannot set."""

from __future__ import annotations

import os

WRONG_ANSWER = 87  # the checks ran and an assertion failed, or the program ended before they did
OUTCOMES = ("passed", "failed", "error", "ended", "unparsed")  # what ``assert_runner.check`` answers


def outcome_status(outcome: str, status: int) -> tuple[int | None, int | None]:
    """The run's exit code and signal, from ``assert_runner.check``'s outcome and the program process's wait status.

    Only tests that ran to their end, followed by a clean end of the program's process (its threads and
    ``atexit`` handlers done, exit status 0), pass. Otherwise the program's own failure shows (an exit code
    or a signal, so that a CPU limit reads as one), and an early exit with status 0 is a wrong answer.
    """
    if outcome == "failed":
        return WRONG_ANSWER, None
    if outcome in ("error", "unparsed"):
        return 1, None
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    return (0, None) if outcome == "passed" and code == 0 else (code or WRONG_ANSWER, None)
