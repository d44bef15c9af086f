"""What this host gives the local backend: user namespaces, seccomp, cgroups. Probed, not assumed.

The local backend isolates each run with Linux namespaces; a host that refuses them cannot isolate at all, and
the server refuses to start there (:func:`refusal`) rather than run programs unisolated. Seccomp and
a memory cgroup of the workers' own add to that isolation where the host has them; without them the agent
holds runs by other means (see SECURITY.md), and ``codegym-sandbox doctor`` says what that costs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Literal

from ..agent import linux, run_cgroup
from ..config import Settings
from ..languages import LANGUAGES, missing_tools
from .lending import reserve
from .local import runtime_packages
from .memory import default_budget_mb
from .tasks import Reader, capacity, read_number, slots

# Run in a child interpreter, as the agent enters a worker and a box: the namespaces of a worker (user,
# mount, network), its id map, then those of a box (pid, IPC, UTS) and a first process in it. Prints
# nothing on success; on failure the last line of stderr says which step the kernel refused.
_PROBE = """
import os, sys
from codegym_sandbox.agent import linux
step = "user, mount and network namespaces"
try:
    uid, gid = os.geteuid(), os.getegid()
    linux.unshare(linux.CLONE_NEWUSER | linux.CLONE_NEWNS | linux.CLONE_NEWNET)
    step = "the user namespace's id map"
    linux.write_id_maps("self", f"0 {uid} 1\\n", f"0 {gid} 1\\n", deny_setgroups=True)
    step = "pid, IPC and UTS namespaces"
    linux.unshare(linux.CLONE_NEWPID | linux.CLONE_NEWIPC | linux.CLONE_NEWUTS)
    step = "a process in a new pid namespace"
    pid = os.fork()
    if pid == 0:
        os._exit(0 if os.getpid() == 1 else 3)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError("the first process of the namespace was not its pid 1")
except OSError as exc:
    sys.exit(f"{step}: {exc}")
"""

USERNS_FIX = (
    "allow unprivileged user namespaces: `sysctl -w kernel.unprivileged_userns_clone=1` (Debian, Ubuntu), "
    "`sysctl -w user.max_user_namespaces=15000`, `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` "
    "(Ubuntu 24.04); in a container, run it with --privileged or a seccomp profile that allows unshare; or use "
    "a container backend (--backend docker or podman)"
)


class CannotIsolate(RuntimeError):
    """The server cannot isolate programs on this host (no namespaces for the local backend, programs' host uids
    in use for the container backends): it does not start."""


@dataclass(frozen=True)
class Cgroups:
    """The host's cgroup hierarchy as the agent would use it."""

    version: int | None  # 2, 1, or None where none is mounted
    memory: bool  # whether the agent can make a memory cgroup of a worker's own (needs root and delegation)
    detail: str
    cpu: bool = False  # whether it can make a cgroup for a worker's runs, whose count is their CPU time


def namespaces_problem() -> str | None:
    """Why this host refuses the namespaces a worker and its box enter, or None when it allows them."""
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the probe did not run ({type(exc).__name__}: {exc})"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"the probe exited {done.returncode}"


def refusal(checks: list[Check]) -> str | None:
    """The one message a server prints before refusing to start on the local backend, or None to start."""
    refused = next((c for c in checks if c.name == "user namespaces" and c.status == "missing"), None)
    if refused is None:
        return None
    return (
        f"the local backend cannot isolate programs on this host: {refused.found}. The sandbox never runs "
        f"programs unisolated, so it does not start. To fix: {USERNS_FIX}. `codegym-sandbox doctor` checks the rest."
    )


def seccomp_available() -> bool:
    """Whether the agent has a system call filter for this machine's architecture."""
    return linux.seccomp_supported()


