"""What the checker reads from the program's text as looked up when it runs, and what it calls replaced."""

from __future__ import annotations

import builtins
import time
import types
from unittest import mock

from codegym_sandbox.agent import patched_modules
from codegym_sandbox.agent.patched_modules import OwnBuiltins, Watch, reads

PROGRAM = """\
import os
import xml.etree.ElementTree as ET
from time import sleep
from os import path

def f(xs, input):
    from random import randint
    import json
    total = sorted(xs)
    print(len(total), input)
    return os.path.exists('x'), path.join('a'), ET.fromstring, sys.argv, sleep
"""


def test_the_program_looks_up_what_its_functions_name_as_they_run() -> None:
    read = reads(PROGRAM)
    # Builtins it names and never binds; print is carried; a name it binds (its argument) is its own.
    assert read.builtins == {"sorted", "len", "__import__"}
    assert ("os", ("path", "exists")) in read.paths
    assert ("os.path", ("join",)) in read.paths  # from a submodule it imported at top level: its attributes
    assert ("xml.etree.ElementTree", ("fromstring",)) in read.paths
    assert ("random", ("randint",)) in read.paths  # imported as the function runs
    assert not any(root == "time" for root, _ in read.paths)  # bound before any test: the real one, as in one process
    assert read.modules == {"os", "xml", "time", "random", "json"}
    assert reads("def f(:\n") == patched_modules.NOTHING


def test_a_replaced_builtin_or_module_function_is_named_and_a_carried_one_is_not() -> None:
    program = "import time, sys, builtins\n\ndef f(xs):\n    time.sleep(0)\n    sys.argv\n    builtins.input('?')\n"
    watch = Watch(reads(program + "    return sorted(xs)\n"))
    assert watch.replaced() is None
    with mock.patch("time.sleep"):
        assert watch.replaced() == "time.sleep"
    with mock.patch.object(builtins, "sorted"):
        assert watch.replaced() == "builtins.sorted"
    with mock.patch("sys.argv", ["x"]), mock.patch("builtins.print"), mock.patch("builtins.input"):
        assert watch.replaced() is None
    assert watch.replaced() is None and time.sleep is not None


def test_the_checkers_own_code_has_pythons_builtins_and_the_tests_theirs_back() -> None:
    own = OwnBuiltins()  # counts the changes of this process's builtins from here on (a checker's, in a run)
    try:
        own.own()
        assert own.changed == {} and own.seen >= 0  # none: later calls need not look again
        with mock.patch("builtins.sorted", side_effect=AssertionError("no sorted")) as patched:
            own.own()
            try:
                assert sorted([2, 1]) == [1, 2]
            finally:
                own.theirs()
            assert builtins.sorted is patched
        own.own()
        assert own.changed == {} and builtins.sorted([2, 1]) == [1, 2]
    finally:
        builtins.__class__ = types.ModuleType


def test_a_plain_alias_of_a_module_is_followed_and_other_roads_make_every_patch_count() -> None:
    # ``t = time``, ``p = os.path``, ``s = sorted``, ``sleep = time.sleep``: what they hold is read as used.
    program = "import os, time\nt = time\np = os.path\ns = sorted\nsleep = time.sleep\n\ndef f(x):\n"
    read = reads(program + "    t.time()\n    sleep(0)\n    return p.exists(x), s(x)\n")
    assert not read.anything and "sorted" in read.builtins
    assert {("time", ("time",)), ("os.path", ("exists",)), ("time", ("sleep",))} <= read.paths
    roads = [
        "def f(x):\n    return __import__('time').time()\n",
        "import importlib\n\ndef f(x):\n    return importlib.import_module('time').time()\n",
        "import sys\n\ndef f(x):\n    return sys.modules['time'].time()\n",
        "import time\n\nclass C:\n    clock = time\n\ndef f(x):\n    return C.clock.time()\n",
        "import time\n\ndef f(x, m=time):\n    return m.time()\n",
        "import time\n\ndef f(x):\n    return getattr(time, 'ti' + 'me')()\n",
    ]
    for program in roads:
        watch = Watch(reads(program))
        assert reads(program).anything, program
        assert watch.replaced() is None
        with mock.patch("time.monotonic_ns", side_effect=AssertionError("no clocks")):
            assert watch.replaced() == "time.monotonic_ns", program
        with mock.patch.object(builtins, "sorted"):
            assert watch.replaced() == "builtins.sorted", program
        with mock.patch.dict("sys.modules", {"json": types.ModuleType("json")}):
            assert watch.replaced() == "sys.modules['json']", program
        assert watch.replaced() is None


class _Touchy:
    """A value whose every look runs code: a deprecated object, a lazy proxy."""

    looked = 0

    def __getattribute__(self, name: str) -> object:
        _Touchy.looked += 1
        raise FutureWarning(f"{name} is deprecated")


def test_the_sweep_asks_values_their_type_and_runs_none_of_their_code() -> None:
    # A module the tests import holds an object whose attribute reads warn (an error under the tests' filter), and
    # ``sys.modules`` holds a non-module of the same kind: the sweep names what was replaced and touches neither.
    touchy = types.ModuleType("touchy")
    touchy.value = _Touchy()  # type: ignore[attr-defined]
    watch = Watch(reads("def f(x):\n    return __import__('time').time()\n"))
    with mock.patch.dict("sys.modules", {"touchy": touchy, "touchy_proxy": _Touchy()}):
        assert watch.replaced() is None
        with mock.patch.object(touchy, "value", _Touchy()):
            assert watch.replaced() is None  # an object, not a routine, swapped for another: no lookup of it
        with mock.patch.object(touchy, "value", mock.MagicMock()):
            assert watch.replaced() == "touchy.value"
        with mock.patch.dict("sys.modules", {"fake_json": mock.MagicMock()}):
            assert watch.replaced() == "sys.modules['fake_json']"
    assert _Touchy.looked == 0


def test_a_module_the_tests_swap_in_sys_modules_is_replaced_for_a_program_that_imports_it() -> None:
    watch = Watch(reads("def f(x):\n    import json\n    return json.dumps(x)\n"))
    assert watch.replaced() is None
    with mock.patch.dict("sys.modules", {"json": types.ModuleType("json")}):
        assert watch.replaced() == "sys.modules['json']"
    assert watch.replaced() is None


def test_the_loggers_the_program_names_are_read_and_a_computed_one_is_any() -> None:
    assert reads("import logging\nlog = logging.getLogger('app.db')\n").loggers == {"", "app.db"}
    assert reads("import logging\nlog = logging.getLogger(__name__)\n").loggers == {"", "__main__", "solution"}
    assert reads("import logging\nlogging.info('x')\n").loggers == {""}
    assert reads("import logging\nname = 'a'\nlog = logging.getLogger(name)\n").loggers is None
    assert reads("import logging\nlog = logging.getLogger('a').getChild('b')\n").loggers is None
    assert reads("log = __import__('logging').getLogger('a')\n").loggers is None
