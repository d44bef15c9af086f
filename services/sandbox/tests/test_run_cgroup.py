"""The run cgroup counts what a run's processes use, those the kernel reaps unwaited too, on cgroup v1 and v2."""

from __future__ import annotations

import os
import signal
import time

import pytest
from codegym_sandbox.agent import run_cgroup
from codegym_sandbox.agent.run_cgroup import RunCgroup

# The hierarchies this host has (a hybrid host has both): each is tried alone.
HIERARCHIES = [
    version
    for version, roots, marker in (
        (1, run_cgroup.V1_ROOTS, "cpuacct.usage"),
        (2, run_cgroup.V2_ROOTS, "cgroup.controllers"),
    )
    if os.geteuid() == 0 and any(os.path.exists(f"{root}/{marker}") for root in roots)
]


def _burn_unwaited(cgroup: RunCgroup, children: int, each_s: float) -> float:
    """A process in the cgroup whose children burn CPU and are reaped by the kernel; what its wait4 saw."""
    pid = os.fork()
    if pid == 0:
        cgroup.join()
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)
        for _ in range(children):
            if os.fork() == 0:
                start = time.process_time()
                while time.process_time() - start < each_s:
                    pass
                os._exit(0)
        try:
            os.wait()  # with SIGCHLD ignored: returns when every child has ended, reaped by the kernel
        except ChildProcessError:
            pass
        os._exit(0)
    _, _, usage = os.wait4(pid, 0)
    return usage.ru_utime + usage.ru_stime


@pytest.mark.parametrize("version", HIERARCHIES)
def test_the_cgroup_counts_processes_that_nobody_waited_for(version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_cgroup, "V1_ROOTS" if version == 2 else "V2_ROOTS", ())
    cgroup = RunCgroup.create(None)
    assert cgroup is not None and cgroup.version == version
    try:
        zero = cgroup.used_s(set())
        waited = _burn_unwaited(cgroup, 2, 0.2)
        counted = cgroup.used_s(set()) - zero
        # The sum a parent gets leaves their 0.4 s out: it holds the parent's own time alone (a fork of this big
        # process, and its page faults, take a tenth of a second on a busy machine).
        assert waited < 0.3
        assert 0.4 <= counted < 0.7
        assert cgroup.procs >= 0 and not cgroup.shared
    finally:
        cgroup.remove()
