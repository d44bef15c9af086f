"""codegym's data tools on the evaluator's task library.

``transform``: semantics-preserving rewrites of reference solutions, each verified against the task's tests in
the sandbox (``verify``). ``mask``: fill-in-the-middle rows whose spans are drawn by complexity metrics.
``synthesize``: new problems from a model, kept when their tests pass the reference and kill its mutants.
``tester``: a program's tests with line coverage (``Tester(url).run(language, code, tests)``).
``codegym-data`` is the command line.
"""

from __future__ import annotations

__all__: list[str] = []
