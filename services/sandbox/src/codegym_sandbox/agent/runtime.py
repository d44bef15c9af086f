"""What programs see of the machine: a runtime made for them, and the Python search path they start with.

Programs see the interpreter and its standard library, the runtime packages (an allow-list: numpy, scipy,
pandas, sortedcontainers), the toolchains of the languages and the few files of ``/etc`` those read; never
the server's environment, its source checkout, datasets, or any file that holds tests.

* Local backend: the worker, uid 0 of its own user and mount namespaces, switches to a new root
  (:func:`enter_root`): a tmpfs that holds read-only overlays of ``/usr`` and the base system's
  directories, the interpreter's installation, the toolchains (``keep``) (each the worker's own: see
  :func:`_layer`), copies of those ``/etc`` files, a few devices, and ``/proc``; nothing else of the host.
  There, every site-packages directory that a Python would search is covered: the agent's interpreter's own
  (and any other of its Python version, such as the system's ``python3``) by the runtime packages, the
  others by empty tmpfs mounts. ``hide`` (the server's checkout and virtual environment among them) is never
  shown: a toolchain inside it is left out, and where a shown directory holds it, it is covered. The old root is
  detached. The new root is put together on a tmpfs over the host's ``/tmp``: every directory it binds is
  opened before that, so any of them may lie under ``/tmp`` (a checkout cloned there and its runtime
  packages, a toolchain), and the box, which mounts a ``/tmp`` of its own, shows again what the root holds
  under it. Only the places where the root or the box mounts file systems of its own (``/tmp`` itself, the
  scratch directory, ``/dev``, ``/proc``, ``/etc``, ``/sys``) can show nothing of the host: a server whose
  toolchain lies there refuses to start (``backends/local.py``).
* Containers: the runtime image is such a root already (``services/sandbox/runtime/Dockerfile``), where the
  agent's own source is readable by root alone (the agent; never a program).

On every backend the agent's interpreter starts without its site-packages (``-S``) and, once the worker's
view is in place, :func:`python_for_programs` gives it the search path that ``python3 main.py`` has in that
view. In-process Python runs are forks of the agent and start with that path; everything the agent itself
needs later is loaded before the switch.
"""

from __future__ import annotations

import glob
import importlib
import os
import shutil
import site
import sys

from . import linux

NEW_ROOT = "/tmp"  # where the new root is put together (a tmpfs mounted over the host's /tmp), before the switch
# The box mounts a /tmp of its own over the root's: what the root holds under it (a toolchain or an interpreter
# installed under the host's /tmp) the box shows again there (see :func:`hold_under`), all but /tmp itself.
TMP = "/tmp"
# The base system: bound where a directory, made again where a link (into /usr, where /usr is merged).
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What programs and toolchains read of /etc: the dynamic linker's cache, name service and locale basics, the
# alternatives (/usr/bin/java is a link through them) and the configuration of the JDK, Python, PHP, R, Mono
# (its assembly map and machine.config) and Racket (where its installation and compiled libraries are).
ETC = (
    "R",
    "alternatives",
    "debian_version",
    "gai.conf",
    "host.conf",
    "hosts",
    "inputrc",
    "java-*",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "mime.types",
    "mono",
    "mtab",
    "nsswitch.conf",
    "os-release",
    "php",
    "protocols",
    "python3*",
    "racket",
    "services",
    "timezone",
)
# Users and groups as the runtime image has them (``{uid}``: the programs'): the host's accounts stay out.
USERS = {
    "passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:{uid}:{uid}::/tmp/box:/usr/sbin/nologin\n",
    "group": "root:x:0:\nsandbox:x:{uid}:\n",
}
ETC_COPY_BYTES = 256 << 10  # an /etc file up to this size is copied into the root (see _etc), a larger one bound
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
DEV_LINKS = {
    "ptmx": "pts/ptmx",
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}
# Runtimes size their thread pools from the CPU topology; the rest of /sys stays out.
SYS = ("/sys/devices/system/cpu",)
# Where an installation under a bound directory keeps site-packages (Debian's python3 says dist-packages).
SITE_DIRS = (
    "lib*/python3*/site-packages",
    "lib*/python3*/dist-packages",
    "lib/python3/dist-packages",
    "local/lib*/python3*/site-packages",
    "local/lib*/python3*/dist-packages",
)
MADE = ("/etc", "/dev", "/proc", "/sys")  # what the new root makes itself: no bind goes there
_READ_ONLY = linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV
# What the root holds at the places of host paths (a directory bound there, or a link with its text): the
# box shows again those under its own /tmp (see :func:`hold_under`).
_PLACED: list[tuple[str, str | None]] = []
_HOST_MOUNTS: list[str] = []  # the host's mount points, read once as the root is put together (see _layer)


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _outermost(paths: list[str]) -> list[str]:
    """``paths`` without those inside another one of them, sorted (a parent before its children)."""
    kept: list[str] = []
    for path in sorted(set(paths)):
        if not any(_within(path, top) for top in kept):
            kept.append(path)
    return kept


