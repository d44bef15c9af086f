"""Whose fault a step that cannot start is, on every backend: the program's (CE at its compile, RE at its
run) when its own file cannot be executed, the sandbox's (SE) when a tool of the sandbox's cannot start.

The languages here are made for the test: their "compiler" is a shell command that leaves in ``main``
what a toolchain might (a library, a script for a missing interpreter, nothing at all), so that every
backend can run them whatever toolchains it has.
"""

from __future__ import annotations

from typing import Any

import pytest
from codegym_sandbox.backends.base import RunPolicy
from codegym_sandbox.executor import Execution, Executor
from codegym_sandbox.languages import Language
from codegym_sandbox.verdicts import RunEnd
from fastapi.testclient import TestClient


def _compiled_by(command: str) -> Language:
    """A language whose compile runs ``command`` in the scratch directory and whose run executes ``./main``
    (with every ``*.class`` file the compile made, as Java's runs get theirs)."""
    return Language("made", "main.txt", ("./main",), ("bash", "-c", command), ("main", "*.class"))


def _classes(n: int) -> str:
    """A shell command that makes an executable ``main`` and ``n`` class files whose names are 241 bytes."""
    each = "do : > 'Main$'$(printf %0230d $i).class; done"
    return f"printf '#!/bin/sh\\n' > main && chmod +x main && for i in $(seq {n}); {each}"


def _execute(client: TestClient, lang: Language) -> Execution:
    executor: Executor = client.app.state.executor  # type: ignore[attr-defined]

    async def execute() -> Execution:
        policy = RunPolicy()
        compiled, sources = await executor.build(lang, "", {}, executor.compile_limits(None), policy)
        if compiled is not None and compiled.end is not RunEnd.EXITED:
            return Execution(compiled, None)
        run = await executor.run_built(lang, sources, None, executor.run_limits(None, None), policy)
        return Execution(compiled, run)

    assert client.portal is not None
    done: Execution = client.portal.call(execute)
    return done


@pytest.mark.parametrize(
    "command",
    [
        "true",  # nothing written
        "printf '!<arch>\\n' > main",  # a library (Rust's #![crate_type = "lib"]): not executable
        "printf '\\177ELF' > main && chmod 644 main",
        "mkdir main",  # not a file
        "ln -s /bin/true main",  # not the program's own file
        _classes(4500),  # more than the frame header that starts a run can list (a worker died of it)
    ],
    ids=["nothing", "archive", "elf-not-executable", "directory", "symlink", "too-many-files"],
)
def test_a_compile_that_leaves_nothing_to_execute_is_a_compile_error(client: TestClient, command: str) -> None:
    ex = _execute(client, _compiled_by(command))
    assert ex.compile is not None and ex.run is None
    assert ex.compile.end is RunEnd.COMPILE_ERROR and ex.compile.exit_code == 0 and ex.compile.error is None
    assert b"sandbox: the compiler" in ex.compile.stderr


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("printf '!<arch>\\n' > main && chmod +x main", b"Exec format error"),  # ENOEXEC
        ("printf '\\177ELF\\2\\1\\1' > main && chmod +x main", b"Exec format error"),  # a truncated executable
        ("printf '#!/nonexistent/interpreter\\n' > main && chmod +x main", b"No such file"),  # ENOENT
    ],
    ids=["archive", "truncated-elf", "missing-interpreter"],
)
def test_an_executable_the_kernel_will_not_start_is_a_runtime_error(
    client: TestClient, command: str, why: bytes
) -> None:
    ex = _execute(client, _compiled_by(command))
    assert ex.compile is not None and ex.compile.end is RunEnd.EXITED
    assert ex.run is not None and ex.run.end is RunEnd.FAILED and ex.run.error is None, ex.run
    assert b"the program could not be started" in ex.run.stderr and why in ex.run.stderr, ex.run.stderr
    assert ex.repeatable  # an answer of the program's own: as cacheable as any


@pytest.mark.parametrize(
    ("lang", "stage"),
    [
        (Language("made", "main.txt", ("/nonexistent/interpreter", "main.txt")), "run"),
        (Language("made", "main.txt", ("./main",), ("/nonexistent/compiler", "main.txt"), ("main",)), "compile"),
    ],
    ids=["interpreter", "compiler"],
)
def test_a_tool_that_will_not_start_is_a_sandbox_error(client: TestClient, lang: Language, stage: str) -> None:
    ex = _execute(client, lang)
    step: Any = ex.run if stage == "run" else ex.compile
    assert step is not None and step.end is RunEnd.SANDBOX_ERROR, ex
    assert "/nonexistent/" in (step.error or "") and not ex.repeatable


def test_a_compile_that_makes_many_files_still_runs(client: TestClient) -> None:
    ex = _execute(client, _compiled_by(_classes(1500)))
    assert ex.compile is not None and ex.compile.end is RunEnd.EXITED and len(ex.compile.collected) == 1501
    assert ex.run is not None and ex.run.end is RunEnd.EXITED, ex.run
