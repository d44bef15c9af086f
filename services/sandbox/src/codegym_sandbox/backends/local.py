"""The local backend: a pool of agent processes on this host, isolated with Linux namespaces.

Each slot is one long-lived agent, forked from a warm zygote (see ``agent/worker_zygote.py``; where the kernel
has no pidfds, started as ``python -m codegym_sandbox.agent``) and spoken to over two pipes; the agent
enters its own user, mount and network namespaces, switches to a root that holds only the runtime made for
programs (see ``agent/runtime.py``), and runs every program in a box of its own (see
``agent/isolation.py``). No container engine is needed: this is the embedded default.
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import shutil
import sys
from pathlib import Path

from .. import languages
from ..agent import isolation, runtime
from ..agent.protocol import WorkerConfig
from ..config import Settings
from .memory import Lease
from .pool import WorkerPool
from .worker import AgentWorker, ProcessWorker
from .zygote import ForkedWorker, Zygote, pidfds_work

log = logging.getLogger("codegym.sandbox.local")

# The directory that holds the codegym_sandbox package: the agent starts there (``-m`` puts it on its path).
SOURCE = Path(__file__).resolve().parents[2]
# The source checkout, when the server runs from one (services/sandbox/src/codegym_sandbox).
CHECKOUT = SOURCE.parents[2] if SOURCE.parts[-3:] == ("services", "sandbox", "src") else None


def agent_env() -> dict[str, str]:
    """The agent's environment, which every Python run inherits: small, fixed, deterministic, and naming no
    path of the server's (a program can read its own process's initial environment)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",  # the same program prints the same set order on every worker
        "PYTHONDONTWRITEBYTECODE": "1",
        "MALLOC_ARENA_MAX": "2",  # glibc reserves 64 MiB of address space per thread arena otherwise
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def server_paths() -> list[str]:
    """Where the server's own code and environment live: programs never see them."""
    paths = [str(SOURCE)]
    if CHECKOUT is not None:
        paths.append(str(CHECKOUT))
    if sys.prefix != sys.base_prefix:  # a virtual environment (never the base installation programs run on)
        paths.append(sys.prefix)
    return paths


def runtime_packages(settings: Settings) -> str | None:
    """The runtime packages directory programs import from: the setting, else the checkout's ``.runtime``."""
    if settings.runtime_packages:
        return settings.runtime_packages
    return str(CHECKOUT / ".runtime" / "site-packages") if CHECKOUT is not None else None


# Where the agents' root (or a box in it) makes file systems of its own: nothing of the host bound at its own
# place (a toolchain, the interpreter's installation) can be seen there. Everything else may lie anywhere, under
# /tmp included: the checkout and a virtual environment are never bound, and the runtime packages are bound on
# the interpreter's site-packages directory (see ``agent/runtime.py``).
_MOUNTED = {*isolation.BOX_MOUNTS, *runtime.MADE}
RESERVED = tuple(sorted(p for p in _MOUNTED if not any(p != q and Path(p).is_relative_to(q) for q in _MOUNTED)))


class MisplacedToolchain(RuntimeError):
    """A toolchain or the interpreter lies where no agent's root can show it: the server does not start."""


def worker_view(settings: Settings) -> WorkerConfig:
    """What the agents' root holds (see ``agent/runtime.py``): the toolchains, the runtime packages, and
    never the server's checkout, virtual environment or ``HIDE_PATHS``. Raises :class:`MisplacedToolchain`
    where a toolchain or the interpreter lies in :data:`RESERVED`."""
    packages = runtime_packages(settings)
    if packages and os.path.isdir(packages):
        log.info("local backend: programs import the runtime packages in %s", packages)
    else:
        log.warning(
            "local backend: no runtime packages (%s): programs get the Python standard library only; "
            "scripts/setup makes them, or set CODEGYM_SANDBOX_RUNTIME_PACKAGES",
            f"{packages} does not exist" if packages else "none configured",
        )
        packages = None
    keep, hide = languages.keep_paths(), [*settings.hide_paths, *server_paths()]
    wrong = misplaced(keep, hide, agent_python(settings.python))
    if wrong:
        raise MisplacedToolchain(
            f"local backend: programs could not see {', '.join(wrong)}: the sandbox mounts file systems of its "
            f"own over {', '.join(RESERVED)}. Install the toolchain or interpreter elsewhere, or take it off PATH "
            "(or its *_HOME variable, or CODEGYM_SANDBOX_PYTHON)."
        )
    return {"keep": keep, "hide": hide, "packages": packages}


