"""The scope assert tests run in, as ``python main.py`` would give it: their module as Python's ``__main__``, with
that command's arguments; with ``unittest.main()`` running nothing, and in tests that use pytest, ``pytest.main()``
answering that it passed, running nothing (the checker collects the tests itself, as pytest: ``test_forms.py``)."""

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
    """``unittest.main()`` runs nothing, and in tests that use pytest, ``pytest.main()`` (``if __name__ ==
    "__main__": pytest.main([__file__])``) answers 0 and runs nothing: collection here runs their tests, as pytest,
    every case of them. unittest's own runner runs what it selects (``defaultTest``, its arguments, a module's
    ``load_tests``), which pytest never reads: its exit once stood for every case, and a wrong program passed on the
    cases it left out. pytest itself would read a ``conftest.py`` from the directory the program writes to, and
    run it in the checker; and it never runs their ``unittest.main()`` (their module is no ``__main__`` there), but
    their cases, in its fixtures and under its marks, which unittest's own runner knows nothing of."""
    pytest: Any = None
    if "pytest" in program_names.used_names(code):
        # None here: the tests' own import of it fails as it would in Python, if they make one.
        with contextlib.suppress(ImportError):
            pytest = importlib.import_module("pytest")
    if pytest is None and "main" not in program_names.used_names(code):
        yield
        return
    unittest: Any = importlib.import_module("unittest")  # its main() replaced before the tests import it
    saved = getattr(pytest, "main", None), unittest.main
    if pytest is not None:
        pytest.main = lambda *args, **kwargs: 0
    unittest.main = lambda *args, **kwargs: None
    try:
        yield
    finally:
        if pytest is not None:
            pytest.main = saved[0]
        unittest.main = saved[1]
