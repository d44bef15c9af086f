"""Service settings, read from ``CODEGYM_SANDBOX_*`` environment variables."""

from __future__ import annotations

import ipaddress
import secrets
from functools import lru_cache
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# The least memory a session has: an idle one holds about 12 MiB (its interpreter and the processes that keep it),
# which its limit, and what it takes of the memory budget, must cover. A request for less gets this.
SESSION_MIN_MEMORY_MB = 16


class Limits(BaseSettings):
    """Per-run limits: the defaults a request gets, and the maxima it may ask for.

    A request asking for more than a maximum is clamped to it (never rejected): RL callers send one fixed
    configuration and should not fail because a server is configured tighter.
    """

    model_config = SettingsConfigDict(env_prefix="CODEGYM_SANDBOX_LIMITS__", extra="forbid")

    run_timeout_s: float = Field(10.0, gt=0, description="Default wall-clock limit of one run.")
    max_run_timeout_s: float = Field(60.0, gt=0, description="Largest wall-clock limit a request may ask for.")
    compile_timeout_s: float = Field(10.0, gt=0, description="Default wall-clock limit of a compile step.")
    max_compile_timeout_s: float = Field(60.0, gt=0, description="Largest compile limit a request may ask for.")
    memory_mb: int = Field(
        1024,
        gt=0,
        description="Default memory limit (also used for memory_limit_MB=-1), less where the memory budget cannot hold "
        "it beside what the server holds for a run (its outputs and fetched files: an exchange's 128 MiB by default).",
    )
    max_memory_mb: int = Field(4096, gt=0, description="Largest memory limit a request may ask for.")
    processes: int = Field(256, gt=0, description="Processes and threads one run may have at once.")
    output_bytes: int = Field(
        8 << 20, gt=0, description="stdout plus stderr kept per run; beyond it: OLE (dropped; 8x: stopped)."
    )
    file_size_bytes: int = Field(64 << 20, gt=0, description="Largest file a run may write.")
    scratch_bytes: int = Field(256 << 20, gt=0, description="Size of a run's scratch tmpfs.")
    open_files: int = Field(256, gt=0, description="Open file descriptors per process.")


class Sessions(BaseSettings):
    """Stateful interpreter sessions (``/v1/sessions``): their leases, limits and caps.

    A session is a Python interpreter kept between calls in a worker of its own (its state: globals, imports,
    files). Idle, it holds memory, never a worker slot: its memory limit is taken from the memory budget for
    its whole life, so the budget bounds how many sessions there can be, with ``max_sessions``.
    """

    model_config = SettingsConfigDict(env_prefix="CODEGYM_SANDBOX_SESSIONS__", extra="forbid")

    idle_ttl_s: float = Field(300.0, gt=0, description="A session unused this long is ended (its default TTL).")
    max_idle_ttl_s: float = Field(3600.0, gt=0, description="Largest idle TTL a request may ask for.")
    max_lifetime_s: float = Field(3600.0, gt=0, description="A session is ended this long after it was made.")
    max_sessions: int = Field(
        64,
        ge=0,
        description="Sessions one server holds at most; past it: 429. Each may hold PROCESSES tasks for its life: "
        "on the common pid_max of 32768, every 100 sessions lower the runs in flight by about 7.",
    )
    max_sessions_per_client: int = Field(
        64,
        ge=1,
        description="Sessions one client (its address) holds or is having started at most; past it: 429.",
    )
    client_starts_per_s: float = Field(
        0.0,
        ge=0,
        description="Sessions one client (its address) may have started a second, on average, beyond a burst of "
        "MAX_SESSIONS_PER_CLIENT at once (a GRPO batch's groups): each start is a worker's, on docker and podman a "
        "container's, about 0.4 s of the host's CPU that no run's account counts; past it: 429 with Retry-After. "
        "0: on docker and podman a quarter of the CPUs' count, so that one client's starts take about a tenth of "
        "the CPUs at most; on the local backend, whose start is a process's (tens of ms of CPU), no bound.",
    )
    memory_mb: int = Field(
        512, ge=SESSION_MIN_MEMORY_MB, description="Default memory of a session: everything it holds, files too."
    )
    max_memory_mb: int = Field(
        2048, ge=SESSION_MIN_MEMORY_MB, description="Largest session memory a request may ask for."
    )
    cell_timeout_s: float = Field(10.0, gt=0, description="Default wall-clock limit of a cell.")
    max_cell_timeout_s: float = Field(60.0, gt=0, description="Largest cell limit a request may ask for.")
    cpu_s: float = Field(600.0, gt=0, description="CPU time a session may use over its whole life.")
    memory_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Of MEMORY_BUDGET_MB, what sessions may hold together (each its memory limit and, on the "
        "container backends, its container's cost, for its life, those started ahead too); past it: 429. "
        "The rest is the runs', whatever sessions wait idle.",
    )
    client_memory_share: float = Field(
        1.0,
        gt=0,
        le=1,
        description="Of what sessions may hold together (MEMORY_SHARE of the budget), what the sessions of one client "
        "(its address) may hold; past it: 429. 1: one client may hold it all, for MAX_LIFETIME_S, as one trainer "
        "that is the server's only client wants; lower where clients of several tenants share a server.",
    )
    warm: int = Field(
        2,
        ge=0,
        description="Kernels started ahead with the default limits, once the first session was made (within "
        "MAX_SESSIONS, their memory taken from the budget): making a session takes one, and one starts behind it. "
        "0: a session's kernel starts when it is made.",
    )
    max_fork: int = Field(
        64,
        ge=1,
        le=1024,
        description="Copies one fork of a session may make at most (each is a session: MAX_SESSIONS and the memory "
        "share count them); past it: 422.",
    )
    processes: int = Field(
        16,
        gt=0,
        description="Processes and threads one session may have at once. Sessions hold theirs for their whole life: "
        "MAX_SESSIONS x this comes off the host's task table before the runs in flight are sized to what is left.",
    )


