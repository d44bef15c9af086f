"""Line coverage of C and C++ programs with gcc's ``--coverage`` and ``gcov``.

The sandbox compiles C and C++ with its own flags, so the instrumented run is a ``bash`` program
(:data:`DRIVER`) that compiles the program given beside it with the language's flags, ``-O0 --coverage``
instead of ``-O2`` (so that lines are not merged or dropped by the optimiser), runs it on the test's stdin,
and has ``gcov --json-format`` describe what ran. Both compile and run happen inside that one sandbox run,
under its limits. The executable lines are the compiler's (the lines gcov lists for the program's file);
a program that ends without running its exit handlers (a crash, a kill at a limit, ``_exit``) writes no
counts, and its test gets no coverage.
"""

from __future__ import annotations

import shlex

from codegym_sandbox.languages import Language
from codegym_sandbox.models import ExecuteRequest, ExecuteResponse, LimitsIn, Test

from .instrument import OUT, b64, fetched_json
from .report import LineCoverage

DRIVER = """\
{compile} 2>.codegym-cc.txt || {{ cat .codegym-cc.txt >&2; exit 1; }}
{run}
rc=$?
if compgen -G '*.gcda' >/dev/null; then
    gcov --json-format --stdout {source} >.codegym-gcov.json 2>/dev/null && mv .codegym-gcov.json {out}
fi
exit $rc
"""


class Gcov:
    """gcc's instrumentation, compiled and reported inside a ``bash`` run (see the module's docstring)."""

    def __init__(self, language: Language) -> None:
        assert language.compile is not None
        self.language = language
        argv = [a for a in language.compile if a != "-O2"]
        self.compile = [argv[0], "-O0", "--coverage", *argv[1:]]
        self.note = f"{language.name}: gcov of a build with {shlex.join(self.compile)}"

    def request(self, code: str, test: Test, function: str | None, limits: LimitsIn) -> ExecuteRequest:
        driver = DRIVER.format(
            compile=shlex.join(self.compile),
            run=shlex.join(self.language.run),
            source=shlex.quote(self.language.source),
            out=shlex.quote(OUT),
        )
        return ExecuteRequest(
            language="bash",
            code=driver,
            stdin=test.stdin,
            files={self.language.source: b64(code)},
            fetch_files=[OUT],
            limits=limits,
        )

    def read(self, code: str, response: ExecuteResponse) -> LineCoverage | str:
        data = fetched_json(response)
        if isinstance(data, str):
            return data
        try:
            assert isinstance(data, dict)
            (source,) = [f for f in data["files"] if f["file"] == self.language.source]
            counts: dict[int, int] = {}
            for line in source["lines"]:  # a line may be listed once per function on it (templates, inlines)
                n = int(line["line_number"])
                counts[n] = max(counts.get(n, 0), int(line["count"]))
        except (AssertionError, KeyError, TypeError, ValueError) as exc:
            return f"gcov's output is not what was expected ({type(exc).__name__})"
        return LineCoverage.from_counts(counts)
