"""Which uids the container backends' programs run as, and whether the host already has them.

The programs of worker slot N run as the uid and gid of ``container_user`` plus N (``agent/isolation.py``).
Where the engine gives a container no user namespace (docker's default, rootful podman) these are the host's
own uids, and the kernel's counts per user (pipe pages, epoll watches, ``RLIMIT_NPROC``'s processes) are shared
with whatever else on the host has them. Distributions give regular users 1000 up and directory services (LDAP,
HPC sites) tens of thousands more, so there the default is a range far past those, as the local backend's
``host_uid``; and the server refuses to start where a uid of the range is a user of the host or owns one of its
processes (:func:`refusal`). Where the engine maps a container's ids into subordinate ones (rootless podman,
docker's ``userns-remap``, podman's ``--userns``), the map is usually 65536 ids from 0, in which such a uid does not
exist: the default is then 1000, the runtime image's user, which the map makes a subordinate id of the engine's user.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import subprocess
import tempfile
from collections.abc import Callable

from ..config import Settings

# The first uid and gid where container ids are host ids: past the ranges distributions and directory services
# allocate, and apart from the local backend's (``host_uid``, 1.5e9) so that the two may share a host.
HOST_FIRST = 1_700_000_000
# The first where the engine maps container ids: the runtime image's user, within any subordinate range.
MAPPED_FIRST = 1000
# How many in-use uids a refusal names: the first few say what to fix.
NAMED = 4


def engine_maps_ids(kind: str, settings: Settings) -> bool:
    """Whether the engine of ``kind`` (docker, podman, podman-hpc) gives containers a user namespace of its own,
    so that their uids are not the host's: docker with ``userns-remap``; podman rootless or with ``--userns``."""
    if kind == "docker":
        import docker

        try:
            client = docker.from_env(timeout=60)
            try:
                options = client.info().get("SecurityOptions") or []
            finally:
                client.close()
        except Exception:
            return False  # docker's default; the backend's start says why the engine does not answer
        return any("name=userns" in option for option in options)
    if any(arg.startswith("--userns") and arg not in ("--userns=host", "--userns=") for arg in settings.podman_args):
        return True
    binary = settings.podman_binary or kind
    try:
        done = subprocess.run([binary, "info", "--format", "json"], capture_output=True, text=True, timeout=60)
        return bool(json.loads(done.stdout)["host"]["security"]["rootless"])
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        # podman run by anyone but root is rootless.
        return os.geteuid() != 0


def container_user(settings: Settings, mapped: bool) -> str:
    """``uid:gid`` of slot 0's programs: the ``container_user`` setting, else the default for ``mapped``
    (whether the engine maps container ids, :func:`engine_maps_ids`)."""
    if settings.container_user:
        return settings.container_user
    first = MAPPED_FIRST if mapped else HOST_FIRST
    return f"{first}:{first}"