def cgroups() -> Cgroups:
    """The cgroup version mounted here, and whether a worker's memory cgroup could be made."""
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        try:
            with open("/sys/fs/cgroup/cgroup.subtree_control") as f:
                delegated = f.read().split()
        except OSError:
            delegated = []
        writable = os.geteuid() == 0 and os.access("/sys/fs/cgroup", os.W_OK)
        memory = writable and "memory" in delegated
        detail = f"cgroup v2, controllers delegated: {' '.join(delegated) or 'none'}" + (
            "" if writable else "; not writable by this user"
        )
        return Cgroups(2, memory, detail, writable)  # a CPU count needs no controller on v2: cpu.stat is core
    if os.path.exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        root = os.geteuid() == 0
        memory = root and os.access("/sys/fs/cgroup/memory", os.W_OK)
        cpu = root and any(
            os.path.exists(f"{path}/cpuacct.usage") and os.access(path, os.W_OK) for path in run_cgroup.V1_ROOTS
        )
        detail = "cgroup v1" + ("" if memory else "; the memory hierarchy is not writable here")
        return Cgroups(1, memory, detail + ("" if cpu else "; the cpuacct hierarchy is not writable here"), cpu)
    return Cgroups(None, False, "no cgroup file system mounted")


Status = Literal["ok", "missing", "warn", "info"]


@dataclass(frozen=True)
class Check:
    """One line of the report: what was found, and where it falls short, what that costs and how to fix it."""

    name: str
    status: Status
    found: str
    costs: str = ""
    fix: str = ""


def host_checks(settings: Settings, kind: str) -> list[Check]:
    """The checks that need no engine and no server: fast enough to run at every start-up."""
    local = kind == "local"
    out = []
    problem = namespaces_problem()
    out.append(
        Check("user namespaces", "ok", "a worker's and a box's namespaces can be made")
        if problem is None
        else Check(
            "user namespaces",
            "missing" if local else "warn",
            f"refused: {problem}",
            "the local backend cannot isolate programs, and a server on it refuses to start",
            USERNS_FIX,
        )
    )
    out.append(
        Check("seccomp", "ok", f"a system call filter for {os.uname().machine}")
        if seccomp_available()
        else Check(
            "seccomp",
            "warn",
            f"no system call filter for {os.uname().machine}",
            "runs are held by namespaces alone; SysV IPC is wiped between runs instead of refused",
            "run on x86_64 or aarch64, or use a container backend",
        )
    )
    cg = cgroups()
    costs = []
    if not cg.memory:
        costs.append(
            "a run's memory is held by its processes' sizes, not by the kernel's count of everything it holds "
            "(page cache, pipes, kernel memory)"
        )
    if not cg.cpu:
        costs.append(
            "a run's CPU time is summed over its processes, not counted by the kernel: the time of processes "
            "the kernel reaps unwaited (their parent ignores SIGCHLD) is in no sum, and a run can use more CPU "
            "than its limit"
        )
    out.append(
        Check("cgroups", "ok", f"{cg.detail}; workers get memory cgroups of their own, their runs a CPU-time count")
        if not costs
        else Check(
            "cgroups",
            "warn",
            cg.detail,
            "; ".join(costs),
            "run the server as root on a host with cgroup v2 and the memory controller delegated to it",
        )
    )
    packages = runtime_packages(settings)
    if packages and os.path.isdir(packages):
        out.append(Check("runtime packages", "ok", f"programs import numpy, scipy, pandas from {packages}"))
    else:
        out.append(
            Check(
                "runtime packages",
                "warn" if local else "info",
                f"{packages or 'none configured'}: not there" if local else "in the runtime image",
                "on the local backend, programs that import numpy, scipy, pandas or sortedcontainers fail",
                "scripts/setup (or set CODEGYM_SANDBOX_RUNTIME_PACKAGES)",
            )
        )
    missing = {name: tools for name, lang in LANGUAGES.items() if (tools := missing_tools(lang))}
    out.append(
        Check("toolchains", "ok", f"all {len(LANGUAGES)} languages can run")
        if not missing
        else Check(
            "toolchains",
            "warn" if local else "info",
            f"{len(LANGUAGES) - len(missing)} of {len(LANGUAGES)} languages can run here",
            "on the local backend these answer a SandboxError naming the tool: "
            + ", ".join(f"{name} ({' '.join(tools)})" for name, tools in sorted(missing.items())),
            toolchain_fix({tool for tools in missing.values() for tool in tools}),
        )
    )
    out.append(file_table_check(settings))
    out.append(capacity_check(settings, kind))
    return out


# The kernel memory a file held through a mapping costs (the open file and its mapping; measured on Linux 6.x:
# 60 000 such files, 24 MB), which a worker's memory cgroup charges to the run that holds it.
FILE_BYTES = 400


