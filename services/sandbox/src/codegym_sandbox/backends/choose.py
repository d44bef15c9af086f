"""Which backend a server uses, and why: the ``backend`` setting, or ``auto`` detection.

``auto`` prefers containers when an engine answers and has the runtime image: inside a Slurm job
podman-hpc first, then docker; elsewhere docker first, then podman-hpc (or plain podman where podman-hpc is
not installed). With neither it falls back to the
local backend, which needs no engine. The reason is logged at start-up and shown in ``/readyz``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import shutil
import socket
import subprocess

from .. import languages
from ..agent.isolation import RUN_PATH
from ..agent.linux import NO_FILE_IDS
from ..agent.protocol import WorkerConfig
from ..config import Settings
from .base import Backend
from .containers import ContainerSpec
from .docker import DockerBackend, remove_stale_now
from .host import CannotIsolate, host_checks, refusal, startup_lines
from .local import LocalBackend, worker_view
from .memory import default_budget_mb
from .podman import PodmanBackend, runtime_flags
from .podman import remove_stale as remove_stale_podman
from .program_users import Reservation, container_user, engine_maps_ids, in_use, take_range
from .program_users import refusal as uids_refusal
from .tasks import SESSION_EXTRA, Slots, session_workers, slots, worker_tasks

log = logging.getLogger("codegym.sandbox")


# Signals one worker's runs may have queued at once (a POSIX timer holds one): far more than a program uses.
QUEUED_SIGNALS = 1024
LAST_UID = 0xFFFFFFFE  # (uid_t)-1 means "no uid"


def queued_signals(workers: int) -> int:
    """Each worker's share of the signals the server's user may have queued (``RLIMIT_SIGPENDING``): the kernel
    counts every worker's programs' again for the user that made their namespaces, against the server's own
    limit, which all workers together may take at most half of (see ``agent/host_users.py``)."""
    own = resource.getrlimit(resource.RLIMIT_SIGPENDING)[0]
    if own == resource.RLIM_INFINITY:
        return QUEUED_SIGNALS
    return max(min(QUEUED_SIGNALS, own // (2 * workers)), 1)


def program_uids(settings: Settings, run_as: str | None, workers: int) -> range | None:
    """The uids programs run as, one per worker slot (``workers`` of them, see ``agent/host_users.py``): from
    ``run_as`` in containers (slot 0's ``uid:gid``, :func:`program_users.container_user`), from ``host_uid`` on
    the local backend (``run_as`` None); None where they all run as the server's uid (the local backend without
    root)."""
    if run_as is None:
        if os.geteuid() != 0:
            return None
        first = settings.host_uid
    else:
        first = int(run_as.partition(":")[0])
    uids = range(first, first + workers)
    if uids[-1] > LAST_UID:
        raise ValueError(f"programs' host uids {first}..{uids[-1]} (one per worker) go past the last uid {LAST_UID}")
    return uids


def agent_config(settings: Settings, run_as: str | None, workers: int = 1) -> WorkerConfig:
    """The configuration frame every agent gets first (``workers``: the slots there may be, lent ones too;
    ``run_as``: as in :func:`program_uids`)."""
    tools = sorted({tool for lang in languages.LANGUAGES.values() for tool in lang.tools})
    signals = queued_signals(workers)
    if run_as is not None:
        config: WorkerConfig = {"namespaces": False, "tools": tools, "path": RUN_PATH, "queued_signals": signals}
        return {**config, "run_as": run_as}
    return {
        "host_uid": settings.host_uid if os.geteuid() == 0 else None,
        "queued_signals": signals,
        **worker_view(settings),
        "tmp_bytes": settings.limits.scratch_bytes,
        "namespaces": True,
        "tools": tools,
        # Runs find tools where the server does (a toolchain under a hidden home is bound back in).
        "path": os.pathsep.join([RUN_PATH, os.environ.get("PATH", "")]),
    }


def container_spec(settings: Settings) -> ContainerSpec:
    lim = settings.limits
    return ContainerSpec(
        image=settings.image,
        server_id=settings.server_id,
        memory_mb=settings.container_memory_mb or lim.max_memory_mb + 512,
        cpus=settings.container_cpus,
        pids=worker_tasks(settings, "containers"),
        open_files=max(lim.open_files, 1024),
        tmp_mb=max(lim.scratch_bytes >> 20, 16),
        runtime=settings.container_runtime,
        session_pids=settings.sessions.processes + SESSION_EXTRA,
        session_processes=settings.sessions.processes,
    )


def docker_problem(image: str) -> str | None:
    """Why the docker backend cannot run here, or None when it can."""
    try:
        import docker
    except ImportError:
        return "the docker package is not installed"
    silent = _silent_socket()
    if silent is not None:
        return f"no docker engine ({silent})"
    try:
        client = docker.from_env(timeout=5)
    except Exception as exc:
        return f"no docker engine ({type(exc).__name__})"
    try:
        client.ping()
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return f"docker answers but has no image {image!r}"
    except Exception as exc:
        return f"no docker engine ({type(exc).__name__})"
    finally:
        client.close()
    return None


def _silent_socket() -> str | None:
    """Why nothing answers on docker's local socket (``DOCKER_HOST``, or its default), or None (also for a host that
    is not a unix socket).

    Asked before the docker client is made: a client whose engine does not answer leaves its socket open.
    """
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return None
    path = host.removeprefix("unix://")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(5)
        try:
            probe.connect(path)
        except OSError as exc:
            return f"nothing answers on {path}: {exc.strerror or type(exc).__name__}"
    return None


def podman_problem(binary: str, image: str) -> str | None:
    if shutil.which(binary) is None:
        return f"{binary} is not installed"
    try:
        done = subprocess.run([binary, "image", "exists", image], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} does not answer ({type(exc).__name__})"
    return None if done.returncode == 0 else f"{binary} has no image {image!r}"


# Asked of the image's Python in a container on the runtime: whether the agent's kernel needs are met.
_KERNEL_PROBE = "import ctypes; print(ctypes.CDLL(None).setfsuid(-1) != -1)"


def runtime_problem(engine: str, image: str, runtime: str) -> str | None:
    """Why the agent cannot run in containers of ``engine`` (docker, or a podman binary) on the OCI runtime
    ``runtime`` (runsc: gVisor), or None when it can: the runtime must be known to the engine, start a
    container from ``image``, and give it a kernel with what the agent needs."""
    if engine == "docker":
        import docker

        try:
            client = docker.from_env(timeout=60)
        except Exception as exc:
            return f"no docker engine ({type(exc).__name__})"
        try:
            if runtime not in (client.info().get("Runtimes") or {}):
                return f"{runtime} is not a runtime of the docker daemon (/etc/docker/daemon.json)"
            out = client.containers.run(
                image, ["python3", "-c", _KERNEL_PROBE], runtime=runtime, network_mode="none", remove=True
            )
            answer = out.decode(errors="replace").strip()
        except Exception as exc:
            return f"no container starts on {runtime}: {(str(exc).strip().splitlines() or ['?'])[-1]}"
        finally:
            client.close()
    else:
        # Explicit limits: the host's may be more than podman can give a container (see podman.py).
        argv = [engine, *runtime_flags(runtime), "run", "--rm", "--network", "none"]
        argv += ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", image, "python3", "-c", _KERNEL_PROBE]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"no container starts on {runtime} ({type(exc).__name__})"
        if done.returncode != 0:
            return f"no container starts on {runtime}: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
        answer = done.stdout.strip()
    return None if answer == "True" else f"the agent cannot run on {runtime}: {NO_FILE_IDS}"


async def choose_backend(settings: Settings) -> tuple[Backend, str]:
    """The backend to use and why, with the server's settings for its pool, set through the protocol's
    members (every backend has them)."""
    backend, reason, most, held = await _choose(settings)
    backend.release_uids = held.release if held is not None else None
    backend.breaker_cooldown_s = settings.breaker_cooldown_s
    backend.max_workers = most
    backend.reserve_workers = settings.reserve_workers
    backend.session_slot_count = session_workers(settings)
    backend.memory.total_mb = settings.memory_budget_mb or default_budget_mb()
    backend.unbudgeted_run_mb = settings.limits.max_memory_mb
    return backend, reason


async def detect(settings: Settings) -> tuple[str, str]:
    """The kind of backend the server would use (``local``, ``docker``, ``podman``, ``podman-hpc``) and why."""
    kind = settings.backend
    if kind != "auto":
        return kind, f"asked for {kind}"
    in_slurm = bool(os.environ.get("SLURM_JOB_ID"))
    order = ["podman-hpc", "docker"] if in_slurm else ["docker", "podman-hpc"]
    why = []
    for candidate in order:
        if candidate == "docker":
            problem = await asyncio.to_thread(docker_problem, settings.image)
        else:
            # A workstation has plain podman where a cluster has podman-hpc: either will do.
            candidate = settings.podman_binary or ("podman-hpc" if shutil.which("podman-hpc") else "podman")
            problem = await asyncio.to_thread(podman_problem, candidate, settings.image)
        if problem is None:
            kind = "docker" if candidate == "docker" else "podman-hpc" if "podman-hpc" in candidate else "podman"
            return kind, f"auto: {candidate} answers and has {settings.image}" + (" (in a Slurm job)" * in_slurm)
        why.append(f"{candidate}: {problem}")
    return "local", "auto: no container engine with the runtime image (" + "; ".join(why) + ")"


async def _choose(settings: Settings) -> tuple[Backend, str, int, Reservation | None]:
    """The backend, why, the runs it may have in flight (``max_workers`` within the host's task table), and the
    reservation of its programs' uids."""
    kind, reason = await detect(settings)
    bound = slots(settings, kind)
    # Sessions' workers are numbered past the runs' (backends/session_lease.py): their programs' users too.
    workers, slots_in_all = bound.workers, max(bound.workers, bound.most) + session_workers(settings)
    mapped, run_as = False, None
    if kind != "local":
        mapped = await asyncio.to_thread(engine_maps_ids, kind, settings)
        run_as = container_user(settings, mapped)
    uids = program_uids(settings, run_as, slots_in_all)
    engine = "docker" if kind == "docker" else settings.podman_binary or kind
    held = None
    if uids is not None:
        hosts = run_as is not None and not mapped  # container uids that are the host's own
        if hosts:
            # What servers that are gone left (a crash, a kill) holds their uids: removed first, as the backend's
            # start would, so that a server started again after its own crash finds its range free.
            if kind == "docker":
                if _silent_socket() is None:
                    await asyncio.to_thread(remove_stale_now)  # (the backend's start says why where it is not)
            else:
                await remove_stale_podman(engine, kind)
        # Reserved, not only looked at: two servers of one host started at once both found a range free. The
        # default moves on past ranges another server holds; one the operator set does not.
        moves = (
            "container_user" not in settings.model_fields_set
            if run_as is not None
            else "host_uid" not in (settings.model_fields_set)
        )
        taken = await asyncio.to_thread(take_range, uids, moves, in_use if hosts else lambda _: [], LAST_UID)
        if isinstance(taken, list):
            if run_as is None:  # the local backend's HOST_UID range: no engine, no container
                raise CannotIsolate(
                    f"the programs' host uids {uids[0]}..{uids[-1]} (HOST_UID and one per worker slot) cannot be "
                    f"taken: {'; '.join(taken[:4]) or 'no range was free'}. To fix: set CODEGYM_SANDBOX_HOST_UID to a "
                    "range no other sandbox server of this host holds, or leave it unset (the default moves past "
                    "ranges other servers hold)."
                )
            raise CannotIsolate(uids_refusal(uids, taken, engine) or "the programs' uids cannot be reserved")
        shift = taken[0][0] - uids[0]
        uids, held = taken
        if shift and run_as is not None:
            uid, _, gid = run_as.partition(":")
            run_as = f"{int(uid) + shift}:{int(gid or uid) + shift}"
        elif shift:
            settings = settings.model_copy(update={"host_uid": uids[0]})
    where = "container uids (the engine maps them)" if mapped else "host uids"
    log.info("programs run as %s", f"{where} {uids[0]}..{uids[-1]}, one per worker" if uids else "the server's uid")
    try:
        backend, why, most = await _made(settings, kind, reason, bound, run_as, workers, slots_in_all)
    except BaseException:
        if held is not None:
            held.release()
        raise
    return backend, why, most, held


async def _made(
    settings: Settings, kind: str, reason: str, bound: Slots, run_as: str | None, workers: int, slots_in_all: int
) -> tuple[Backend, str, int]:
    """The backend of ``kind`` (see :func:`_choose`)."""
    if kind == "local":
        checks = await asyncio.to_thread(host_checks, settings, kind)
        refused = refusal(checks)
        if refused is not None:
            raise CannotIsolate(refused)
        log.info("%s", startup_lines(checks))
        config = agent_config(settings, None, slots_in_all)
        config["session_slots"] = [
            max(bound.workers, bound.most),
            session_workers(settings),
        ]  # their users: a session's copies'
        local = LocalBackend(workers, settings.queue_size, config, settings.python)
        return local, reason, bound.most
    if bound.lowered:
        log.warning("host's task table: %s", bound.describe())  # the local backend says so in its host checks
    config = agent_config(settings, run_as, slots_in_all)
    config["session_slots"] = [max(bound.workers, bound.most), session_workers(settings)]
    if kind == "docker":
        return DockerBackend(workers, settings.queue_size, config, container_spec(settings)), reason, bound.most
    binary = settings.podman_binary or kind
    backend = PodmanBackend(
        workers, settings.queue_size, config, container_spec(settings), binary, settings.podman_args, name=kind
    )
    return backend, reason, bound.most
