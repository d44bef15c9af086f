"""The verdict of a finished run: out of memory or not, and whose fault a run that could not start is."""

from __future__ import annotations

import signal
from typing import Any

import pytest
from codegym_sandbox.agent.protocol import EXEC_FAILED
from codegym_sandbox.backends.base import RunOutcome
from codegym_sandbox.verdicts import RunEnd, Verdict, memory_exceeded, run_end


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


def _outcome(**fields: Any) -> RunOutcome:
    base: dict[str, Any] = dict(
        exit_code=0,
        signal=None,
        wall_s=0.1,
        cpu_s=0.1,
        max_rss_kb=1000,
        timed_out=False,
        output_exceeded=False,
        stdout=b"",
        stderr=b"",
    )
    return RunOutcome(**{**base, **fields})


_EXEC = f"{EXEC_FAILED}OSError: [Errno 8] Exec format error: '/tmp/box/main'"


@pytest.mark.parametrize(
    ("launch_error", "own_file", "verdict"),
    [
        # The kernel found the program's own file no executable (a library, a broken executable, an
        # interpreter it names that is missing): its failure.
        (_EXEC, True, Verdict.RE),
        (f"{EXEC_FAILED}FileNotFoundError: [Errno 2] No such file or directory: '/tmp/box/main'", True, Verdict.RE),
        (f"{EXEC_FAILED}OSError: [Errno 80] Accessing a corrupted shared library: '/tmp/box/main'", True, Verdict.RE),
        # A file the server checked to be executable that may not be executed (a noexec mount), or resources
        # the box lacked: the sandbox's failure, whoever's file it was.
        (f"{EXEC_FAILED}PermissionError: [Errno 13] Permission denied: '/tmp/box/main'", True, Verdict.SE),
        (f"{EXEC_FAILED}PermissionError: [Errno 1] Operation not permitted: '/tmp/box/main'", True, Verdict.SE),
        (f"{EXEC_FAILED}BlockingIOError: [Errno 11] Resource temporarily unavailable", True, Verdict.SE),
        (f"{EXEC_FAILED}an error without its number", True, Verdict.SE),
        # A tool of the sandbox's that would not start (a compiler, an interpreter): the sandbox's failure.
        (f"{EXEC_FAILED}FileNotFoundError: [Errno 2] No such file or directory: '/usr/bin/node'", False, Verdict.SE),
        (_EXEC.replace("/tmp/box/main", "/usr/bin/node"), False, Verdict.SE),
        # The box failed before it came to executing anything: the sandbox's failure, whatever was to run.
        ("OSError: [Errno 9] Bad file descriptor", True, Verdict.SE),
        ("ValueError: bad limits", False, Verdict.SE),
    ],
)
def test_a_launch_error_is_the_programs_only_when_its_own_file_would_not_execute(
    launch_error: str, own_file: bool, verdict: Verdict
) -> None:
    assert run_end(_outcome(exit_code=127, launch_error=launch_error), False, own_file).verdict is verdict


@pytest.mark.parametrize(
    ("fields", "memory", "verdict"),
    [
        ({}, False, Verdict.AC),
        ({"exit_code": 1}, False, Verdict.RE),
        ({"exit_code": None, "signal": signal.SIGSEGV}, False, Verdict.RE),
        ({"exit_code": None, "signal": signal.SIGKILL}, True, Verdict.MLE),
        ({"exit_code": None, "signal": signal.SIGXCPU}, False, Verdict.TLE),
        ({"exit_code": None, "signal": signal.SIGKILL, "timed_out": True}, False, Verdict.TLE),
        ({"exit_code": None, "signal": signal.SIGKILL, "timed_out": True, "output_exceeded": True}, False, Verdict.OLE),
    ],
)
def test_a_finished_process_gets_its_verdict(fields: dict[str, Any], memory: bool, verdict: Verdict) -> None:
    for own_file in (True, False):  # whatever ran, once it ran
        assert run_end(_outcome(**fields), memory, own_file).verdict is verdict


