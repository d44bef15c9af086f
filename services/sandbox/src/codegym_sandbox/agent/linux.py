"""Thin ctypes wrappers over the Linux calls the agent needs and the standard library lacks.

Standard library only: the agent runs in any image that has a Python 3.9+.
"""

from __future__ import annotations

import ctypes
import os

# The interpreter is linked against the C library, so its symbols are already here. (ctypes.util would
# find it too, but imports subprocess, threading and random, whose fork hooks then slow every run's fork.)
_libc = ctypes.CDLL(None, use_errno=True)

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
SECCOMP_MODE_FILTER = 2


def _check(result: int, what: str) -> int:
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    _check(
        _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
        f"mount {target}",
    )


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> None:
    _check(
        _libc.prctl(
            ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0), ctypes.c_ulong(0)
        ),
        f"prctl {option}",
    )


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc.sethostname(raw, ctypes.c_size_t(len(raw))), "sethostname")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Drop every capability: the bounding set (so exec cannot regain any), then the process's own sets."""
    last_cap = 40
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last_cap = int(f.read())
    except OSError:
        pass
    for cap in range(last_cap + 1):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            pass  # already dropped, or not permitted: capset below still clears the effective set
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


# --- seccomp ---------------------------------------------------------------------------------------------
# Syscalls a judged program never needs and that widen the kernel surface it can reach: tracing other
# processes, mounting, loading kernel code, keyrings, new namespaces, io_uring, clocks.
_DENIED = [
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "chroot",
    "swapon", "swapoff", "reboot", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "unshare", "setns", "open_by_handle_at", "name_to_handle_at", "acct", "quotactl", "syslog",
    "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount",
    "mount_setattr", "lookup_dcookie", "vhangup", "iopl", "ioperm",
    "mq_open",  # POSIX message queues: not needed, and a session's tests share an IPC namespace
]  # fmt: skip
_SYSCALLS = {
    "x86_64": {
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "mount": 165, "umount2": 166,
        "pivot_root": 155, "chroot": 161, "swapon": 167, "swapoff": 168, "reboot": 169, "kexec_load": 246,
        "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176, "bpf": 321,
        "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249,
        "unshare": 272, "setns": 308, "open_by_handle_at": 304, "name_to_handle_at": 303, "acct": 163,
        "quotactl": 179, "syslog": 103, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159,
        "clock_adjtime": 305, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "open_tree": 428, "move_mount": 429,
        "mount_setattr": 442, "lookup_dcookie": 212, "vhangup": 153, "iopl": 172, "ioperm": 173, "mq_open": 240,
        "clone": 56, "clone3": 435, "socket": 41,
    },
    "aarch64": {
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "mount": 40, "umount2": 39,
        "pivot_root": 41, "chroot": 51, "swapon": 224, "swapoff": 225, "reboot": 142, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106, "bpf": 280,
        "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219, "add_key": 217, "request_key": 218,
        "unshare": 97, "setns": 268, "open_by_handle_at": 265, "name_to_handle_at": 264, "acct": 89,
        "quotactl": 60, "syslog": 116, "settimeofday": 170, "clock_settime": 112, "adjtimex": 171,
        "clock_adjtime": 266, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "open_tree": 428, "move_mount": 429,
        "mount_setattr": 442, "lookup_dcookie": 18, "vhangup": 58, "mq_open": 180,
        "clone": 220, "clone3": 435, "socket": 198,
    },
}  # fmt: skip
AF_UNIX = 1
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JSET_K = 0x45
_BPF_JGE_K = 0x35
_BPF_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_supported() -> bool:
    return os.uname().machine in _SYSCALLS


def _seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    table = _SYSCALLS[machine]
    eperm = _RET_ERRNO | 1
    enosys = _RET_ERRNO | 38
    eacces = _RET_ERRNO | 13
    prog: list[tuple[int, int, int, int]] = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 1, 0, _AUDIT_ARCH[machine]),
        (_BPF_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        # x32 syscalls alias the 64-bit ones with bit 30 set; a filter on numbers alone would miss them.
        prog += [(_BPF_JGE_K, 0, 1, 0x40000000), (_BPF_RET_K, 0, 0, eperm)]
    for name in _DENIED:
        prog += [(_BPF_JEQ_K, 0, 1, table[name]), (_BPF_RET_K, 0, 0, eperm)]
    # A unix socket reaches any listening socket file the program can see (sockets ignore read-only
    # mounts): a database or a container engine on the host. Pipes and socketpair() still work.
    prog += [
        (_BPF_JEQ_K, 0, 4, table["socket"]),
        (_BPF_LD_W_ABS, 0, 0, 16),  # low word of args[0]: the address family
        (_BPF_JEQ_K, 0, 1, AF_UNIX),
        (_BPF_RET_K, 0, 0, eacces),
        (_BPF_RET_K, 0, 0, _RET_ALLOW),
    ]
    # clone3 passes its flags behind a pointer that BPF cannot read: make libc fall back to clone().
    prog += [(_BPF_JEQ_K, 0, 1, table["clone3"]), (_BPF_RET_K, 0, 0, enosys)]
    prog += [
        (_BPF_JEQ_K, 0, 3, table["clone"]),
        (_BPF_LD_W_ABS, 0, 0, 16),  # low word of args[0]: the clone flags
        (_BPF_JSET_K, 0, 1, NAMESPACE_FLAGS),
        (_BPF_RET_K, 0, 0, eperm),
        (_BPF_RET_K, 0, 0, _RET_ALLOW),
    ]
    return prog


_compiled: tuple[ctypes.Array[_SockFilter], _SockFprog] | None = None


def prepare_seccomp() -> None:
    """Build the filter ahead of time, so that a forked child only has to install it."""
    global _compiled
    if _compiled is None and seccomp_supported():
        prog = _seccomp_program(os.uname().machine)
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
