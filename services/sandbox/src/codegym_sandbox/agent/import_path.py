"""The import path of a process that judges programs of its own run: nothing on it that a program can write.

A notebook kernel runs a reward script that starts the model's program (open-r1's ``python3 -c code``) in
the same scratch directory, as the same uid, and imports modules after it ran: a module the program wrote
there (``json.py``, ``difflib.py``, a package) would run in the judge, with the tests and the answers in its
reach. ``python3 -I`` keeps the script's directory and the working directory off the path; this does the
same for a process that already runs, whatever put such entries there (``''``, a relative entry, the
directory of its main script), by the one rule that covers them all: what this process may write to, a
program of its run may too, so it is no place to import from.
"""

from __future__ import annotations

import importlib
import os
import sys


def _writable(entry: str) -> bool:
    """Whether this process could put a module at ``entry`` (a directory or a zip archive), or the nearest
    directory above it that exists (where it could make one)."""
    path = os.path.abspath(entry or os.curdir)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    if os.path.isdir(path):
        return os.access(path, os.W_OK)
    return os.access(path, os.W_OK) or os.access(os.path.dirname(path), os.W_OK)


def isolate() -> None:
    """Drop every entry of ``sys.path`` this process could write to, and forget what was found there."""
    sys.path[:] = [entry for entry in sys.path if not _writable(entry)]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()


def guard(place: str) -> None:
    """From now on, this process runs no code of a file under ``place`` (its run's directory, which the program
    writes): an import of one is refused, whatever put its directory on the path (the tests'
    ``monkeypatch.syspath_prepend(tmp_path)``), and so is a file the tests load themselves
    (``spec_from_file_location``). An audit hook, which nothing this process runs later can take away."""
    root = os.path.abspath(place) + os.sep

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event == "exec" and args:
            where = getattr(args[0], "co_filename", "")
        elif event == "compile" and len(args) > 1:
            where = args[1]
        else:
            return
        if isinstance(where, bytes):
            where = os.fsdecode(where)
        # A name in brackets is no file (``<tests>``, ``<string>``); any other, relative too, is one.
        if isinstance(where, str) and not where.startswith("<") and os.path.abspath(where).startswith(root):
            raise ImportError(f"{where} is in the run's directory, which the program writes: none of it runs here")

    sys.addaudithook(hook)