class Settings(BaseSettings):
    """The sandbox service's configuration."""

    model_config = SettingsConfigDict(env_prefix="CODEGYM_SANDBOX_", env_nested_delimiter="__", extra="forbid")

    host: str = Field("127.0.0.1", description="Address to bind.")
    port: int = Field(8080, description="Port to bind.")
    backend: Literal["auto", "local", "docker", "podman", "podman-hpc"] = Field(
        "auto",
        description="Where programs run. auto: in a Slurm job podman-hpc, then docker; elsewhere docker, then "
        "podman-hpc (plain podman where podman-hpc is not installed); local when no engine answers (or the "
        "runtime image is missing).",
    )
    workers: int = Field(0, ge=0, description="Worker slots always there; 0 means one per CPU core.")
    max_workers: int = Field(
        0,
        ge=0,
        description="Runs in flight at most: while runs wait and the CPUs sit idle (busy runs sleep or wait on "
        "I/O), more slots are lent up to this many (a few per CPU at a time, as the CPUs stay idle; within "
        "MEMORY_BUDGET_MB); 0 means max(128, 4 x workers). Each run's CPU time is limited on its own either way.",
    )
    reserve_workers: int | None = Field(
        None,
        ge=0,
        description="Lent workers started ahead and parked until lending needs them: a burst of runs that sleep "
        "then starts at once, not after workers' start-up (tens of ms of CPU each, on the CPUs the runs start "
        "on). The server reports ready (/readyz) once they are started (30 s at most). Unset: every slot lending "
        "may add (MAX_WORKERS - WORKERS) that fits in a sixteenth of MEMORY_BUDGET_MB at 12 MiB each (a parked "
        "local worker holds about 9); 0: none. Container backends start none ahead.",
    )
    memory_budget_mb: int = Field(
        0,
        ge=0,
        description="What the runs in flight (on lent workers too) hold at most, with what the server holds for "
        "them (their exchanges' outputs, inputs and files), the sessions' memory limits and, on the container "
        "backends, what each container costs the host beside them (its engine's processes, its agent and box: "
        "worker_cost_mb in /readyz, the pool's own workers' taken off at start): where each worker has a "
        "memory cgroup (local backend, as root) a run is admitted by a 64 MiB share and charged what its worker holds, "
        "and the runs that grow past their share once the budget is passed stand paused (their time stands still) "
        "until there is room, or for a tenth of their time limit at most; elsewhere a "
        "run is admitted by its memory limit. A run waits in the queue for its share (beyond QUEUE_SIZE waiting "
        "runs: 503, /run_code 504 after "
        "FUSION_QUEUE_WAIT_S, with Retry-After), and one that asks for a limit more than all of it gets 422 (the "
        "default limit and a compile's are fitted to it, beside what the server holds for a run); "
        "0 means this machine's memory (the server's cgroup limit where lower) less an eighth, at least 1 GiB, "
        "for the server, the local backend's agents and the system.",
    )
    fusion_queue_wait_s: float = Field(
        5.0,
        ge=0,
        description="How long a SandboxFusion request (/run_code) may wait for a worker before it is answered "
        "504 with Retry-After (the status verl retries); 0: as long as it takes.",
    )
    queue_size: int = Field(1024, ge=0, description="Runs that may wait for a worker before 503.")
    cache_entries: int = Field(65536, ge=0, description="Result cache size in entries; 0 disables it.")
    cache_bytes: int = Field(
        256 << 20,
        ge=0,
        description="Result cache size in bytes (outputs and files of steps; a quarter of it for whole "
        "/run_code answers); 0 disables it. A result costing more than a sixteenth of its share is not cached.",
    )
    fusion_cache: bool = Field(
        False,
        description="Answer repeated /run_code requests from the result cache. Off by default: upstream runs "
        "every request, and a program that prints the time or a random number must get a new answer.",
    )
    api_token: SecretStr | None = Field(None, description="Bearer token required on the API when set.")
    max_body_bytes: int = Field(64 << 20, gt=0, description="Largest request body; larger gets 413.")
    max_held_bodies_mb: int = Field(
        1024,
        gt=0,
        description="What the bodies of the requests in flight may hold in all (6 times their bytes, 7 with a "
        "character past U+00FF in them, 10 past U+FFFF, and 32 bytes for each JSON value in them: what they are "
        "parsed into), as they arrive and until the answer; beyond it 503 with Retry-After (504 on SandboxFusion's "
        "routes). A client (where MAX_CLIENT_REQUESTS tells clients apart) may hold a quarter of it, or one largest "
        "ASCII body, whichever is more; beyond it 429 (413 for a body that holds more than that alone).",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names the server answers for (the Host header, without port) besides IP literals and "
        "localhost; others get 421, so that a web page whose name resolves to this machine (DNS rebinding) "
        "cannot use it. Empty: those alone when bound to loopback, every host when bound beyond it (a token is "
        'required there); "*": every host.',
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses of the proxies in front of the server whose X-Forwarded-For names the client (the "
        "client of the per-client session cap, and whose NeMo-Skills session ids are whose). Empty: no proxy is "
        "trusted, and a client is the address it connects from (any local process could otherwise name itself "
        "any client: read another client's sessions, pass the cap).",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="Seconds a client has to send a request's whole head (request line and headers) from when it "
        "connects, or on a kept-alive connection from the head's first byte; then the connection is closed.",
    )
    send_stall_s: float = Field(
        30.0,
        gt=0,
        description="Seconds a client with more than 64 KiB of an answer unsent (in its connection's buffer and its "
        "socket's send queue), or any once its connection is closed, may take none of it; then the connection is "
        "reset, and the answer with it (the server and the kernel hold what a client does not read). The kernel "
        "itself ends a connection whose client takes nothing for twice this (TCP_USER_TIMEOUT).",
    )
    min_body_rate_kib_s: int = Field(
        1024,
        gt=0,
        description="The rate (KiB a second, on average) at which a request's body must come after HEADER_TIMEOUT_S; "
        "a slower one's connection is aborted (a body that stopped would hold what came of it for good).",
    )
    max_unsent_mb: int = Field(
        1024,
        gt=0,
        description="What the answers that wait for their clients to read them may hold in all, in the server's "
        "buffers and the kernel's send queues (those with more than 64 KiB unsent, or any once closed; a queue counts "
        "what the kernel charges for it, its buffers, when more than its bytes), once watched for a second; "
        "answers newer than that may hold half as much again while they wait to be judged. Beyond it, the answer "
        "its client would take longest to take at the rate it has shown gives way (a client holding more than a "
        "quarter of this, slower than SEND_STALL_S, first), a new one never before a judged one; new ones past "
        "their half, the client holding the most first: its connection is reset.",
    )
    shutdown_grace_s: int = Field(
        20,
        ge=1,
        description="On SIGTERM, how long requests in flight (cells and runs, and those queued behind them) have "
        "to finish; those still going then are cancelled (their clients get a 500), and every worker and session is "
        "ended. Below the orchestrator's own grace (Kubernetes' terminationGracePeriodSeconds, 30 s by default), so "
        "that the server ends its workers itself.",
    )
    max_waiting_connections: int = Field(
        1024,
        gt=0,
        description="Connections waiting for a request head (new ones, and kept-alive ones between requests) at "
        "most; beyond, the one that has waited longest is closed. At most a quarter of the server's open-file "
        "limit.",
    )
    max_client_requests: int = Field(
        256, ge=0, description="Requests one client address may have in flight; beyond: 429. 0: no limit."
    )
    max_runs_per_request: int = Field(
        1 << 18, gt=0, description="Largest programs x tests of one /v1/evaluate request (or batch); beyond: 422."
    )
    # 16 tests of the default output limit: a reward's usual ten tests go in one exchange (two exchanges of a
    # program cost a quarter of the throughput of bench/reward_bench.py); more tests are held 16 at a time.
    exchange_output_bytes: int = Field(
        128 << 20,
        gt=0,
        description="Output one exchange with a worker may bring back at most: a program's tests go to a worker "
        "together in exchanges of at most this / LIMITS__OUTPUT_BYTES tests (at least one), each judged as it comes "
        "back, so that what the server and its agents hold for a request does not grow with its tests.",
    )
    host_uid: int = Field(
        1_500_000_000,
        ge=1,
        description="First of the unprivileged host uids programs run as on the local backend started as root: the "
        "programs of worker slot N (fixed and lent ones) run as HOST_UID + N, so that the kernel's counts per user "
        "(pipe pages, epoll watches) are each worker's own, sessions' workers after the runs'; the range HOST_UID .. "
        "HOST_UID + max(WORKERS, MAX_WORKERS) + SESSIONS__MAX_SESSIONS + SESSIONS__WARM - 1 must be used by nothing "
        "else: the server reserves it (a lock per 4096 uids in /run/lock, held for its life), and where this is "
        "left at its default and another server holds it, moves on by 4096. Without root every worker's programs run "
        "as the server's own uid, and share those counts with each other and with the server.",
    )
    python: str | None = Field(
        None,
        description="Interpreter of Python runs on the local backend, an installation (not a virtual environment: "
        "programs get its standard library, never its site-packages); default: the distribution's /usr/bin/python3.X "
        "where the server runs on Python 3.X too and it has its whole standard library (the runtime image's "
        "interpreter), else the one the server's venv was made from.",
    )
    runtime_packages: str | None = Field(
        None,
        description="The packages programs may import on the local backend: a `pip install --target` directory "
        "(numpy, scipy, pandas, sortedcontainers); default: the checkout's .runtime/site-packages, made by "
        "scripts/setup. Without it programs get the standard library only.",
    )
    hide_paths: list[str] = Field(
        default_factory=list,
        description="Host directories programs never see on the local backend, even inside a toolchain's directory "
        "(a toolchain inside one is left out); the server's checkout and virtual environment always are.",
    )
    limits: Limits = Field(default_factory=Limits)
    sessions: Sessions = Field(default_factory=Sessions)
    image: str = Field("codegym-sandbox-runtime:latest", description="Runtime image of the container backends.")
    server_id: str = Field(
        default_factory=lambda: secrets.token_hex(3),
        pattern=r"^[a-z0-9]{1,16}$",
        description="Part of every container name, so that two servers on one host never collide.",
    )
    podman_binary: str | None = Field(None, description="The podman command (default: podman or podman-hpc).")
    podman_args: list[str] = Field(default_factory=list, description="Extra `run` flags, e.g. site flags.")
    container_memory_mb: int = Field(0, ge=0, description="Memory of one container; 0: the largest run + 512.")
    container_cpus: float = Field(1.0, gt=0, description="CPU quota of one container, in cores.")
    container_pids: int = Field(0, ge=0, description="Processes of one container; 0: the per-run limit + 64.")
    breaker_cooldown_s: float = Field(
        30.0, gt=0, description="How long a worker slot whose restarts keep failing waits before it tries again."
    )
    container_user: str = Field(
        "",
        pattern=r"^(\d+(:\d+)?)?$",
        description="uid:gid of the programs of the first worker slot in containers (the agent starts as root to run "
        "them so): slot N's run as uid+N:gid+N, so that the kernel's counts per user are each worker's own, sessions' "
        "workers after the runs'. Where the engine gives containers no user namespace (docker's default, rootful "
        "podman) these are the host's uids: the range uid .. uid + max(WORKERS, MAX_WORKERS) + "
        "SESSIONS__MAX_SESSIONS + SESSIONS__WARM - 1 must be used by nothing else, and the server refuses to start "
        "where a user or a process of the host has one of them. Empty: 1700000000:1700000000 there, past the ids "
        "distributions and directory services allocate; 1000:1000 where the engine maps container ids into "
        "subordinate ones (rootless podman, docker's userns-remap, podman's --userns), whose map holds no such uid.",
    )
    container_runtime: str = Field(
        "",
        description="OCI runtime of the container backends' containers: runsc for gVisor, a kernel of its own "
        "between programs and the host's (for untrusted code of many tenants; every fork and system call costs "
        "more). docker: a runtime registered with the daemon (/etc/docker/daemon.json, scripts/engines does it); "
        "podman: a name in containers.conf or a path. Empty: the engine's default (runc).",
    )

    @model_validator(mode="after")
    def _token_off_loopback(self) -> Settings:
        if self.api_token is None and not is_loopback(self.host):
            raise ValueError(
                f"binding {self.host} exposes the sandbox beyond this machine: set CODEGYM_SANDBOX_API_TOKEN"
            )
        for proxy in self.trusted_proxies:
            try:
                ipaddress.ip_network(proxy)
            except ValueError:
                # "*" would take whatever a client writes in X-Forwarded-For for its address: any client at all.
                raise ValueError(
                    f"TRUSTED_PROXIES: {proxy[:64]!r} is no address or network of a proxy in front of the server"
                ) from None
        return self


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@lru_cache
def get_settings() -> Settings:
    return Settings()
