"""Namespaces and mounts: the worker's view of the host, and the box each run happens in.

Layers, outermost first:

* worker (set up once by the agent): a user namespace, a network namespace with no interfaces up, and a
  mount namespace whose root holds the runtime made for programs and nothing else of the host: read-only,
  ``nosuid``, ``nodev`` overlays of ``/usr``, the interpreter, the toolchains and the runtime packages (each
  the worker's own, so that no lock on their files is seen by another worker), copies of a few ``/etc``
  files, and devices (see ``devices.py``);
* box (one pid namespace at a time, its init is the box process): a private ``/proc`` that shows a
  program only what it could trace, a read-only ``/tmp``, a devpts instance of its own, the scratch
  directory and ``/dev/shm`` on fresh tmpfs mounts (renewed before every run, and every test of a series,
  see :class:`Scratch`) and a fresh IPC namespace (renewed before every run).

Inside a container (the docker and podman backends) the container is the worker's isolation: it has its
own namespaces, no network, a read-only root and no capabilities but those to change ids and signal, so
no new namespace or mount can be made there. The box is then a plain process, and :class:`WipedScratch`
empties the scratch space, ``/dev/shm`` and System V IPC in place instead of replacing them.
"""

from __future__ import annotations

import contextlib
import os

from . import devices, host_users, linux, programs, runtime
from .protocol import WorkerConfig
from .scratch_cost import tmpfs_options

BOX_ROOT = "/tmp"
SCRATCH = "/tmp/box"
SHM = "/dev/shm"
SHM_BYTES = 64 << 20  # the largest /dev/shm of a run (never more than its scratch directory)
PTYS = 16  # pseudo-terminals a box may have open at once
# Where the next test's mounts are made: a directory of mode 0 on the read-only /tmp, which no program
# (without capabilities, whatever its uid) can enter or change.
_STAGE = "/tmp/.stage"
_NEXT = {SCRATCH: f"{_STAGE}/box-next", SHM: f"{_STAGE}/shm-next"}
_GRAVEYARD = f"{_STAGE}/graveyard"  # where the mounts of the tests before wait to be unmounted
# Where a box mounts file systems of its own: nothing of the host can be shown there (nor under ``/tmp`` itself).
BOX_MOUNTS = (SCRATCH, _STAGE, SHM, "/dev/pts", "/proc")
# Files of /proc that show the whole machine, not the box: every open file description lock on it (those
# show to every pid namespace), and its counts of open files and AIO contexts, which a run can change and
# every other run read: channels between runs. An empty, read-only file stands in their place.
# /proc files that show the whole machine: the kernel's command line (a deployment's secrets may be there) and
# symbols too.
MASKED = ("/proc/locks", "/proc/sys/fs/file-nr", "/proc/sys/fs/aio-nr", "/proc/cmdline", "/proc/kallsyms")
# /proc files that act on the whole machine, read-only in the box, as container runtimes make them: the box's uid 0
# (a checker's, the tests' process's) is the host's root where the server runs as root, and the kernel lets the
# host's root write a sysctl (core_pattern, pid_max, drop_caches) or sysrq-trigger with no capability at all.
READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
_EMPTY = f"{_STAGE}/empty"
RUN_PATH = "/usr/local/bin:/usr/bin:/bin"  # where runs look for tools unless the server says otherwise


def enter_worker_namespaces(config: WorkerConfig) -> int:
    """Enter the worker's namespaces and its root (see ``runtime.py``); return the uid programs run as there.

    Programs map to the unprivileged host uid ``config["host_uid"]`` plus the worker's slot (see ``host_users.py``);
    that needs a privileged (root) caller. Without root the agent maps only itself, and programs run as that
    same uid without capabilities. ``keep``, ``hide`` and ``packages`` say what the root holds (see
    :func:`runtime.enter_root`).
    """
    host_uid = host_users.host_ids(config.get("host_uid"), config.get("slot", 0))
    privileged = os.geteuid() == 0
    uid, gid = os.geteuid(), os.getegid()
    flags = linux.CLONE_NEWUSER | linux.CLONE_NEWNS | (0 if config.get("network") else linux.CLONE_NEWNET)
    if privileged:
        devices.make_own()
    first = config.get("session_slots", (0, 0))[0]
    base = (config.get("host_uid") or 0) + first - host_users.FORK_BASE
    pool = host_users.pool_lines(host_users.fork_pool(config), lambda inside: base + inside)
    host_users.unshare_user(flags, privileged, uid, gid, host_uid, pool)
    host_users.bound_user_counts(config)  # after: a new namespace records its maker's limits
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    program_uid = host_users.PROGRAM_UID if privileged and host_uid is not None else 0
    runtime.enter_root(config.get("keep", []), config.get("hide", []), config.get("packages"), program_uid)
    return program_uid


