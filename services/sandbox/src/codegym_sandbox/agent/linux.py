"""Thin ctypes wrappers over the Linux calls the agent needs and the standard library lacks.

Standard library only: the agent runs in any image that has a Python 3.9+.
"""

from __future__ import annotations

import ctypes
import os

from . import syscall_table

# The interpreter is linked against the C library, so its symbols are already here. (ctypes.util would
# find it too, but imports subprocess, threading and random, whose fork hooks then slow every run's fork.)
_libc = ctypes.CDLL(None, use_errno=True)

CLONE_PARENT = 0x00008000
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
NAMESPACE_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
    | CLONE_NEWTIME
)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_MOVE = 8192
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
PR_SET_SYSCALL_USER_DISPATCH = 59
SECCOMP_MODE_FILTER = 2
SECCOMP_GET_ACTION_AVAIL = 2  # seccomp()'s operations from here on only ask

CAP_SETGID = 6
CAP_SETUID = 7


def _check(result: int, what: str) -> int:
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), "setns")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    _check(
        _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {target}",
    )


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """Make ``new_root`` the root of this mount namespace, the old root going to ``put_old`` (no libc wrapper)."""
    number = syscall_table.SYSCALLS.get(os.uname().machine, {}).get("pivot_root")
    if number is None:
        raise OSError(f"pivot_root: no system call number known on {os.uname().machine}")
    _check(_libc.syscall(ctypes.c_long(number), new_root.encode(), put_old.encode()), "pivot_root")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    _check(
        _libc.prctl(
            ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0), ctypes.c_ulong(0)
        ),
        f"prctl {option}",
    )


# prctl() with its argument types set once: a call then converts plain ints in C. A call that builds ctypes
# objects instead touches (and so, in a process just forked, copies) a hundred pages more of the interpreter.
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # a handle of its own: other calls pass pointers
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int


