"""A worker's memory cgroup is removed only once its agent is gone.

Every server on a host shares the cgroups' parent, and every agent that starts sweeps it. A live worker's
cgroup is empty while its box starts again (a run can make that happen): swept then, the worker's every later run
held memory without a bound (a run of 64 MiB held 1 GiB of socket buffers, and passed).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from codegym_sandbox.agent.memory_cgroup import MemoryCgroup


def test_a_cgroup_is_swept_only_once_its_agent_is_gone(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    live, dead = tmp_path / f"worker-{os.getpid()}-aa", tmp_path / f"worker-{gone.pid}-bb"
    young = tmp_path / f"worker-{gone.pid}-cc"
    for folder in (live, dead, young):
        (folder / "run").mkdir(parents=True)  # the runs' cgroup inside it (run_cgroup.py)
    old = time.time() - 2 * MemoryCgroup.STALE_S
    for folder in (live, dead):
        os.utime(folder, (old, old))
    MemoryCgroup._sweep(str(tmp_path))
    assert live.exists() and young.exists() and not dead.exists()
