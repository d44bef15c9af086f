"""Namespaces and mounts: the worker's view of the host, and the box each run happens in.

Layers, outermost first:

* worker (set up once by the agent): a user namespace, a network namespace with no interfaces up, and a
  mount namespace where every host mount is read-only, ``nosuid`` and ``nodev``, and private directories
  (home directories, ``/run``) are hidden behind empty tmpfs mounts, with the toolchains that live under
  them bound back in;
* box (one pid namespace at a time, its init is the box process): a private ``/proc``, ``/tmp`` and
  ``/dev/shm`` on fresh tmpfs mounts and a fresh IPC namespace, both renewed before every run.

Inside a container (the docker and podman backends) the container is the worker's isolation: it has its
own namespaces, no network, a read-only root and no capabilities, so no new namespace can be made there.
The box is then a plain process, and :func:`wipe_box` empties the scratch space, ``/dev/shm`` and System V
IPC between runs instead of replacing them.
"""

from __future__ import annotations

import contextlib
import os

from . import linux

BOX_ROOT = "/tmp"
SCRATCH = "/tmp/box"
RUN_PATH = "/usr/local/bin:/usr/bin:/bin"  # where runs look for tools unless the server says otherwise
# A program runs as this uid inside the user namespace; it maps to an unprivileged host uid.
PROGRAM_UID = 1000
_VIRTUAL_FS = ("/proc", "/sys", "/dev")


def enter_worker_namespaces(host_uid: int | None, hide: list[str], keep: list[str], network: bool = False) -> int:
    """Enter the worker's namespaces; return the uid programs run as inside them.

    ``host_uid`` is the unprivileged host uid that programs map to; it needs a privileged (root) caller.
    Without root the agent maps only itself, and programs run as that same uid without capabilities.
    """
    privileged = os.geteuid() == 0
    hide = [h for h in (os.path.realpath(p) for p in hide) if os.path.isdir(h)]
    kept = sorted(
        {
            real
            for real in (os.path.realpath(p) for p in keep)
            if os.path.exists(real) and any(real.startswith(h.rstrip("/") + "/") for h in hide)
        }
    )
    uid, gid = os.geteuid(), os.getegid()
    flags = linux.CLONE_NEWUSER | linux.CLONE_NEWNS | (0 if network else linux.CLONE_NEWNET)
    _unshare_user(flags, privileged, uid, gid, host_uid)
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    _remount_read_only()
    _hide(hide, kept)
    return PROGRAM_UID if privileged and host_uid is not None else 0


def _hide(hide: list[str], kept: list[str]) -> None:
    """Cover each hidden directory with an empty tmpfs, then bring back the kept paths under it."""
    stage = "/tmp"  # covered again by every box's own tmpfs: nothing staged here is visible to a run
    linux.mount("tmpfs", stage, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0700,size=64k")
    staged = []
    for i, real in enumerate(kept):
        spot = f"{stage}/keep{i}"
        if os.path.isdir(real):
            os.mkdir(spot)
        else:
            open(spot, "w").close()
        linux.mount(real, spot, None, linux.MS_BIND | linux.MS_REC)
        staged.append((spot, real))
    for path in hide:
        linux.mount("tmpfs", path, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0755,size=64k")
    for spot, real in staged:
        if os.path.isdir(spot):
            os.makedirs(real, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(real), exist_ok=True)
            open(real, "w").close()
        linux.mount(spot, real, None, linux.MS_MOVE)
    for path in hide:
        _remount(path, linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)
    linux.umount(stage)


def _unshare_user(flags: int, privileged: bool, uid: int, gid: int, host_uid: int | None) -> None:
    if not privileged or host_uid is None:
        linux.unshare(flags)
        linux.write_id_maps("self", f"0 {uid} 1\n", f"0 {gid} 1\n", deny_setgroups=True)
        return
    # Writing a map with more than our own id needs CAP_SETUID in the parent namespace, which we lose
    # by entering the new one: a helper that stays outside writes it for us.
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    parent = os.getpid()
    helper = os.fork()
    if helper == 0:
        code = 0
        try:
            os.close(ready_w)
            os.close(done_r)
            os.read(ready_r, 1)
            linux.write_id_maps(
                parent,
                f"0 {uid} 1\n{PROGRAM_UID} {host_uid} 1\n",
                f"0 {gid} 1\n{PROGRAM_UID} {host_uid} 1\n",
                deny_setgroups=False,
            )
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(ready_r)
    os.close(done_w)
    try:
        linux.unshare(flags)
    finally:
        os.write(ready_w, b"x")
        os.close(ready_w)
        os.close(done_r)
    _, status = os.waitpid(helper, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError("could not write the user namespace's id maps")


def _remount(path: str, flags: int) -> None:
    # Flags that the host set on a mount are locked inside a user namespace: a remount must repeat them.
    st = os.statvfs(path)
    keep = {
        os.ST_NOSUID: linux.MS_NOSUID,
        os.ST_NODEV: linux.MS_NODEV,
        os.ST_NOEXEC: linux.MS_NOEXEC,
        os.ST_NOATIME: linux.MS_NOATIME,
        os.ST_NODIRATIME: linux.MS_NODIRATIME,
        os.ST_RELATIME: linux.MS_RELATIME,
    }
    for st_flag, ms_flag in keep.items():
        if st.f_flag & st_flag:
            flags |= ms_flag
    linux.mount(None, path, None, linux.MS_BIND | linux.MS_REMOUNT | flags)


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            points.append(point)
    return points


def _remount_read_only() -> None:
    for point in _mount_points():
        if any(point == v or point.startswith(v + "/") for v in _VIRTUAL_FS):
            continue
        try:
            _remount(point, linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)
        except OSError:
            pass  # a mount hidden under another one cannot be reached; what covers it was remounted


def enter_box() -> None:
    """Called in the box's init (pid 1 of a new pid namespace, in new mount/IPC/UTS namespaces)."""
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
    linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
    linux.sethostname("sandbox")


def reset_box(tmp_bytes: int, program_uid: int, first: bool) -> None:
    """Give the next run empty scratch space and a fresh IPC namespace."""
    flags = linux.MS_NOSUID | linux.MS_NODEV
    for target, size, mode in ((BOX_ROOT, tmp_bytes, "0755"), ("/dev/shm", min(tmp_bytes, 64 << 20), "1777")):
        if not first:
            linux.umount(target)
        linux.mount("tmpfs", target, "tmpfs", flags, f"mode={mode},size={size}")
    os.mkdir(SCRATCH, 0o755)
    os.chown(SCRATCH, program_uid, program_uid)
    if not first:
        linux.unshare(linux.CLONE_NEWIPC)


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


def wipe_box() -> None:
    """The container variant of :func:`reset_box`: empty what a run could write, in place.

    The container mounts a tmpfs of its own on the scratch directory (the rest of its root is read-only),
    so that, ``/dev/shm`` and System V IPC are everything a run can leave behind.
    """
    for path in (SCRATCH, "/dev/shm"):
        if os.path.isdir(path) and os.access(path, os.W_OK):
            _wipe_tree(path)
    _remove_sysv_ipc()
