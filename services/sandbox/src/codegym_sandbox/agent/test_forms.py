"""The forms assert tests come in besides plain statements, run as their own runners would: pytest's
test functions and unittest's cases, in the scope ``python main.py`` gives them (Python's ``__main__``).

Test code that only defines ``def test_add(): assert ...`` runs nothing by itself: judged as plain statements,
any program passed it. Test code that ends in ``unittest.main()`` loads its cases from ``sys.modules["__main__"]``
and ends with ``SystemExit``: judged in a scope of its own, it found no case and every program failed.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator

from . import program_names

_TESTS_FILE = "<tests>"  # the name the checker compiles the tests under (assert_runner.read_tests)


@contextlib.contextmanager
def as_main(module: types.ModuleType) -> Iterator[None]:
    """The tests' module as Python's ``__main__``, with the arguments ``python main.py`` has, while they run."""
    saved, argv = sys.modules.get("__main__"), sys.argv
    sys.modules["__main__"], sys.argv = module, ["main.py"]
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
        sys.argv = argv


def ended_well(exc: SystemExit) -> bool:
    """Whether the tests' own ``sys.exit`` (unittest's ``main`` ends with one) says they passed."""
    return exc.code is None or exc.code == 0 or exc.code is False


def run_uncalled(code: types.CodeType, scope: dict[str, object]) -> None:
    """Run what a test runner would find in the tests' scope once their code ran, and their code never ran
    itself: pytest's ``test*`` functions that the code never names, then unittest's cases (again, where the
    code ran them with ``unittest.main(exit=False)``, which fails nothing: a runner's own report is no verdict).
    An assertion of theirs that fails raises, as it would have in the code. A test
    function that takes arguments (pytest's fixtures) cannot be run here: its ``TypeError`` is the tests'
    error, never a pass."""
    named = program_names.loaded_names(code)
    uncalled = [
        value
        for name, value in scope.items()
        if name.startswith("test") and name not in named and isinstance(value, types.FunctionType)
    ]
    for function in uncalled:
        if function.__code__.co_filename == _TESTS_FILE:  # defined by the tests, not taken from the program
            function()
    unittest = sys.modules.get("unittest")
    if unittest is None:
        return
    cases = [
        value
        for value in scope.values()
        if isinstance(value, type) and issubclass(value, unittest.TestCase) and value.__module__ == "__main__"
    ]
    if not cases:
        return
    suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(case) for case in cases)
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=1).run(suite)
    if result.errors:
        raise RuntimeError(f"{len(result.errors)} of the tests' cases raised an error")
    if result.failures:
        raise AssertionError(f"{len(result.failures)} of the tests' cases failed")