@pytest.mark.parametrize(
    ("fields", "memory", "no_program", "verdict"),
    [
        ({}, False, False, Verdict.AC),
        # It ran and exited 0, but what it made cannot run (a library, no executable): it did not compile.
        ({}, False, True, Verdict.CE),
        ({"exit_code": 1}, False, False, Verdict.CE),
        ({"exit_code": None, "signal": signal.SIGKILL}, True, False, Verdict.CE),
        ({"exit_code": None, "signal": signal.SIGKILL, "output_exceeded": True}, False, False, Verdict.CE),
        # Out of time, or the sandbox's failure: never the program's compile error.
        ({"exit_code": None, "signal": signal.SIGKILL, "timed_out": True}, False, False, Verdict.TLE),
        ({"exit_code": None, "signal": signal.SIGXCPU}, False, True, Verdict.TLE),
        ({"exit_code": 127, "launch_error": f"{EXEC_FAILED}OSError: [Errno 2] No such file"}, False, False, Verdict.SE),
    ],
)
def test_a_compile_that_failed_is_a_compile_error(
    fields: dict[str, Any], memory: bool, no_program: bool, verdict: Verdict
) -> None:
    out = _outcome(**fields)
    assert run_end(out, memory, False, compile_step=True, no_program=no_program).verdict is verdict


@pytest.mark.parametrize("error", ["SyntaxError: invalid syntax", "IndentationError: unexpected indent", "TabError: x"])
def test_a_python_source_that_does_not_parse_is_a_compile_error(error: str) -> None:
    stderr = f'  File "/tmp/box/main.py", line 1\n{error}\n'.encode()
    # As the sandbox's side found before any of the program ran (the run's process, a series' process or checker).
    for fields in ({"unparsed": True}, {"unparsed": True, "forked": True}):
        out = _outcome(exit_code=1, stderr=stderr, **fields)
        assert run_end(out, False, False, python=True).verdict is Verdict.CE
        assert run_end(out, False, False).verdict is Verdict.RE  # another language's program: its own error
    # Raised while it ran (the tests' ast.parse of what it returned, an exec of bad text): a runtime error, in a
    # test series too, whatever Python's last line says.
    raised = _outcome(exit_code=1, stderr=stderr, forked=True)
    assert run_end(raised, False, False, python=True).verdict is Verdict.RE
    # A limit it hit stays that limit's verdict.
    timed = _outcome(exit_code=None, signal=signal.SIGKILL, timed_out=True, stderr=stderr, unparsed=True)
    assert run_end(timed, False, False, python=True).verdict is Verdict.TLE


def test_what_a_run_on_its_own_printed_never_makes_it_a_compile_error() -> None:
    printed = _outcome(exit_code=1, stderr=b'  File "/tmp/box/main.py", line 1\nSyntaxError: printed\n')
    assert run_end(printed, False, False, python=True).verdict is Verdict.RE
    # A bad line that names an out-of-memory marker did not run out of memory: nothing of it ran.
    echoed = b'  File "main.py", line 1\n    x = = 1  # MemoryError\nSyntaxError: invalid syntax\n'
    memory = memory_exceeded(echoed, 1, None, None, 256)
    for fields in ({"unparsed": True}, {"unparsed": True, "forked": True}):
        out = _outcome(exit_code=1, stderr=echoed, **fields)
        assert memory and run_end(out, memory, False, python=True).verdict is Verdict.CE


def test_a_verdict_reads_as_it_is_on_the_wire() -> None:
    # Its callers print it, log it and make names of it ("verdicts/SE"): never "Verdict.SE".
    assert [str(v) for v in Verdict] == [v.value for v in Verdict]
    assert f"{Verdict.SE}|{Verdict.AC:>3}" == "SE| AC"
    assert Verdict.WA == "WA" and Verdict("TLE") is Verdict.TLE


def test_a_run_that_exited_0_has_an_end_not_a_verdict() -> None:
    # A run that exited 0 has passed no test by that: only a run that no test judges is AC for it.
    end = run_end(_outcome(), False, False)
    assert end is RunEnd.EXITED and not isinstance(end, Verdict) and end != Verdict.AC
    assert {e.verdict for e in RunEnd} == set(Verdict) - {Verdict.WA}  # WA is only ever a test's