def set_dumpable(on: bool) -> None:
    """Whether processes of this uid may trace this one, read its memory and own its ``/proc`` entries (the
    kernel clears it at every change of uid). Quick: done in every run's process."""
    if _prctl(PR_SET_DUMPABLE, 1 if on else 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl PR_SET_DUMPABLE")


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc.sethostname(raw, ctypes.c_size_t(len(raw))), "sethostname")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities(keep: tuple[int, ...] = ()) -> None:
    """Drop every capability but ``keep``: the bounding set (so exec cannot regain any), then the process's own sets."""
    last_cap = 40
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last_cap = int(f.read())
    except OSError:
        pass
    for cap in range(last_cap + 1):
        if cap in keep:
            continue
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            pass  # already dropped, or not permitted: capset below still clears the effective set
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    for cap in keep:
        data[cap // 32].effective |= 1 << (cap % 32)
        data[cap // 32].permitted |= 1 << (cap % 32)
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


# Without file-system ids the agent cannot reach programs' files while keeping ids that no program has. gVisor's
# kernel (Debian bookworm's runsc, release 20221219) has none.
NO_FILE_IDS = "this kernel has no setfsuid (gVisor's has none)"


def set_file_ids(uid: int, gid: int) -> None:
    """Access files as ``uid``/``gid`` (and create them owned by them), keeping every other credential.

    Unlike the effective ids, the file-system ids play no part in who may signal, renice or trace a
    process. Needs CAP_SETUID and CAP_SETGID when the ids are not among the process's own.
    """
    if _libc.setfsuid(ctypes.c_uint(0xFFFFFFFF)) == -1:  # no id is -1: the call itself is missing
        raise PermissionError(f"could not access files as {uid}:{gid}: {NO_FILE_IDS}")
    _libc.setfsgid(ctypes.c_uint(gid))
    _libc.setfsuid(ctypes.c_uint(uid))
    # Both calls answer the previous id, never an error: a second call with -1 tells whether they held.
    if _libc.setfsuid(ctypes.c_uint(0xFFFFFFFF)) != uid or _libc.setfsgid(ctypes.c_uint(0xFFFFFFFF)) != gid:
        raise PermissionError(f"could not access files as {uid}:{gid}")


# --- seccomp ---------------------------------------------------------------------------------------------
AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
IPPROTO_TCP = 6
# TCP_MD5SIG, TCP_MD5SIG_EXT, and TCP-AO's TCP_AO_ADD_KEY, TCP_AO_DEL_KEY, TCP_AO_INFO, TCP_AO_GET_KEYS, TCP_AO_REPAIR
TCP_KEY_OPTIONS = (14, 32, 38, 39, 40, 41, 42)
PRIO_PROCESS = 0
RLIMIT_NPROC = 6
IOPRIO_WHO_PROCESS = 1
F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 36, 37, 38
F_SETFL, F_SETSIG, SIGCONT = 4, 10, 18
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JSET_K = 0x45
_BPF_JGE_K = 0x35
_BPF_RET_K = 0x06
_BPF_AND_K = 0x54
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_TRACE = 0x7FF00000  # to the tracer, which may let it through; without one, ENOSYS
_RET_KILL_PROCESS = 0x80000000
_EPERM, _EACCES, _EINVAL, _ENOSYS, _EAFNOSUPPORT = (_RET_ERRNO | e for e in (1, 13, 22, 38, 97))


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_supported() -> bool:
    return os.uname().machine in syscall_table.SYSCALLS


def _arg(n: int, high: bool = False) -> tuple[int, int, int, int]:
    """Load the low (or high) 32 bits of system call argument ``n`` (seccomp_data.args, little-endian)."""
    return (_BPF_LD_W_ABS, 0, 0, 16 + 8 * n + (4 if high else 0))


def _block(*code: tuple[int, str | int, str | int, int] | str) -> list[tuple[int, int, int, int]]:
    """Assemble straight-line BPF whose jumps name labels (strings in the code) instead of offsets."""
    labels: dict[str, int] = {}
    out: list[tuple[int, str | int, str | int, int]] = []
    for item in code:
        if isinstance(item, str):
            labels[item] = len(out)
        else:
            out.append(item)

    def offset(at: int, target: str | int) -> int:
        return target if isinstance(target, int) else labels[target] - at - 1

    return [(op, offset(i, jt), offset(i, jf), k) for i, (op, jt, jf, k) in enumerate(out)]


def _ret(action: int) -> tuple[int, int, int, int]:
    return (_BPF_RET_K, 0, 0, action)


def _seccomp_program(machine: str, inet: bool = True) -> list[tuple[int, int, int, int]]:
    table = syscall_table.SYSCALLS[machine]
    prog: list[tuple[int, int, int, int]] = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),
        _ret(_RET_KILL_PROCESS),
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        # x32 syscalls alias the 64-bit ones with bit 30 set; a filter on numbers alone would miss them.
        prog += [(_BPF_JGE_K, 0, 1, 0x40000000), _ret(_EPERM)]
    lists = (
        (syscall_table.DENIED, _EPERM),
        (syscall_table.ABSENT, _ENOSYS),
        (syscall_table.UNSUPPORTED, _EINVAL),
        (syscall_table.IGNORED, _RET_ERRNO),
    )
    for names, action in lists:
        for name in names:
            if name in table:  # some have no number on some machines (iopl, inotify_init on aarch64)
                prog += [(_BPF_JEQ_K, 0, 1, table[name]), _ret(action)]

    def when(name: str, *body: tuple[int, str | int, str | int, int] | str) -> None:
        """Run ``body`` (which loads arguments, and must end every path in a return) for syscall ``name``."""
        code = _block(*body)
        prog.extend([(_BPF_JEQ_K, 0, len(code), table[name]), *code])

    # Sockets of the internet families only with ``inet`` (no interface is up: they reach nothing; a container's
    # loopback is up, and on cgroup v1 its TCP buffers count in no memory: 897 MiB under a 128 MiB run); no other
    # family. A unix socket reaches any listening socket file the program can see (sockets ignore read-only mounts):
    # a database or a container engine on the host. A netlink socket queues the kernel's answers in memory no cgroup
    # counts (route netlink: 8 MiB a socket where rmem_max is 4 MiB, a 64 MiB run held 800 MiB); libc, refused one,
    # takes every address family to be there, as it does without a netlink answer. Pipes and socketpair() still
    # work. The rest (vsock, packet, crypto, bluetooth, ...) is kernel surface.
    net = "allow" if inet else "family"
    when("socket", _arg(0),
         (_BPF_JEQ_K, net, 0, AF_INET), (_BPF_JEQ_K, net, 0, AF_INET6), (_BPF_JEQ_K, "unix", "family", AF_UNIX),
         "allow", _ret(_RET_ALLOW), "unix", _ret(_EACCES), "family", _ret(_EAFNOSUPPORT))  # fmt: skip
    # TCP's signature keys (MD5 and TCP-AO) are kernel memory of the socket's, bounded per socket only (about 180 KiB
    # each), in no cgroup: a run has no peer to sign for.
    when("setsockopt", _arg(1), (_BPF_JEQ_K, 0, "allow", IPPROTO_TCP), _arg(2),
         *((_BPF_JEQ_K, "deny", 0, option) for option in TCP_KEY_OPTIONS),
         "allow", _ret(_RET_ALLOW), "deny", _ret(_EPERM))  # fmt: skip
    when("socketpair", _arg(0), (_BPF_JEQ_K, 0, 1, AF_UNIX), _ret(_RET_ALLOW), _ret(_EAFNOSUPPORT))
    # PIDFD_GET_INFO (pidfs, Linux 6.13; its size bits vary) answers any process's parent and ids through a pidfd,
    # which /proc's hidepid does not stand in the way of: a session's copy would learn its siblings'.
    when("ioctl", _arg(1), (_BPF_AND_K, 0, 0, 0xFFFF), (_BPF_JEQ_K, 0, 1, 0xFF0B), _ret(_EPERM), _ret(_RET_ALLOW))
    # A clone into new namespaces is the agent's, as it copies a session's kernel (kernel_copy.py): only a
    # process traced (by the agent: no program may trace) is let through, by its tracer.
    # And CLONE_PARENT: a child of its parent's parent would leave the tree of a session's copy (the reaper of its
    # own processes, stopped and ended by its tree).
    when("clone", _arg(0), (_BPF_JSET_K, "trace", 0, NAMESPACE_FLAGS), (_BPF_JSET_K, "deny", "allow", CLONE_PARENT),
         "trace", _ret(_RET_TRACE), "deny", _ret(_EPERM), "allow", _ret(_RET_ALLOW))  # fmt: skip
    # mount() is a tracer's alone too: a session's copy in a container mounts its own files as the agent has it
    # (copy_making.py), with the capabilities its new user namespace gave it, before any instruction of its own
    # runs. A program, traced by nobody, is answered ENOSYS.
    when("mount", _ret(_RET_TRACE))
    # A new process session (setsid) is a new autogroup, and the scheduler shares the CPU between autogroups: a
    # program that made many would take the CPU of every other run. Its process made the one it has before. The
    # agent gives a session's copy one of its own, as its tracer (ENOSYS without one).
    when("setsid", _ret(_RET_TRACE))
    # A copy of a session's kernel is the reaper of its own processes (set by the agent, as its tracer): a program
    # that gave that up would send its orphans to its box, out of reach of its session's stop and end. A filter of
    # its own (PR_SET_SECCOMP, as the seccomp call) is refused: see below. And syscall user
    # dispatch: it would turn a call the agent has a copy make into a signal, and the copy's own code run on.
    when("prctl", _arg(0), (_BPF_JEQ_K, "trace", 0, PR_SET_CHILD_SUBREAPER),
         (_BPF_JEQ_K, "deny", 0, PR_SET_SECCOMP), (_BPF_JEQ_K, "deny", "allow", PR_SET_SYSCALL_USER_DISPATCH),
         "trace", _ret(_RET_TRACE), "deny", _ret(_EPERM), "allow", _ret(_RET_ALLOW))  # fmt: skip
    # A filter of a program's own could answer for calls it never made: those the agent has a session's copy make
    # as it makes it over (kernel_copy.py), its ids among them. seccomp() may ask (what a filter could do), not set
    # a mode; prctl(PR_SET_SECCOMP) is refused above.
    when("seccomp", _arg(0), (_BPF_JGE_K, 0, 1, SECCOMP_GET_ACTION_AVAIL), _ret(_RET_ALLOW), _ret(_EPERM))
    for name in syscall_table.SELF_ONLY:
        when(name, _arg(0), (_BPF_JEQ_K, 0, 1, 0), _ret(_RET_ALLOW), _ret(_EPERM))
    # prlimit64(pid, resource, new, old): reading any process's limits, changing only its own, and never its
    # process limit: its hard limit is left high, so that a session's copies each count their own processes
    # (kernel_copy.py), and the soft one is the run's bound. A change of its own process limit is its tracer's
    # alone: the agent has a session's kernel raise it for its copies' clones and each copy set it back
    # (ENOSYS for a program, traced by nobody).
    when("prlimit64", _arg(1), (_BPF_JEQ_K, 0, "own", RLIMIT_NPROC),
         _arg(2), (_BPF_JEQ_K, 0, "nproc", 0), _arg(2, high=True), (_BPF_JEQ_K, "allow", "nproc", 0),
         "nproc", _arg(0), (_BPF_JEQ_K, "trace", "deny", 0),
         "own", _arg(0), (_BPF_JEQ_K, "allow", 0, 0),
         _arg(2), (_BPF_JEQ_K, 0, "deny", 0), _arg(2, high=True), (_BPF_JEQ_K, "allow", "deny", 0),
         "allow", _ret(_RET_ALLOW), "trace", _ret(_RET_TRACE), "deny", _ret(_EPERM))  # fmt: skip
    when("setrlimit", _arg(0), (_BPF_JEQ_K, 0, 1, RLIMIT_NPROC), _ret(_EPERM), _ret(_RET_ALLOW))
    # setpriority(which, who, nice) and ioprio_set(which, who, prio): the calling process only; a group or
    # a user (who 0 is the caller's own) would reach its supervisors too.
    for name, which in (("setpriority", PRIO_PROCESS), ("ioprio_set", IOPRIO_WHO_PROCESS)):
        when(name, _arg(0), (_BPF_JEQ_K, 0, "deny", which), _arg(1), (_BPF_JEQ_K, 0, "deny", 0),
             _ret(_RET_ALLOW), "deny", _ret(_EPERM))  # fmt: skip
    # Open file description locks belong to no process, so /proc/locks shows them to every pid namespace: a
    # channel between runs of any worker, of any server on the machine. Refused as a kernel older than 3.15
    # refuses them (EINVAL); POSIX (fcntl F_SETLK) and BSD (flock) locks, which /proc/locks shows only to
    # their own pid namespace, still work.
    # An I/O signal of SIGCONT is refused too (see timer_create).
    # O_DIRECT (at open, or set later) reads a shared file from the host's disk at every read, past the page cache:
    # a run's readers took the disk's bandwidth at no CPU. Refused as a file system without it refuses it (EINVAL).
    direct = syscall_table.O_DIRECT[machine]
    when("fcntl", _arg(1), (_BPF_JEQ_K, "deny", 0, F_OFD_GETLK), (_BPF_JEQ_K, "deny", 0, F_OFD_SETLK),
         (_BPF_JEQ_K, "deny", 0, F_OFD_SETLKW), (_BPF_JEQ_K, "setfl", 0, F_SETFL), (_BPF_JEQ_K, 0, "allow", F_SETSIG),
         _arg(2), (_BPF_JEQ_K, "deny", "allow", SIGCONT), "setfl", _arg(2), (_BPF_JSET_K, "deny", "allow", direct),
         "allow", _ret(_RET_ALLOW), "deny", _ret(_EINVAL))  # fmt: skip
    for name, flags in (("open", 1), ("openat", 2)):
        if name in table:  # no open() on aarch64
            when(name, _arg(flags), (_BPF_JSET_K, 0, 1, direct), _ret(_EINVAL), _ret(_RET_ALLOW))
    prog.append(_ret(_RET_ALLOW))
    return prog


_compiled: tuple[ctypes.Array[_SockFilter], _SockFprog] | None = None


def prepare_seccomp(inet: bool = True) -> None:
    """Build the filter ahead of time, so that a forked child only has to install it."""
    global _compiled
    if _compiled is None and seccomp_supported():
        prog = _seccomp_program(os.uname().machine, inet)
        filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
        _compiled = (filters, _SockFprog(len(prog), filters))


def install_seccomp() -> None:
    """Install the deny-list filter on this thread and its future children (sets no_new_privs)."""
    prepare_seccomp()
    assert _compiled is not None
    fprog = _compiled[1]
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    _check(
        _libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), 0, 0),
        "seccomp",
    )


def write_id_maps(pid: int | str, uid_map: str, gid_map: str, deny_setgroups: bool) -> None:
    """Write /proc/PID/{uid,gid}_map for a process that has just entered a new user namespace."""
    if deny_setgroups:
        with open(f"/proc/{pid}/setgroups", "w") as f:
            f.write("deny")
    with open(f"/proc/{pid}/uid_map", "w") as f:
        f.write(uid_map)
    with open(f"/proc/{pid}/gid_map", "w") as f:
        f.write(gid_map)