def _plan(paths: list[str], hide: list[str], always: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The directories to bind and the links to make again (place, text), so that ``paths`` lead to them.

    Binds are real paths, each bound at its own place, none inside another; none inside ``hide`` either,
    but for those inside ``always`` (the interpreter's installation, without which no Python runs).
    """
    real: list[str] = []
    links: dict[str, str] = {}
    for path in paths:
        path = os.path.abspath(path)
        if not os.path.lexists(path) or path == "/":
            continue
        place = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        if os.path.islink(place):
            links[place] = os.readlink(place)
        target = os.path.realpath(place)
        hidden = any(_within(target, h) for h in hide) and not any(_within(target, a) for a in always)
        if os.path.isdir(target) and target != "/" and not hidden:
            real.append(target)
    binds = [b for b in _outermost(real) if b != TMP and not any(_within(b, m) for m in MADE)]
    made = [(place, text) for place, text in sorted(links.items()) if not any(_within(place, b) for b in binds)]
    return binds, [(place, text) for place, text in made if place != TMP and not any(_within(place, m) for m in MADE)]


def _site_dirs(binds: list[str]) -> tuple[list[str], list[str]]:
    """Every site-packages directory under ``binds``: those that get the runtime packages (the agent's
    interpreter's own, and any other of the same Python version, e.g. the system's ``python3``), and the rest."""
    own = [os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)]
    found = set(own)
    for top in binds:
        for pattern in SITE_DIRS:
            found.update(os.path.realpath(p) for p in glob.glob(os.path.join(top, pattern)) if os.path.isdir(p))
    found = {p for p in found if any(_within(p, top) for top in binds)}
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    home = next((p for p in own if p in found), None)
    runtime = sorted(p for p in found if p == home or version in p.split("/"))
    return runtime, sorted(found - set(runtime))


def _hold(path: str) -> int:
    """A descriptor of ``path`` that a bind can start from (:func:`_held`) once a mount covers its place."""
    return os.open(path, os.O_PATH | os.O_CLOEXEC)


def _held(fd: int) -> str:
    # A mount follows this link to the directory the descriptor was opened on, whatever covers its path now.
    return f"/proc/self/fd/{fd}"


def _bind(source: str, place: str, recursive: bool = True, root: str = NEW_ROOT) -> None:
    """Bind ``source`` (a host path) at ``place`` in the new root, making the mount point on its tmpfs."""
    target = root + place
    if os.path.isdir(source):
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        open(target, "w").close()
    linux.mount(source, target, None, linux.MS_BIND | (linux.MS_REC if recursive else 0))


def _layer(source: str, place: str, empty: str) -> None:
    """Show the directory ``source`` at ``place`` in the new root as a read-only overlay of its own (over
    ``empty``, as overlayfs wants two layers where none is writable): the same files, whose inodes are this
    worker's alone. A lock (``flock``, ``fcntl``) lives on an inode: on a plain bind, a program that locks a
    file of the interpreter or the base system is seen by every other worker's runs at once, a channel
    between runs. A bind where that cannot be (no overlayfs in a user namespace, a source it will not stack
    on, mounts under the source that an overlay would leave out)."""
    real = os.path.realpath(source)
    if not any(_within(point, real) and point != real for point in _HOST_MOUNTS):
        target = NEW_ROOT + place
        os.makedirs(target, 0o755, exist_ok=True)
        try:
            linux.mount("overlay", target, "overlay", linux.MS_RDONLY, f"lowerdir={source}:{empty}")
            return
        except OSError:
            pass
    _bind(source, place)


def _cover(place: str) -> None:
    linux.mount("tmpfs", NEW_ROOT + place, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0755,size=4k")


def _etc(program_uid: int, empty: str) -> None:
    """The ``/etc`` files programs read: a small file copied (an inode of this worker's, as :func:`_layer`
    gives a directory), a directory layered, anything else bound."""
    os.mkdir(f"{NEW_ROOT}/etc", 0o755)
    for pattern in ETC:
        for path in sorted(glob.glob(os.path.join("/etc", pattern))):
            if os.path.islink(path):
                os.symlink(os.readlink(path), NEW_ROOT + path)
            elif os.path.isdir(path):
                _layer(path, path, empty)
            elif os.path.isfile(path) and os.path.getsize(path) <= ETC_COPY_BYTES:
                shutil.copyfile(path, NEW_ROOT + path)
                os.chmod(NEW_ROOT + path, 0o644)
            elif os.path.exists(path):
                _bind(path, path)
    for name, text in USERS.items():
        with open(f"{NEW_ROOT}/etc/{name}", "w") as f:
            f.write(text.format(uid=program_uid))


def _dev() -> None:
    """A few devices (the host's own nodes, bound), and the mount points of the box's ``/dev/pts`` and ``/dev/shm``."""
    os.mkdir(f"{NEW_ROOT}/dev", 0o755)
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            _bind(f"/dev/{name}", f"/dev/{name}", recursive=False)
    for name in ("pts", "shm"):
        os.mkdir(f"{NEW_ROOT}/dev/{name}", 0o755)
    for name, text in DEV_LINKS.items():
        os.symlink(text, f"{NEW_ROOT}/dev/{name}")


def enter_root(keep: list[str], hide: list[str], packages: str | None, program_uid: int) -> None:
    """Switch to a new root that holds the runtime and nothing else of the host (see the module's docstring).

    Called once the process is uid 0 of new user and mount namespaces, with its mounts private. ``keep``:
    the toolchains' directories; ``hide``: what programs never see; ``packages``: the runtime packages (a
    ``pip install --target`` directory), or None; ``program_uid``: the programs' uid, named in ``/etc/passwd``.
    """
    hide = [os.path.realpath(p) for p in hide]
    # The interpreter's installation, always (without it no Python runs), and where its binary lies.
    always = [os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)]
    executable = os.path.dirname(os.path.realpath(sys.executable))
    binds, links = _plan([*SYSTEM, *keep, *always, executable], hide, always)
    covered = _outermost([h for h in hide if os.path.isdir(h) and any(_within(h, top) for top in binds)])
    runtime_dirs, other_dirs = _site_dirs(binds)
    packages = os.path.realpath(packages) if packages and os.path.isdir(packages) else None
    if packages and not runtime_dirs:
        sys.stderr.write(f"agent: {sys.executable} has no site-packages directory: no runtime packages\n")

    # The tmpfs of the new root covers the host's /tmp, where the runtime packages, a toolchain or the
    # interpreter may lie (in a checkout cloned there): each is opened first, and bound through its descriptor.
    held = {path: _hold(path) for path in [*binds, *([packages] if packages else [])]}
    _HOST_MOUNTS[:] = _mount_points()
    try:
        linux.mount("tmpfs", NEW_ROOT, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0755,size=8m")
        empty = _empty_layer()
        for path in binds:
            if os.path.isdir(path):
                _layer(_held(held[path]), path, empty)
            else:
                _bind(_held(held[path]), path)
        for place, text in links:
            _link(text, place)
        for path in covered:
            _cover(path)
        for path in runtime_dirs + other_dirs:
            if any(_within(path, c) for c in covered):
                continue
            if packages and path in runtime_dirs:
                _layer(_held(held[packages]), path, empty)
            else:
                _cover(path)
    finally:
        for fd in held.values():
            os.close(fd)
    _PLACED[:] = [*((path, None) for path in binds), *links]
    _etc(program_uid, empty)
    _dev()
    for path in SYS:
        if os.path.isdir(path):
            _layer(path, path, empty)
    _bind("/proc", "/proc")  # the box mounts its own over it: a new one needs a whole one in the namespace
    os.makedirs(f"{NEW_ROOT}{TMP}", 0o755, exist_ok=True)  # the box mounts its own tmpfs there
    linux.umount(os.path.dirname(empty))  # out of sight: the overlays hold on to it
    os.rmdir(os.path.dirname(empty))
    _switch(NEW_ROOT)
    _remount_read_only()


def _empty_layer() -> str:
    """An empty directory on a tmpfs of its own: the second layer of every overlay (see :func:`_layer`)."""
    top = f"{NEW_ROOT}/.layers"
    os.mkdir(top, 0o700)
    linux.mount("tmpfs", top, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0700,size=4k")
    os.mkdir(f"{top}/empty", 0o755)
    return f"{top}/empty"


def _link(text: str, place: str, root: str = NEW_ROOT) -> None:
    os.makedirs(root + os.path.dirname(place), 0o755, exist_ok=True)
    os.symlink(text, root + place)


def hold_under(top: str) -> list[tuple[str, int | str]]:
    """What the root holds under ``top`` (not ``top`` itself), before a mount covers it: the place of each
    bind with a descriptor of it, the place of each link with its text, for :func:`show_again`. The box calls
    it, as its own /tmp covers the root's."""
    return [
        (place, _hold(place) if text is None else text)
        for place, text in _PLACED
        if _within(place, top) and place != top
    ]


def show_again(held: list[tuple[str, int | str]]) -> None:
    """Put what :func:`hold_under` held back in its place, on the mount that covers it now (still writable)."""
    for place, what in held:
        if isinstance(what, str):
            _link(what, place, root="")
            continue
        try:
            _bind(_held(what), place, root="")
        finally:
            os.close(what)


def _switch(new_root: str) -> None:
    """Make ``new_root`` the root, and detach the old one (or, where the root cannot be pivoted, e.g. in a
    chroot, move the new one over it and chroot: programs have no capability to leave a chroot)."""
    os.chdir(new_root)
    os.mkdir(".old", 0)
    try:
        linux.pivot_root(".", ".old")
    except OSError:
        os.rmdir(".old")
        linux.mount(new_root, "/", None, linux.MS_MOVE)
        os.chroot(".")
    else:
        linux.umount("/.old")  # detached, with everything under it
        os.rmdir("/.old")
    os.chdir("/")


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
    """Every mount of the new root read-only, ``nosuid`` and ``nodev``, but ``/proc`` and the device nodes."""
    for point in _mount_points():
        if _within(point, "/proc") or point.startswith("/dev/"):
            continue
        try:
            _remount(point, _READ_ONLY)
        except OSError:
            pass  # a mount hidden under another one cannot be reached; what covers it was remounted


def python_for_programs() -> None:
    """Give this interpreter the module search path that ``python3 main.py`` has in this worker's view.

    The standard library, then the site-packages directories (the runtime packages), as ``site`` finds
    them now: never the directory the agent started in, its source, or ``PYTHONPATH``. The agent's own
    modules are loaded already (programs import the assert runner from memory).
    """
    stdlib = getattr(sys, "_stdlib_dir", None) or os.path.dirname(os.__file__)
    archive = os.path.join(os.path.dirname(stdlib), f"python{sys.version_info[0]}{sys.version_info[1]}.zip")
    sys.path[:] = [p for p in sys.path if p and (_within(os.path.abspath(p), stdlib) or p == archive)]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    if sys.flags.no_site:
        site.main()