def container_program_ids(config: WorkerConfig) -> tuple[int, int]:
    """Who programs run as in a container: ``run_as`` (``uid:gid``) plus the worker's slot (see ``host_users.py``:
    without a user namespace, the container's uids are the host's) when the agent starts as root.

    The container then gives root only the capabilities to change ids and to signal: the agent and the box
    keep root's ids, which no program has, so that no program can signal them, renice them or change their
    limits, and reach the scratch space with the programs' file ids. Started as anyone else, the agent runs
    programs as itself.
    """
    host_users.bound_user_counts(config)
    run_as = config.get("run_as")
    uid, gid = os.geteuid(), os.getegid()
    if uid != 0 or not run_as:
        return uid, gid
    user, _, group = run_as.partition(":")
    if int(user) == 0:
        raise RuntimeError("programs may not run as root: set CODEGYM_SANDBOX_CONTAINER_USER to another uid")
    slot = config.get("slot", 0)
    uid, gid = int(user) + slot, int(group or user) + slot
    for path, wanted in (("/proc/self/uid_map", uid), ("/proc/self/gid_map", gid)):
        with open(path) as f:
            ranges = [tuple(map(int, line.split())) for line in f if line.strip()]
        if not any(inside <= wanted < inside + count for inside, _, count in ranges):
            raise RuntimeError(f"programs cannot run as {uid}:{gid}: {wanted} is not mapped in this container")
    linux.set_file_ids(uid, gid)
    return uid, gid


