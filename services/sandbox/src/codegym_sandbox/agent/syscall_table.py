"""The system calls of the seccomp filter (``linux._seccomp_program``): those refused, those answered as absent,
those done as nothing, those allowed on the calling process only, and their numbers on each machine."""

from __future__ import annotations

# Refused (EPERM): syscalls a judged program never needs and that widen the kernel surface it can reach
# (tracing, mounting, loading kernel code, keyrings, new namespaces, io_uring, clocks), or that reach into
# another process.
DENIED = [
    "ptrace", "process_vm_readv", "process_vm_writev", "umount2", "pivot_root", "chroot",
    "swapon", "swapoff", "reboot", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "unshare", "setns", "open_by_handle_at", "name_to_handle_at", "acct", "quotactl", "syslog",
    "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount",
    "mount_setattr", "lookup_dcookie", "vhangup", "iopl", "ioperm",
    "mq_open",  # POSIX message queues: memory that outlives the processes that made it
    "kcmp", "pidfd_getfd", "process_madvise", "process_mrelease", "get_robust_list",
]  # fmt: skip
# Absent (ENOSYS, as on a kernel built without them): memory that no process maps, so that no limit on a
# process and no sum over processes sees it, and that outlives the processes that made it. clone3 passes
# its flags behind a pointer that BPF cannot read: libc falls back to clone(), whose flags are checked.
ABSENT = [
    "memfd_create", "memfd_secret", "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop",
    "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "clone3",
    # Counted per user of the host, not per run (every worker's namespace belongs to the server's user): one
    # run that took them all (128 inotify instances by default) would leave none to the next run or the host.
    "inotify_init", "inotify_init1", "fanotify_init",
    # Kernel AIO contexts are counted for the whole machine (fs.aio-max-nr): one run could take every one of
    # them, and their count (fs.aio-nr) is one every run can read. glibc's POSIX AIO uses threads, not these.
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
    # A timer that signals SIGCONT (and F_SETSIG's, below) wakes a process the agent stopped between a session's
    # cells, which then computes outside any slot (as on a kernel without CONFIG_POSIX_TIMERS; setitimer stays).
    "timer_create",
    # Its open flags are behind a pointer, where the filter cannot refuse O_DIRECT (see linux._seccomp_program).
    "openat2",
]  # fmt: skip
# Refused as a file or socket that cannot do them refuses them (EINVAL), which every runtime reads as "copy it
# yourself" (libuv and the JDK fall back on EINVAL, not on ENOSYS): pipes and sockets that hold the page cache
# of a file itself, not a copy. One byte spliced or sent of each folio pins a whole file's cache, charged to
# whoever read it first (another worker, whose honest run then cannot grow: MLE), and no reclaim can take it.
UNSUPPORTED = ["splice", "tee", "vmsplice", "sendfile"]
# Done as nothing (they answer 0): what they ask for reaches past the run. sync() and syncfs() flush the host's
# file systems (a run's writable mounts are tmpfs: it has nothing to flush), thousands of times a second; fsync(),
# fdatasync() and sync_file_range() of a host file the engine binds into a container (/etc/hosts) flush the host's
# disk each, clean as it is; and fadvise() drops the host's page cache of any file the run can read (overlayfs
# passes it on to the real file), which every neighbour then reads again from disk. Programs that call them lose
# nothing: what they write lives only as long as their run.
IGNORED = ["sync", "syncfs", "fsync", "fdatasync", "sync_file_range", "fadvise64"]
# O_DIRECT in each machine's open flags: reads past the page cache, from the host's disk every time.
O_DIRECT = {"x86_64": 0o40000, "aarch64": 0o200000}
# Allowed on the calling process only (pid 0), never on another: a program may not change the limits,
# priority, CPUs or memory placement of the processes that supervise it (or of any other).
SELF_ONLY = ["sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "migrate_pages",
              "move_pages"]  # fmt: skip
SYSCALLS = {
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
        "kcmp": 312, "pidfd_getfd": 438, "process_madvise": 440, "process_mrelease": 448, "get_robust_list": 274,
        "seccomp": 317,
        "setsid": 112, "memfd_create": 319, "memfd_secret": 447, "shmget": 29, "shmat": 30, "shmdt": 67,
        "shmctl": 31, "semget": 64, "semop": 65, "semtimedop": 220, "semctl": 66, "msgget": 68, "msgsnd": 69,
        "msgrcv": 70, "msgctl": 71, "sched_setaffinity": 203, "sched_setscheduler": 144, "sched_setparam": 142,
        "sched_setattr": 314, "migrate_pages": 256, "move_pages": 279, "prlimit64": 302, "setpriority": 141,
        "ioprio_set": 251, "setrlimit": 160, "clone": 56, "clone3": 435, "socket": 41, "socketpair": 53, "prctl": 157,
        "setsockopt": 54,
        "inotify_init": 253,
        "inotify_init1": 294, "fanotify_init": 300, "io_setup": 206, "io_destroy": 207, "io_getevents": 208,
        "io_submit": 209, "io_cancel": 210, "io_pgetevents": 333, "fcntl": 72, "timer_create": 222, "sync": 162,
        "fsync": 74, "fdatasync": 75, "sync_file_range": 277,
        "syncfs": 306, "fadvise64": 221, "splice": 275, "tee": 276, "vmsplice": 278, "sendfile": 40,
        "openat2": 437, "open": 2, "openat": 257, "ioctl": 16, "vfork": 58,
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
        "kcmp": 272, "pidfd_getfd": 438, "process_madvise": 440, "process_mrelease": 448, "get_robust_list": 100,
        "seccomp": 277,
        "setsid": 157, "memfd_create": 279, "memfd_secret": 447, "shmget": 194, "shmat": 196, "shmdt": 197,
        "shmctl": 195, "semget": 190, "semop": 193, "semtimedop": 192, "semctl": 191, "msgget": 186,
        "msgsnd": 189, "msgrcv": 188, "msgctl": 187, "sched_setaffinity": 122, "sched_setscheduler": 119,
        "sched_setparam": 118, "sched_setattr": 274, "migrate_pages": 238, "move_pages": 239, "prlimit64": 261,
        "setpriority": 140, "ioprio_set": 30, "setrlimit": 164, "clone": 220, "clone3": 435, "socket": 198,
        "prctl": 167, "socketpair": 199, "setsockopt": 208, "ioctl": 29,
        "inotify_init1": 26, "fanotify_init": 262, "io_setup": 0, "io_destroy": 1, "io_submit": 2,
        "io_cancel": 3, "io_getevents": 4, "io_pgetevents": 292, "fcntl": 25, "timer_create": 107, "sync": 81,
        "fsync": 82, "fdatasync": 83, "sync_file_range": 84,
        "syncfs": 267, "fadvise64": 223, "splice": 76, "tee": 77, "vmsplice": 75, "sendfile": 71,
        "openat2": 437, "openat": 56,
    },
}  # fmt: skip
