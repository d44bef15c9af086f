"""The differential verdict report: codegym's routes against a plain reference, on a corpus of completions.

    . .venv/bin/activate
    python bench/verdict_diff.py       # every route; --routes, --forms, --url, --families, --by-family; --help

The corpus (``tests/differential/corpus.py``: small tasks, their completions in the stdin, call and assert
forms, each labelled honest-correct, honest-wrong or hack, with issue 31's families among them; and the embedded
model's answers to HumanEval, ``tests/differential/completions.py``, labelled model: the reference is their
truth) is judged by the plain reference (each test in a fresh process, no sandbox:
``tests/differential/reference.py``) and by every route of a codegym sandbox that can express an item
(``/v1/evaluate``, ``/run_code``, ``/submit``, ``/execute_batch``, ``/run_jupyter``, ``CodeReward`` in its
native and fusion modes, the evaluator's ``Scorer``: ``tests/differential/routes.py``). A sandbox server is
started here on loopback (local backend) unless ``--url`` names one.

Prints a markdown table, one row per route: the honest items it judged otherwise than the reference (right
judged wrong, wrong judged right), the hacks it passed, and the items it did not judge (SE), each cell with
its count and its first item ids; then the git HEAD it ran at and the seconds each part took. The first row
checks the corpus itself (the reference against the labels; hacks that fool a plain harness show there).
``--families`` adds, per cell, the disagreeing forms and variants with the number of tasks each hit;
``--by-family`` adds the same table split by family (issue 31's 1-9, ``model``, ``earlier``), with counts.
Family 9 (judged twice across time windows) and the generative layer are tests of their own
(``tests/differential/test_repeats.py``, ``test_generative.py``), not part of this table.
Exits 1 when any route disagrees.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import codegym_sandbox  # noqa: E402
from codegym_evaluator.servers import sandbox_server  # noqa: E402
from differential.corpus import FORMS, items  # noqa: E402
from differential.report import by_family, families, markdown  # noqa: E402
from differential.routes import ROUTES  # noqa: E402
from differential.run import Run, run  # noqa: E402


def _head() -> str:
    """The checkout's HEAD, or where the services were imported from when that is elsewhere (PYTHONPATH)."""
    services = Path(codegym_sandbox.__file__).resolve().parents[4]
    if services != ROOT:
        return f"the services of {services} (PYTHONPATH)"
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "services"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return done.stdout.strip() + (" (services/ has uncommitted changes)" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="a running sandbox server (default: start one here on loopback)")
    p.add_argument(
        "--routes",
        nargs="+",
        choices=list(ROUTES),
        metavar="ROUTE",
        help=f"routes to run (default: all of {', '.join(ROUTES)})",
    )
    p.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS), help="test forms of the corpus to run")
    p.add_argument("--workers", type=int, default=None, help="reference processes at a time (default: one per CPU)")
    p.add_argument("--families", action="store_true", help="list the disagreeing forms/variants of every cell")
    p.add_argument("--by-family", action="store_true", help="the table again, each route's row split by family")
    args = p.parse_args(argv)

    chosen = [i for i in items() if i.form in args.forms]
    if args.url:
        result = run(args.url, chosen, args.routes, args.workers)
    else:
        with sandbox_server() as server:
            result = run(server.url, chosen, args.routes, args.workers)
    rows = result.rows(chosen)
    print(markdown(rows))
    print(f"\n{len(chosen)} items at {_head()}; seconds: {_seconds(result)}")
    if args.by_family:
        print("\n" + by_family(rows, chosen, result.verdicts))
    if args.families:
        for (route, cell), kinds in families(rows).items():
            print(f"\n{route} / {cell}:\n  " + "\n  ".join(kinds))
    return 1 if any(r.disagreements for r in rows[1:]) else 0


def _seconds(result: Run) -> str:
    return ", ".join(f"{name} {s:.1f}" for name, s in result.seconds.items())


if __name__ == "__main__":
    sys.exit(main())