def enter_box() -> None:
    """Called in the box's init (pid 1 of a new pid namespace, in new mount/IPC/UTS namespaces).

    ``/proc`` shows a program only the processes it could trace (``hidepid``): not the box, nor a series'
    process, whose entries (writable ones among them) would otherwise be there to open; its files that show
    the whole machine (:data:`MASKED`) are empty. ``/tmp`` is a
    read-only tmpfs that holds nothing but mount points: the scratch directory, under :data:`_STAGE`, which
    no program can enter, the mounts of the next test of a series, and what the worker's root holds under
    ``/tmp`` (see :func:`runtime.hold_under`). Pseudo-terminals come from a
    devpts instance of this box's own, of bounded size (the host's is neither private nor bounded).
    """
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    flags = linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC
    for options in ("hidepid=invisible", "hidepid=2", None):  # the first needs Linux 5.8
        try:
            linux.mount("proc", "/proc", "proc", flags, options)
            break
        except OSError:
            if options is None:
                raise
    linux.sethostname("sandbox")
    kept = runtime.hold_under(BOX_ROOT)  # a toolchain or the interpreter under the host's /tmp: shown again
    linux.mount("tmpfs", BOX_ROOT, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0755,size=64k")
    runtime.show_again(kept)
    os.mkdir(SCRATCH, 0o755)
    os.mkdir(_STAGE, 0o700)
    for path in (*_NEXT.values(), _GRAVEYARD):
        os.mkdir(path, 0o700)
    os.close(os.open(_EMPTY, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444))
    programs.hold_pid_counter()  # the one sysctl the box writes, opened before /proc/sys is read-only
    for path in filter(os.path.exists, READ_ONLY):
        linux.mount(path, path, None, linux.MS_BIND | linux.MS_REC)
        linux.mount(None, path, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | flags)
    for path in filter(os.path.exists, MASKED):  # a kernel built without symbols has no kallsyms
        linux.mount(_EMPTY, path, None, linux.MS_BIND)
        linux.mount(None, path, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | flags)
    os.chmod(_STAGE, 0)  # on a read-only file system: not even its owner may change that
    linux.mount(None, BOX_ROOT, None, linux.MS_REMOUNT | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)
    linux.mount(
        "devpts",
        "/dev/pts",
        "devpts",
        linux.MS_NOSUID | linux.MS_NOEXEC,
        f"newinstance,ptmxmode=0666,mode=0620,max={PTYS}",
    )


class Scratch:
    """Where a run may write, in the local backend: the scratch directory and ``/dev/shm``.

    Both are a fresh tmpfs for every run, and for every test of a series, of a bounded size and a bounded number
    of inodes (``scratch_cost.tmpfs_options``: a tree of empty directories holds no page, only the kernel's
    inodes): a new mount keeps nothing of the last one, where a check of an old one can be fooled (its mode,
    times and extended attributes, a file rewritten through a shared mapping, which changes no time). An unmount
    costs far more than a mount, so mounts that are done with are moved to a *graveyard* under :data:`_STAGE`
    and unmounted all at once:
    at every reset (before the next run, while the server reads the answer), and in a test series every
    :data:`GRAVES` tests, or at once when the graveyard as a whole holds more than a little
    (:data:`HELD_BYTES`, :data:`HELD_INODES`): until then, its memory stays in the box's memory cgroup, beside
    the next test, in the supervisors' share of its limit (never the test's own budget, which counts only the
    test's own mounts). Between two tests, the next test's
    mounts, made while a test runs (:meth:`stage`), take the place of the last test's in a few moves.
    """

    GRAVES = 32
    HELD_BYTES = 1 << 20  # what the graveyard's files may hold, all together, before it is emptied at once
    HELD_INODES = 1024  # and its inodes (extended attributes count as inodes' space on a tmpfs)

    def __init__(self, tmp_bytes: int) -> None:
        # The supervisors' own, with the sticky bit, as a container's: programs make files there, and none can
        # unlink or replace a file of the supervisors' (the checker's ``solution.py``, see ``program_file``), nor
        # change the directory's mode, times or attributes.
        self.options = {
            SCRATCH: f"uid={os.getuid()},gid={os.getgid()},mode=1777,{tmpfs_options(tmp_bytes)}",
            SHM: f"mode=1777,{tmpfs_options(min(tmp_bytes, SHM_BYTES))}",
        }
        self.staged = False  # the next test's (or run's) mounts wait at _NEXT
        self.graves = -1  # mounts in the graveyard (-1: no graveyard mounted)
        self.held = (0, 0)  # what the graveyard's mounts hold: bytes of files, inodes

    def _mount(self, point: str, at: str) -> None:
        linux.mount("tmpfs", at, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, self.options[point])

    def reset(self, first: bool = False) -> None:
        """Fresh mounts, and a fresh IPC namespace, for the next run."""
        if not first:
            self._entomb()
            self._bury()
        for point in self.options:
            if self.staged:
                linux.mount(_NEXT[point], point, None, linux.MS_MOVE)
            else:
                self._mount(point, point)
        self.staged = False
        if not first:
            linux.unshare(linux.CLONE_NEWIPC)

    def stage(self) -> None:
        """Make the next test's mounts (out of every program's reach), and empty a full graveyard."""
        if self.graves >= self.GRAVES:
            self._bury()
        if not self.staged:
            for point, path in _NEXT.items():
                self._mount(point, path)
            self.staged = True

    def swap(self) -> None:
        """Between two tests of a series: put the staged mounts in place of the last test's."""
        self.stage()
        held = self._entomb()
        for point in self.options:
            linux.mount(_NEXT[point], point, None, linux.MS_MOVE)
        self.staged = False
        if held:
            self._bury()

    def _entomb(self) -> bool:
        """Move the mounts in use to the graveyard; whether it now holds more than a little, all together
        (counted a test at a time, many tests that each left a little would hold much)."""
        if self.graves < 0:
            linux.mount("tmpfs", _GRAVEYARD, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0700,size=64k")
            self.graves = 0
        held, inodes = self.held
        for i, point in enumerate(self.options):
            grave = f"{_GRAVEYARD}/{self.graves}.{i}"
            os.mkdir(grave, 0o700)
            linux.mount(point, grave, None, linux.MS_MOVE)
            st = os.statvfs(grave)
            held, inodes = held + (st.f_blocks - st.f_bfree) * st.f_frsize, inodes + st.f_files - st.f_ffree
        self.graves += 1
        self.held = (held, inodes)
        return held > self.HELD_BYTES or inodes > self.HELD_INODES

    def _bury(self) -> None:
        if self.graves >= 0:
            self.graves, self.held = -1, (0, 0)
            linux.umount(_GRAVEYARD)  # and every mount in it


def _wipe_tree(path: str) -> None:
    """Remove everything under ``path`` that this uid owns, whatever a program left there.

    Walks by directory descriptor, holding two at a time, with no recursion: a program may leave a tree
    thousands of levels deep (deeper than any path can name, and than Python's recursion limit), directories
    of mode 000, and symlinks, which are removed, never followed. Everything that ran is dead by now, so the
    tree holds still while it is taken apart.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    names: list[str] = []  # the way down from ``path`` to the directory ``fd`` is open on
    stuck: set[int] = set()  # inodes of directories that cannot be opened or removed: left alone
    try:
        while True:
            child, child_inode = None, 0
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            if child is None and entry.inode() not in stuck:
                                child, child_inode = entry.name, entry.inode()
                        else:
                            with contextlib.suppress(OSError):
                                os.unlink(entry.name, dir_fd=fd)
            except OSError:
                pass
            if child is not None:
                try:
                    os.chmod(child, 0o700, dir_fd=fd)  # a program may have left it 000
                    below = os.open(child, flags, dir_fd=fd)
                except OSError:
                    stuck.add(child_inode)
                    continue
                os.close(fd)
                fd = below
                names.append(child)
                continue
            if not names:
                return
            above = os.open("..", flags, dir_fd=fd)
            left = os.fstat(fd).st_ino
            os.close(fd)
            fd = above
            try:
                os.rmdir(names.pop(), dir_fd=fd)
            except OSError:
                stuck.add(left)
    finally:
        os.close(fd)


def _remove_sysv_ipc() -> None:
    """Delete the System V shared memory, semaphores and message queues a run left behind."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    for kind, call in (("shm", "shmctl"), ("sem", "semctl"), ("msg", "msgctl")):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            ident = int(row.split()[1])
            if kind == "sem":
                libc.semctl(ctypes.c_int(ident), ctypes.c_int(0), ctypes.c_int(ipc_rmid))
            else:
                getattr(libc, call)(ctypes.c_int(ident), ctypes.c_int(ipc_rmid), None)


class WipedScratch:
    """The container variant of :class:`Scratch`: no mount can be made there, so it is emptied in place.

    The container mounts a tmpfs of its own on the scratch directory (the rest of its root is read-only),
    so that, ``/dev/shm`` and System V IPC are everything a run can leave behind. The box reaches them with
    the programs' file ids (see :func:`linux.set_file_ids`), as their owner. Between two tests of a series
    the program's own files go too (the next test's process writes them again), and anything that could
    not be removed ends the series. The scratch directory and ``/dev/shm`` belong to root (programs may
    only add to them), so their mode and extended attributes are out of their reach; their times are set
    back.
    """

    def __init__(self, uid: int, gid: int, ipc: bool) -> None:
        self.uid, self.gid, self.ipc = uid, gid, ipc
        self.times: dict[str, tuple[int, int]] = {}

    def reset(self, first: bool = False) -> None:
        self._wipe()
        for path in (SCRATCH, SHM):
            with contextlib.suppress(OSError):
                st = os.stat(path)
                self.times[path] = (st.st_atime_ns, st.st_mtime_ns)

    def stage(self) -> None:
        pass

    def swap(self) -> None:
        self._wipe()
        for path in (SCRATCH, SHM):
            if os.path.isdir(path) and os.listdir(path):
                raise OSError(f"{path} could not be emptied")
        if os.geteuid() == 0 and self.uid != 0:
            linux.set_file_ids(0, 0)  # as their owner
            try:
                for path, times in self.times.items():
                    with contextlib.suppress(OSError):
                        os.utime(path, ns=times)
            finally:
                linux.set_file_ids(self.uid, self.gid)

    def _wipe(self) -> None:
        for path in (SCRATCH, SHM):
            if os.path.isdir(path):
                _wipe_tree(path)
        if os.geteuid() == 0 and self.uid != 0 and os.path.isdir(SCRATCH):
            linux.set_file_ids(0, 0)  # what the checker wrote there is root's (``program_file``)
            try:
                _wipe_tree(SCRATCH)
            finally:
                linux.set_file_ids(self.uid, self.gid)
        if not self.ipc:
            return
        if os.geteuid() == 0 and self.uid != 0:
            # Only an object's owner (by effective uid) may remove it; no program runs while this one is it.
            os.setresuid(-1, self.uid, -1)
            try:
                _remove_sysv_ipc()
            finally:
                os.setresuid(-1, 0, -1)
                linux.set_file_ids(self.uid, self.gid)
        else:
            _remove_sysv_ipc()
