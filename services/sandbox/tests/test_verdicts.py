"""Mapping a failed run to "out of memory" or not."""

from __future__ import annotations

import signal

from codegym_sandbox.verdicts import memory_exceeded


def test_oom_markers_in_stderr() -> None:
    assert memory_exceeded(b"Traceback...\nMemoryError\n", 1, None, 1000, 256)
    assert memory_exceeded(b"terminate called ... std::bad_alloc", None, signal.SIGABRT, 1000, 256)


def test_clean_exit_is_never_oom() -> None:
    assert not memory_exceeded(b"MemoryError", 0, None, 10**9, 256)


def test_sigkill_near_the_limit_is_oom() -> None:
    assert memory_exceeded(b"", None, signal.SIGKILL, 256 * 1024, 256)
    assert not memory_exceeded(b"", None, signal.SIGKILL, 10 * 1024, 256)
    assert not memory_exceeded(b"", None, signal.SIGKILL, None, 256)


def test_ordinary_errors_are_not_oom() -> None:
    assert not memory_exceeded(b"ValueError: boom", 1, None, 1000, 256)
