"""A container's box empties the scratch directory between runs, the checker's ``solution.py`` too.

The box there accesses files as the programs' uid, with no capability but those to change ids: what a program left
is its own, and goes; the file the checker wrote (the program's text, ``agent/program_file.py``) is root's, in the
root's directory with the sticky bit, which the programs' uid cannot remove. Left there, it would be the next run's,
whatever that run is. Run in a child made as the container's box is, on a directory of its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from codegym_sandbox.agent import isolation, linux

PROGRAM_UID = 61_234


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory the programs' uid can reach (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="wiped-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, as a container's agent is")
def test_a_containers_box_removes_the_checkers_file(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch, shm = place / "box", place / "shm"
    for path in (scratch, shm):
        path.mkdir()
        path.chmod(0o1777)
    monkeypatch.setattr(isolation, "SCRATCH", str(scratch))
    monkeypatch.setattr(isolation, "SHM", str(shm))
    (scratch / "solution.py").write_text("def f():\n    return 1\n")
    (scratch / "solution.py").chmod(0o444)
    os.mkdir(scratch / "left", 0o700)
    (scratch / "left" / "file").write_text("x")
    (scratch / "own").write_text("x")
    for path in (scratch / "left", scratch / "left" / "file", scratch / "own"):
        os.chown(path, PROGRAM_UID, PROGRAM_UID)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            linux.set_file_ids(PROGRAM_UID, PROGRAM_UID)
            linux.drop_capabilities(keep=(linux.CAP_SETUID, linux.CAP_SETGID))
            isolation.WipedScratch(PROGRAM_UID, PROGRAM_UID, ipc=False).swap()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert os.listdir(scratch) == []