def in_use(uids: range, proc: str = "/proc") -> list[str]:
    """What on this host already has a uid of ``uids``: users (``getpwuid``, so directory services too) and
    processes (any of their real, effective, saved or file system uids). Seen from where the server runs: a
    server in a container of its own sees its container's users and processes, not the host's."""
    found = []
    for uid in uids:
        try:
            found.append(f"uid {uid} is the user {pwd.getpwuid(uid).pw_name}")
        except KeyError:
            pass
    try:
        pids = [name for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            with open(f"{proc}/{pid}/status") as f:
                lines = f.read().splitlines()
        except OSError:
            continue  # gone meanwhile
        fields = dict(line.partition(":")[::2] for line in lines)
        owners = {int(uid) for uid in fields.get("Uid", "").split()} & set(uids)
        if owners:
            found.append(f"uid {min(owners)} owns process {pid} ({fields.get('Name', '?').strip()})")
    return found


def refusal(uids: range, found: list[str], engine: str = "docker") -> str | None:
    """The message a server on ``engine`` (its command) prints before refusing to start with ``uids`` as its
    programs' host uids, or None to start (nothing else on the host has them)."""
    if not found:
        return None
    named = "; ".join(found[:NAMED]) + (f"; and {len(found) - NAMED} more" if len(found) > NAMED else "")
    return (
        f"the programs' host uids {uids[0]}..{uids[-1]} (CONTAINER_USER and one per worker slot) are in use on this "
        f"host: {named}. The engine gives containers no user namespace, so a program would share that user's "
        "kernel counts (pipe pages, processes) and the server does not start. To fix: set "
        "CODEGYM_SANDBOX_CONTAINER_USER to a uid:gid whose range no user or process of the host has (unset, it is "
        f"{HOST_FIRST}:{HOST_FIRST}; every sandbox server on the host needs a range of its own: what servers that "
        f"are gone left, {engine}'s containers of theirs, was removed before this check), or give the engine a user "
        "namespace (docker's userns-remap, rootless podman)."
    )


# What reserves a range: a lock per block of BLOCK uids (on a grid from HOST_FIRST, the same for every server), in
# the host's lock directory, held with ``flock`` for as long as the server runs programs as them; the kernel lets
# a lock go with the process, however it ends. A look at users and processes alone (:func:`in_use`) cannot tell two
# servers started at once apart: both found the range free, and each one's programs were the other's users.
BLOCK = 4096
LOCK_DIRS = ("/run/lock", tempfile.gettempdir())
MOVES = 64  # the ranges a server with the default tries, one after another, where another server holds one


class Reservation:
    """The locks a server holds on its programs' uids (:func:`reserve`), given back by :meth:`release`."""

    def __init__(self, held: list[tuple[str, int]]) -> None:
        self.held = held  # each lock file's path and the descriptor that holds its lock

    def release(self) -> None:
        for path, fd in self.held:
            # Removed while still locked, so that lock files do not pile up: one who opened it meanwhile finds, once
            # it has the lock, that the path is no longer its file, and tries again (_lock).
            with contextlib.suppress(OSError):
                os.unlink(path)
            with contextlib.suppress(OSError):
                os.close(fd)  # the lock goes with its last descriptor
        self.held = []


def _lock(path: str) -> int | None:
    """A descriptor holding the lock of the file at ``path``, or None where another holds it."""
    for _ in range(8):
        # Read-only: a lock file another user made (mode 0644) locks as well; flock asks for no write access.
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError:  # removed by its holder as it let it go: a new file at the path, tried again
            pass
        os.close(fd)
    return None


def _lock_dir() -> str | None:
    return next((d for d in LOCK_DIRS if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)), None)


def reserve(uids: range, where: str | None = None) -> Reservation | None:
    """Locks on every block ``uids`` touches, or None where another server on this host holds one of them (an
    empty reservation where the host has no lock directory this server may write: nothing to hold there)."""
    place = where or _lock_dir()
    if place is None:
        return Reservation([])
    held: list[tuple[str, int]] = []
    for block in range((uids[0] - HOST_FIRST) // BLOCK, (uids[-1] - HOST_FIRST) // BLOCK + 1):
        path = os.path.join(place, f"codegym-sandbox-uids-{block}.lock")
        try:
            fd = _lock(path)
        except OSError:
            fd = None
        if fd is None:
            Reservation(held).release()
            return None
        held.append((path, fd))
    return Reservation(held)


def take_range(
    uids: range, moves: bool, used: Callable[[range], list[str]], last: int, where: str | None = None
) -> tuple[range, Reservation] | list[str]:
    """The programs' uids a server takes, from ``uids`` on, and its reservation of them; or what stood in the way.
    ``moves``: the range is the default, and moves on by whole blocks past ranges another server holds or that
    ``used`` finds in use (users, processes: :func:`in_use`), up to :data:`MOVES` times; an explicit one does not.
    ``last``: the last uid there is."""
    span = -(-len(uids) // BLOCK) * BLOCK
    found: list[str] = []
    for move in range(MOVES if moves else 1):
        tried = range(uids[0] + move * span, uids[-1] + 1 + move * span)
        if tried[-1] > last:
            break
        held = reserve(tried, where)
        if held is None:
            found.append(
                f"uids {tried[0]}..{tried[-1]} are another sandbox server's on this host (it holds their lock)"
            )
            continue
        if not (in_range := used(tried)):
            return tried, held
        held.release()
        found += in_range
    return found
