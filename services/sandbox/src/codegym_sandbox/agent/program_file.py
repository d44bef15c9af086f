"""The program's text as a file, where the reference layout has it: ``solution.py`` (``program_module.FILE``) in the
run's directory, beside the tests that import it as the module ``solution``.

Test files written for that layout read the file as well as the module (source constraints such as ``'sorted' not in
open('solution.py').read()``). The checker writes it, before the program's process has the program, as a file of its
own uid, read-only: the run's directory belongs to the supervisors' uid with the sticky bit (``isolation.Scratch``; a
container's is root's, mode 1777), so a program of a uid of its own can neither write it, nor change its mode, nor
unlink it or rename another file over it, and what the tests read is the program's text, never a file the program
chose. Where the checker shares the program's uid (a run judged alone, or programs that share the supervisors' uid),
the program could still replace it, as it could any file of that uid.
"""

from __future__ import annotations

import contextlib
import os

from . import linux, program_bytes
from .program_module import FILE

MODE = 0o444


def _file_uid() -> int:
    """The uid this process accesses files as (a test series' checker: the programs', see ``test_series``)."""
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"Uid:"):
                return int(line.split()[4])  # real, effective, saved, file system
    return os.getuid()


def _write(data: bytes) -> None:
    """Write ``data`` as :data:`FILE` in the working directory, in place of any file of that name (a request's),
    whole or not at all: under a name of its own first, then renamed."""
    temp = f".{FILE}.{os.getpid()}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, MODE)  # whatever the umask took
        os.close(fd)
        fd = -1
        os.rename(temp, FILE)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    finally:
        if fd >= 0:
            os.close(fd)


def lay_out(source: str) -> None:
    """Write the program's text (``source``) as :data:`FILE` in the working directory, as this process's uid.

    A test series' checker accesses files as the programs' uid, which it cannot take back once it left it (it has
    no capability): a child of its own writes the file, as the checker's own uid. Where the file cannot be written,
    there is none, and a test that reads it fails as the tests would without it.
    """
    data = program_bytes.encode(source)
    with contextlib.suppress(OSError):
        if _file_uid() == os.getuid():
            _write(data)
            return
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                linux.set_file_ids(os.getuid(), os.getgid())
                _write(data)
                code = 0
            finally:
                os._exit(code)
        os.waitpid(pid, 0)
