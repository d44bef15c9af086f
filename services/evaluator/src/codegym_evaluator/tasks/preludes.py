"""What a dataset's own harness runs before every program: its imports and its process settings.

lcb_runner puts its import prelude before every LiveCodeBench program, stdin or functional (star imports of
eighteen modules, the modules by name, a recursion limit of 50000), in a process that reads integers of up to
50000 digits. APPS's and TACO's ``testing_util`` put theirs before both kinds of program (``deque``, ``gcd``,
``lru_cache``, ``List`` unimported are found there), on Pythons that had no limit on an integer's digits. So a
right program that leans on them is right there, and codegym runs it after the same lines (``tasks.rules``:
``JudgingRule.prelude``; the adapters make it the task's starter code). None of it can pass a program that
did not solve the problem: what a program can import or set itself.

Two parts are left out. APPS's ``import numpy as np``: numpy may not be installed where programs run, and a
prelude that fails to import fails every program. And the prelude never goes before a call test's program
(a function looked up by its name): a Codewars kata named ``gcd`` would be answered by ``math.gcd`` for a
program that defines nothing.
"""

from __future__ import annotations

import builtins
from functools import cache


def _digits(limit: int) -> str:
    """The line that lets a program convert integers of up to ``limit`` digits (0: any), on a Python that has the
    limit (3.11 on; 3.10 has none)."""
    return f'if hasattr(sys, "set_int_max_str_digits"):\n    sys.set_int_max_str_digits({limit})\n'


_LCB_STAR = [
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "io",
    "sys",
    "json",
    "builtins",
    "typing",
]

LIVECODEBENCH = (
    "".join(f"from {module} import *\n" for module in _LCB_STAR)
    + "".join(f"import {module}\n" for module in _LCB_STAR if module not in ("builtins", "typing"))
    + "sys.setrecursionlimit(50000)\n"
    + _digits(50000)
)
"""lcb_runner's import prelude and recursion limit, and the integer digits its process reads."""

APPS = (
    "import sys\nimport time\nimport itertools\nfrom itertools import accumulate, product, permutations, combinations\n"
    "import collections\nfrom collections import Counter, OrderedDict, deque, defaultdict, ChainMap\n"
    "from functools import lru_cache\nimport math\n"
    "from math import sqrt, sin, cos, tan, ceil, fabs, floor, gcd, exp, log, log2\n"
    "import fractions\nfrom typing import List, Tuple\nimport random\nimport heapq\nfrom heapq import *\n" + _digits(0)
)
"""APPS's (and TACO's) ``testing_util`` prelude, numpy aside, and no limit on an integer's digits."""


@cache
def binds(prelude: str, name: str) -> bool:
    """Whether ``name`` is a builtin's, or one that ``prelude``'s imports bind (run here on their own, its
    process settings aside): a program that defines nothing of that name still has it."""
    if hasattr(builtins, name):
        return True
    scope: dict[str, object] = {}
    exec("".join(line for line in prelude.splitlines(keepends=True) if line.startswith(("import ", "from "))), scope)
    return name in scope
