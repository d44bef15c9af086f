"""codegym's data tools on the evaluator's task library.

``transform``: semantics-preserving rewrites of reference solutions, each verified against the task's tests in
the sandbox (``verify``). ``codegym-data`` is the command line.
"""

from __future__ import annotations

__all__: list[str] = []
