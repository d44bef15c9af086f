"""Tests of a program in the codegym sandbox, with the line coverage of each (``codegym-data test``).

``Tester(url).run(language, code, tests)`` answers a :class:`TestReport`: the sandbox judge's verdict per
test, and, for Python, C, C++ and JavaScript, the lines each test ran and the union over all of them.
"""

from __future__ import annotations

from .report import LineCoverage, TestReport, TestResult
from .tester import INSTRUMENTS, Tester, TesterError, as_test

__all__ = ["INSTRUMENTS", "LineCoverage", "TestReport", "TestResult", "Tester", "TesterError", "as_test"]
