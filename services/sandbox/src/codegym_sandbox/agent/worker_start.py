"""The agent's start: the worker made from the server's configuration, before any request is read.

With namespaces (the local backend) the worker gets its memory and CPU cgroups, then its own namespaces and
root; in a container it is already as isolated as it will be, and takes the container's. Then the box starts
(``box_handle``), and the agent says which toolchains its runs find.
"""

from __future__ import annotations

import os
import signal
import sys

from . import acting_ids, isolation, linux, runtime
from .box_handle import BoxHandle
from .box_protocol import BoxConfig
from .memory_cgroup import MemoryCgroup
from .run_cgroup import RunCgroup

CAP_SYS_ADMIN = 21


def start(config: BoxConfig) -> tuple[BoxHandle, int]:
    """The worker made, and its box started: the box's handle and the programs' uid."""
    if config.get("namespaces", True):
        # Made before the worker's root, which shows nothing of /sys/fs/cgroup: the box joins it by descriptor.
        config["memory_cgroup"] = MemoryCgroup.create()
        config["run_cgroup"] = RunCgroup.create(config["memory_cgroup"])
        uid = isolation.enter_worker_namespaces(config)
        gid = uid  # mapped for both
    else:
        if os.getpid() != 1:
            # Without a pid namespace, kill(-1) after each run would reach every process of this uid.
            raise RuntimeError("without namespaces the agent must be the init of its own container")
        if config.get("hide_processes"):
            _hide_processes()
        linux.set_dumpable(False)  # programs may share our uid: keep them out of /proc/1
        config["run_cgroup"] = RunCgroup.own()  # the container's: one worker's, read only
        uid, gid = isolation.container_program_ids(config)
    # Every module the agent needs is loaded by now (programs import the assert runner from memory): the
    # worker's root shows no source of the server's, and programs get the runtime's search path.
    runtime.python_for_programs()
    config["program_uid"], config["program_gid"] = uid, gid
    config["namespaces"] = config.get("namespaces", True)
    # Set after the namespace switch, which changes our credentials and so clears it.
    linux.prctl(linux.PR_SET_PDEATHSIG, signal.SIGKILL)  # never outlive the server
    return BoxHandle(config), uid


def _hide_processes() -> None:
    """A session's container on an engine that cannot mount its /proc so (docker): the container's /proc made to
    show each user's processes to that user alone, as the local backend's box and podman's ``proc-opts`` do (a
    session's copies are users of their own, and see none of their siblings'). The agent was given
    ``CAP_SYS_ADMIN`` for this alone, and gives it up before anything else runs. Where the host refuses the
    remount (an AppArmor profile that denies ``mount``), the session works as any other and its fork is refused
    with why (``copy_lineage.refusal``)."""
    flags = linux.MS_REMOUNT | linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC
    try:
        linux.mount("proc", "/proc", "proc", flags, "hidepid=2")  # "invisible" since Linux 5.8; 2 before too
    except OSError as exc:
        print(f"agent: /proc could not be remounted to hide each user's processes ({exc}): no fork", file=sys.stderr)
    finally:
        acting_ids.give_up(CAP_SYS_ADMIN)


def tools(config: BoxConfig) -> dict[str, str | None]:
    """Where a run finds each toolchain the server asks about, as seen from inside this worker."""
    return {tool: _resolve(tool, config.get("path", isolation.RUN_PATH)) for tool in config.get("tools", [])}


def _resolve(tool: str, path: str) -> str | None:
    """Where a run finds ``tool``, as seen from inside this worker (a container has its own toolchains)."""
    if tool == "python3":
        return sys.executable
    # Not shutil.which: it loads bz2, lzma and zlib (mappings every program forked from the box would copy).
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory, tool)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
