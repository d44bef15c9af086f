"""Room for values nested as deep as python3 itself compares them.

The plain-data codec (``plain_data``) and a call test's comparison (``call_test``) walk a value in Python, a few
frames for each level of nesting, where the interpreter's own ``==``, ``repr`` and ``json`` take about one: under the
default recursion limit a returned ``[[[...]]]`` some 300 levels deep was a RecursionError of the judge's own code,
and the program's RE, where a plain harness compares it. A function marked :func:`deep` runs with the limit raised by
:data:`ROOM`, once for its outermost call (its own recursion, and the marked functions it calls, run within it), and
put back when it returns: what the program computes, and what the tests' code sees, keep the limit they set.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])

LEVELS = 1000  # how deep python3's own == reaches under its default recursion limit
FRAMES = 4  # the codec's frames for each level at most: the marked function, its helper, a comprehension
ROOM = LEVELS * FRAMES
# The interpreter's own, taken as the agent loads: in a program's process, sys's are the runner's (``pyrun.enter``).
_get_limit, _set_limit = sys.getrecursionlimit, sys.setrecursionlimit
_within = [False]


def deep(function: F) -> F:
    """``function``, run with :data:`ROOM` more frames than the limit allows where it is called."""

    @functools.wraps(function)
    def within(*args: Any, **kwargs: Any) -> Any:
        if _within[0]:
            return function(*args, **kwargs)
        limit = _get_limit()
        _set_limit(limit + ROOM)
        _within[0] = True
        try:
            return function(*args, **kwargs)
        finally:
            _within[0] = False
            _set_limit(limit)

    return cast(F, within)