def file_table_check(settings: Settings, read: Reader = read_number) -> Check:
    """The host's file table (``fs.file-max``) against the files the runs in flight may hold in it.

    A run holds a file without a descriptor through a mapping (open, map, close), so no descriptor limit
    bounds how many: its memory limit does (the worker's memory cgroup charges each file's kernel memory,
    and the box counts it as the run's). Where the table is smaller than what the memory budget holds of
    them, less the host's reserve, runs can fill it, and then every open on the host fails.
    """
    table = read("/proc/sys/fs/file-max")
    budget = settings.memory_budget_mb or default_budget_mb()
    held = (budget << 20) // FILE_BYTES
    if table is None:
        return Check("file table", "info", "the host's file table is unknown (no /proc/sys/fs/file-max)")
    found = (
        f"fs.file-max {table}; the runs in flight may hold {held} files in their memory budget of {budget} MiB "
        f"(about {FILE_BYTES} bytes of kernel memory each), one run of {settings.limits.max_memory_mb} MiB "
        f"{(settings.limits.max_memory_mb << 20) // FILE_BYTES}"
    )
    if capacity(table) >= held:
        return Check("file table", "ok", found)
    return Check(
        "file table",
        "warn",
        found,
        "runs that hold that many files (mapped, their descriptors closed) fill the host's file table: every "
        "open on the host then fails (other runs, the server, the host), and a run that fails that way is SE",
        "make the table as large as memory bounds it: `sysctl -w fs.file-max=9223372036854775807` (systemd's "
        "default, and in /etc/sysctl.d to keep it)",
    )


def capacity_check(settings: Settings, kind: str) -> Check:
    """The workers, the runs in flight (within the host's task table: ``tasks.py``) and the memory budget."""
    budget = settings.memory_budget_mb or default_budget_mb()
    bound = slots(settings, kind)
    workers, most = bound.workers, bound.most
    ahead = reserve(most - workers, settings.reserve_workers, budget) if kind == "local" else 0
    found = (
        f"{workers} workers, up to {most} runs in flight as lending allows, {ahead} started ahead; "
        f"a memory budget of {budget} MiB ({budget // settings.limits.memory_mb} runs at the default "
        f"limit of {settings.limits.memory_mb} MiB); {bound.describe()}"
    )
    if not bound.lowered:
        return Check("capacity", "info", found)
    return Check(
        "capacity",
        "warn",
        found,
        f"at most {most} runs at once, not the {bound.asked} MAX_WORKERS asks for: so many runs at "
        f"{bound.per_run} processes each would leave the host no pids, and every fork on it would fail",
        "raise the host's table (`sysctl -w kernel.pid_max=4194304`, and kernel.threads-max where lower), or "
        "lower CODEGYM_SANDBOX_LIMITS__PROCESSES or CODEGYM_SANDBOX_MAX_WORKERS",
    )


# The tools ``scripts/setup toolchains`` installs, and the Debian package of every other tool a language needs.
SETUP_INSTALLS = {"ruby", "php", "lua", "Rscript", "sqlite3", "tsc", "scala", "scalac", "kotlin", "kotlinc", "mcs"}
SETUP_INSTALLS |= {"mono", "gdc", "iverilog", "vvp", "racket"}
DEBIAN_PACKAGES = {
    "go": "golang-go",
    "gcc": "gcc",
    "g++": "g++",
    "java": "default-jdk-headless",
    "javac": "default-jdk-headless",
    "node": "nodejs",
    "rustc": "rustc",
    "perl": "perl",
    "bash": "bash",
}


def toolchain_fix(tools: set[str]) -> str:
    """The commands that install ``tools``: the set-up's part for those it installs, Debian's packages else."""
    fixes = []
    if tools & SETUP_INSTALLS:
        fixes.append("scripts/setup toolchains (Debian's packages, as root)")
    others = sorted({DEBIAN_PACKAGES.get(tool, tool) for tool in tools - SETUP_INSTALLS})
    if others:
        fixes.append(f"apt-get install {' '.join(others)}")
    return "; ".join(fixes)


def startup_lines(checks: list[Check]) -> str:
    """The host checks as one log message: what falls short, and what it costs (the fixes: ``doctor``)."""
    short = [c for c in checks if c.status in ("missing", "warn")]
    if not short:
        return "host checks: all ok (codegym-sandbox doctor shows them)"
    parts = [f"{c.name}: {c.found} (costs: {c.costs})" for c in short]
    return "host checks: " + "; ".join(parts) + ". `codegym-sandbox doctor` says how to fix each."
