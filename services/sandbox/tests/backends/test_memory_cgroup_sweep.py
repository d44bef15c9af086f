"""A worker's memory cgroup is removed only once its agent is gone.

Every server on a host shares the cgroups' parent, and every agent that starts sweeps it. A live worker's
cgroup is empty while its box starts again (a run can make that happen): swept then, the worker's every later run
held memory without a bound (a run of 64 MiB held 1 GiB of socket buffers, and passed).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from codegym_sandbox.agent.memory_cgroup import MemoryCgroup


def test_a_cgroup_is_swept_only_once_its_agent_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    live, dead = tmp_path / f"worker-{os.getpid()}-aa", tmp_path / f"worker-{gone.pid}-bb"
    young = tmp_path / f"worker-{gone.pid}-cc"
    for folder in (live, dead, young):
        (folder / "run").mkdir(parents=True)  # the runs' cgroup inside it (run_cgroup.py)
        (folder / MemoryCgroup.NESTED / "run").mkdir(parents=True)  # its session's continuation's, and its runs'
    old = time.time() - 2 * MemoryCgroup.STALE_S
    for folder in (live, dead):
        os.utime(folder, (old, old))
    MemoryCgroup._sweep(str(tmp_path))
    assert live.exists() and young.exists() and not dead.exists()


def test_a_forked_sessions_continuation_is_bounded_with_what_the_worker_holds() -> None:
    """The copy that continues a worker's session after a fork goes in a cgroup inside the worker's (cgroup v1):
    what the session held before stays charged to the worker's, whose limit bounds both together. Its copies'
    own cgroups are made beside the worker's, not inside it (their memory is theirs, not the session's)."""
    made = MemoryCgroup.create()
    assert made is not None
    try:
        made.hold_to(96 << 20)
        nested = made.nested(64 << 20)
        if made.version != 1:
            assert nested is None  # v2: the worker's holds the box (kept_memory makes one beside, with its room)
            return
        assert nested is not None
        root = f"/sys/fs/cgroup/memory/{MemoryCgroup.PARENT}/{made.name}"
        with open(f"{root}/memory.use_hierarchy") as f:
            assert f.read().strip() == "1"
        with open(f"{root}/{MemoryCgroup.NESTED}/memory.limit_in_bytes") as f:
            assert int(f.read()) == 64 << 20
        assert 0 <= nested.usage() <= made.usage()
        copy = nested.sibling()
        assert copy is not None
        assert os.path.isdir(f"/sys/fs/cgroup/memory/{MemoryCgroup.PARENT}/{copy.name}")
        copy.remove()
    finally:
        made.remove()  # its nested one first
    assert not os.path.exists(f"/sys/fs/cgroup/memory/{MemoryCgroup.PARENT}/{made.name}")


@pytest.mark.parametrize("refusal", [errno.ENOSPC, errno.ENOMEM])
def test_a_worker_whose_memory_cgroup_the_kernel_refuses_does_not_start(
    monkeypatch: pytest.MonkeyPatch, refusal: int
) -> None:
    """Where the host has a memory controller and refuses one more cgroup (its ids all taken), the worker does not
    start: it started without one before, and its runs held kernel memory nothing bounded."""
    made = MemoryCgroup.create()  # the tests run as root, on a host with a memory controller
    assert made is not None
    made.remove()

    def refused(path: str, *args: object, **kwargs: object) -> None:
        raise OSError(refusal, os.strerror(refusal), path)

    monkeypatch.setattr(os, "mkdir", refused)
    with pytest.raises(OSError, match="no memory cgroup for this worker"):
        MemoryCgroup.create()


def test_where_no_cgroup_may_be_written_the_worker_starts_without_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container's read-only cgroup tree: the container's own limit bounds the worker."""

    def read_only(path: str, *args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)

    monkeypatch.setattr(os, "mkdir", read_only)
    monkeypatch.setattr(os, "makedirs", read_only)
    assert MemoryCgroup.create() is None


def test_a_cgroup_gives_back_its_page_cache_before_it_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Page cache its runs read first stays charged to a removed cgroup, which then holds one of the kernel's
    65,535 memory cgroup ids for as long as the pages stay: one more for every worker or session replaced."""
    made = MemoryCgroup.create()
    assert made is not None
    root = "/sys/fs/cgroup/memory" if made.version == 1 else "/sys/fs/cgroup"
    where = f"{root}/{MemoryCgroup.PARENT}/{made.name}"
    usage = "memory.usage_in_bytes" if made.version == 1 else "memory.current"
    data = tmp_path / "data"
    data.write_bytes(os.urandom(16 << 20))
    with open(data, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)  # read anew, by the child, into its cgroup
    reader = f"open({where + '/cgroup.procs'!r}, 'w').write('0')\nopen({str(data)!r}, 'rb').read()\n"
    subprocess.run([sys.executable, "-c", reader], check=True)
    with open(f"{where}/{usage}") as f:
        assert int(f.read()) >= 8 << 20  # the file's pages, charged here
    at_removal = []
    real_rmdir = os.rmdir

    def rmdir(path: str, *args: object, **kwargs: object) -> None:
        if path == made.name:
            with open(f"{where}/{usage}") as f:
                at_removal.append(int(f.read()))
        real_rmdir(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rmdir", rmdir)
    made.remove()
    assert at_removal and at_removal[0] < 1 << 20, at_removal
    assert not os.path.exists(where)


def test_what_a_cgroup_holds_leaves_its_page_cache_out(tmp_path: Path) -> None:
    """What a session holds at a fork bounds its continuation's room (``copy_lineage.kept_memory``): page cache,
    which the kernel takes back under the limit (a container's holds its image's files), must not shrink it."""
    made = MemoryCgroup.create()
    assert made is not None
    root = "/sys/fs/cgroup/memory" if made.version == 1 else "/sys/fs/cgroup"
    procs = f"{root}/{MemoryCgroup.PARENT}/{made.name}/cgroup.procs"
    data = tmp_path / "data"
    data.write_bytes(os.urandom(32 << 20))
    with open(data, "rb") as f:
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)  # read anew, by the child, into its cgroup
    holder = (
        f"open({procs!r}, 'w').write('0')\nopen({str(data)!r}, 'rb').read()\n"
        "import sys\nheld = bytearray(24 << 20)\nheld[::4096] = b'\\1' * (len(held) // 4096)\n"
        "print('ready', flush=True)\nsys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        assert 20 << 20 <= made.usage() < 48 << 20  # the 24 MiB it holds, and the interpreter; not the 32 of cache
    finally:
        child.communicate(b"")
        made.remove()
