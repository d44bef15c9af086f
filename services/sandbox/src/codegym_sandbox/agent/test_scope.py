"""The scope assert tests run in, as ``python main.py`` would give it: their module as Python's ``__main__``, with
that command's arguments; and in tests that use pytest, ``pytest.main()`` answering that it passed, running nothing,
and ``unittest.main()`` running nothing (the checker collects the tests itself, as pytest: ``test_forms.py``)."""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from collections.abc import Iterator
from typing import Any

from . import program_names


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


@contextlib.contextmanager
def no_runner_main(code: types.CodeType) -> Iterator[None]:
    """In tests that use pytest, ``pytest.main()`` (``if __name__ == "__main__": pytest.main([__file__])``) answers
    0 and runs nothing, and so does ``unittest.main()``: collection here runs their tests, as pytest, whose tests
    they are. pytest itself would read a ``conftest.py`` from the directory the program writes to, and run it in the
    checker; and it never runs their ``unittest.main()`` (their module is no ``__main__`` there), but their cases, in
    its fixtures and under its marks, which unittest's own runner knows nothing of. Elsewhere ``unittest.main()`` runs
    as it is, and the exit it ends with is known as its own (:func:`ran_main`): only that one says the cases ran."""
    pytest: Any = None
    if "pytest" in program_names.used_names(code):
        # None here: the tests' own import of it fails as it would in Python, if they make one.
        with contextlib.suppress(ImportError):
            pytest = importlib.import_module("pytest")
    if pytest is None:
        if "main" not in program_names.used_names(code):
            yield
            return
        unittest: Any = importlib.import_module("unittest")  # its main() wrapped before the tests import it
        real = unittest.main

        def main(*args: Any, **kwargs: Any) -> Any:
            try:
                return real(*args, **kwargs)
            except SystemExit as exc:
                _MAIN_EXITS.append(exc)
                raise

        unittest.main = main
        try:
            yield
        finally:
            unittest.main = real
        return
    unittest = importlib.import_module("unittest")
    mains = pytest.main, unittest.main
    pytest.main, unittest.main = (lambda *args, **kwargs: 0), (lambda *args, **kwargs: None)
    try:
        yield
    finally:
        pytest.main, unittest.main = mains


# The exits ``unittest.main()`` itself ended the tests with, having run their cases: no other exit of the tests
# (``sys.exit(0)`` after a runner of their own, or none) says their cases ran (a run's judge is its own fork).
_MAIN_EXITS: list[BaseException] = []


def ran_main(exc: BaseException) -> bool:
    """Whether ``exc`` is the exit ``unittest.main()`` ended the tests with, once it ran their cases."""
    return any(exc is known for known in _MAIN_EXITS)
