"""What a run's files cost the kernel on the tmpfs that holds them: the one count of it, and the tmpfs's bound.

A tmpfs holds a file's data in whole pages, and for every file and every directory an inode and a dentry
(about a KiB of the kernel's memory, never reclaimed while the file is there). A request's files are written by
the agent, whose memory is no run's: their names alone (each component a directory) could make hundreds of
thousands of inodes from a body of a few hundred KB. So the server counts what they cost (:func:`files_cost`)
against the memory limit of the run or session they are for before it takes them, and bounds the directories
their names may make (:data:`MAX_DIRS`); and every tmpfs the agent mounts for a run holds at most one inode per
page of its size, and 16,384 at least (:func:`tmpfs_options`), whoever writes there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

PAGE_BYTES = 4096
INODE_BYTES = 1024  # a tmpfs inode and its dentry, about (a long name's dentry holds more)
# The directories a request's file names may make, all together: a project's tree of a few hundred is well
# within it; each costs the agent a mkdir and the kernel an inode, counted by nobody but here.
MAX_DIRS = 1024
# The fewest inodes a tmpfs of the box holds, however small its size: a request's files (4,096 at most,
# ``models.MAX_FILES``) and their directories, and more than a session a fork copies may hold (10,000 files:
# one with more is refused its fork, ``agent/copy_tree.py``, not stopped short of making them).
_MIN_INODES = 16384


def directories(names: Iterable[str], most: int | None = None) -> int:
    """How many directories ``names`` (``/``-separated, relative to the scratch directory) make: their distinct
    proper prefixes. Counted in time linear in the names' length (a prefix is a parent's number and a part, never
    a string of its own); past ``most``, counting stops at ``most + 1``."""
    made: dict[tuple[int, str], int] = {}
    for name in names:
        parent = 0
        for part in name.split("/")[:-1]:
            parent = made.setdefault((parent, part), len(made) + 1)
            if most is not None and len(made) > most:
                return len(made)
    return len(made)


def files_cost(files: Mapping[str, bytes]) -> int:
    """What ``files`` (name: contents) cost the kernel on a tmpfs, in bytes: their contents in whole pages, and an
    inode for each file and each directory their names make."""
    pages = sum(-(-len(data) // PAGE_BYTES) for data in files.values())
    return pages * PAGE_BYTES + INODE_BYTES * (len(files) + directories(files))


def over_memory(files: Mapping[str, bytes], memory_mb: int, whose: str) -> str | None:
    """Why ``files`` cannot be held within the memory limit of the run or session they are for (``whose``: "the
    run's", "the session's"), or None."""
    cost = files_cost(files)
    if cost <= memory_mb << 20:
        return None
    return (
        f"{whose} files cost {cost} bytes of memory (their contents in whole pages, and {INODE_BYTES} bytes for "
        f"each file and each directory their names make), past its memory limit of {memory_mb} MiB"
    )


def tmpfs_options(size_bytes: int) -> str:
    """The size of a tmpfs of the box and its bound on inodes: one per page of its size, so that what its inodes
    and dentries hold stays in proportion to it (the kernel's default is half the host's pages). The kernel counts
    its files' extended attributes against the same bound (a KiB an inode, the rest for them)."""
    return f"size={size_bytes},nr_inodes={max(size_bytes // PAGE_BYTES, _MIN_INODES)}"