def misplaced(keep: list[str], hide: list[str], python: str) -> list[str]:
    """The directories an agent would bind at their own place (those of ``keep`` that exist, less what lies in
    ``hide``; the installation of the interpreter ``python``, always) that lie in :data:`RESERVED`."""
    hidden = [Path(os.path.realpath(h)) for h in hide]
    shown = [Path(os.path.realpath(p)) for p in keep if os.path.isdir(p)]
    shown = [p for p in shown if not any(p.is_relative_to(h) for h in hidden)]
    home = Path(python).parent  # a real path (see agent_python): its bin/, and the installation above
    return sorted({str(p) for p in [*shown, home, home.parent] if any(p.is_relative_to(r) for r in RESERVED)})


def agent_python(python: str | None) -> str:
    """The interpreter the agents run on, and Python runs with it: a base installation, never a virtual
    environment (a venv's ``bin/python`` links to its base: the link is followed)."""
    chosen = (shutil.which(python) or python) if python else languages.base_python()
    return os.path.realpath(chosen)


def configured_python() -> str:
    """The interpreter a local server started with this environment runs Python programs on (``PYTHON``, or
    its default): for tools beside the server, such as the benches, that compare against it."""
    return agent_python(Settings().python)


class LocalBackend(WorkerPool):
    """Agents as child processes of the server."""

    name = "local"

    def __init__(self, workers: int, queue_size: int, config: WorkerConfig, python: str | None = None) -> None:
        super().__init__(workers, queue_size, config)
        self.python = agent_python(python)
        # -S: nothing of the interpreter's site-packages is loaded (the agent gives programs the runtime's);
        # started in SOURCE, which -m puts on its path, so that no variable of its environment names it.
        argv = [self.python, "-s", "-S", "-m", "codegym_sandbox.agent.worker_zygote"]
        self.zygote = Zygote(argv, agent_env(), str(SOURCE))
        self.forking = pidfds_work()

    async def start(self) -> None:
        if not self.forking:
            await self._compile_agent()
        await super().start()
        # Runs are admitted by a share of the memory budget, and charged what they hold, only where the kernel
        # counts what a worker holds (its memory cgroup) and the server can read it: see memory.py.
        self.reads_memory = any(self._memory_watch.use.mb(pid) is not None for pid in self._agents().values())
        if self.reads_memory:
            self._spawn(self._memory_watch.run(self._runs_held, self._pause))

    def _agents(self) -> dict[AgentWorker, int]:
        return {w: w.pid for w in self._workers if isinstance(w, ForkedWorker | ProcessWorker) and w.pid > 0}

    def _runs_held(self) -> dict[Lease, int]:
        """The runs in flight (their share of the budget) and their agents' pids."""
        agents = self._agents()
        self._memory_watch.use.keep(set(agents.values()))
        return {lease: agents[w] for lease, w in self._leases.items() if w in agents}

    def _pause(self, lease: Lease, paused: bool) -> None:
        """A run stands paused while what it and its neighbours hold passes the budget, or goes on (memory.py)."""
        worker = self._leases.get(lease)
        if worker is not None:
            log.info("local backend: worker %d's run %s", worker.slot, "stands paused" if paused else "goes on")
            self.pauses.hold(worker, "memory", paused)

    @property
    def fork_refusal(self) -> str | None:
        if self.config.get("host_uid") is None or not self.config.get("session_slots"):
            return (
                "forking a session needs the server to run as root: each copy's programs are a host user of their own"
            )
        if platform.machine() != "x86_64":
            return "forking a session is offered on x86_64 only"
        return None

    async def stop(self) -> None:
        await super().stop()
        await self.zygote.close()

    async def _compile_agent(self) -> None:
        """Byte-compile the agent's modules for its interpreter once, here, where each agent is an interpreter
        of its own: agents run with PYTHONDONTWRITEBYTECODE (as programs do), and the server never imports
        most of them, so otherwise every agent would compile them again (about a third of what starting one
        costs). Forked agents need none of it: the zygote compiled them once. Where the package is read-only,
        it was compiled when it was installed."""
        proc = await asyncio.create_subprocess_exec(
            self.python,
            "-s",
            "-S",
            "-m",
            "compileall",
            "-q",
            str(SOURCE / "codegym_sandbox" / "agent"),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            cwd="/",
        )
        await proc.wait()

    def make_worker(self, slot: int) -> AgentWorker:
        if self.forking:
            return ForkedWorker(slot, self.config, self.zygote)
        argv = [self.python, "-s", "-S", "-m", "codegym_sandbox.agent"]
        return ProcessWorker(slot, self.config, argv, agent_env(), str(SOURCE))
