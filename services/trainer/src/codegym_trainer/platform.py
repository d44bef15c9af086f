"""What this machine is (CPU, V100, A100, H100) and what follows: precision, batch sizes, checkpointing, hub."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from .config import TrainConfig

Kind = Literal["cpu", "v100", "a100", "h100", "gpu"]
HUB_HOST = "huggingface.co"
# Where a launcher of several training processes (torchrun, accelerate launch, mpirun) puts each one's rank
# and their number: the variables accelerate reads to start the process group.
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK")
SIZE_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")


@dataclass(frozen=True)
class Platform:
    """The machine and the settings chosen for it (logged at the start of a run)."""

    kind: Kind
    device_name: str
    gpu_memory_gb: float
    cpu_cores: int
    precision: Literal["fp32", "bf16", "fp16"]
    gradient_checkpointing: bool
    offline: bool
    use_vllm: bool
    vllm_mode: Literal["server", "colocate"]
    threads: int
    rank: int = 0  # this process among the run's training processes
    processes: int = 1

    @property
    def main(self) -> bool:
        """Whether this process writes the run's files and prints (the others train, and keep quiet)."""
        return self.rank == 0

    def describe(self) -> str:
        """One line for the log."""
        gen = f"vLLM ({self.vllm_mode})" if self.use_vllm else "transformers generate"
        mem = f", {self.gpu_memory_gb:.0f} GiB" if self.gpu_memory_gb else ""
        several = f", {self.processes} training processes" if self.processes > 1 else ""
        return (
            f"platform {self.kind} ({self.device_name}{mem}, {self.cpu_cores} CPU cores{several}): "
            f"precision {self.precision}, "
            f"gradient checkpointing {'on' if self.gradient_checkpointing else 'off'}, generation by {gen}, "
            f"{self.threads} torch thread(s), "
            f"hub {'offline (cached and local models only)' if self.offline else 'online'}"
        )


def classify_gpu(name: str) -> Kind:
    """The GPU family from its device name."""
    upper = name.upper()
    for kind in ("H100", "H200", "A100", "V100"):
        if kind in upper:
            return "h100" if kind in ("H100", "H200") else ("a100" if kind == "A100" else "v100")
    return "gpu"


def hub_reachable(host: str = HUB_HOST, port: int = 443, timeout_s: float = 2.0) -> bool:
    """Whether a TCP connection to the model hub opens."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def model_is_local(model: str) -> bool:
    """A path on disk or the embedded model: no hub needed."""
    from .config import EMBEDDED_MODEL

    return model == EMBEDDED_MODEL or Path(model).expanduser().exists()


def decide_offline(config: TrainConfig, *, probe: bool = True) -> bool:
    """Offline mode: asked for, set in the environment, not needed (local model), or the hub is unreachable."""
    if config.offline != "auto":
        return config.offline == "on"
    if os.environ.get("HF_HUB_OFFLINE", "") in ("1", "true", "True", "ON", "on"):
        return True
    if model_is_local(config.model):
        return True
    return not (probe and hub_reachable())


def _vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def cpu_threads(requested: int, cores: int) -> int:
    """Torch threads: as asked, else the cores not already busy (at least 1).

    On a shared machine OpenMP threads that outnumber the free cores spin against each other: a forward
    pass of a small model then takes ten times longer with two threads than with one.
    """
    if requested:
        return requested
    try:
        busy = os.getloadavg()[0]
    except OSError:
        busy = 0.0
    return max(1, min(cores, round(cores - busy)))


def _launched(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return default


def training_rank() -> int:
    """This process's rank among the run's training processes (0 when it is the only one).

    Read from the launcher's variables, before the trainer starts the process group: every process trains,
    and only rank 0 writes the run's files (metrics, evaluations, summary) and prints.
    """
    return _launched(RANK_VARIABLES, 0)


def end_process_group() -> None:
    """Close the training processes' group (torchrun, accelerate launch) before this process exits.

    The trainer starts it and nothing closes it: left to the interpreter's exit, gloo's threads are torn
    down while still joinable, and a process can abort ("terminate called without an active exception")
    after a run that finished well, failing the whole launch. The barrier first, so that no process closes
    it while another still talks to it.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def detect(config: TrainConfig, *, probe_hub: bool = True) -> Platform:
    """Inspect the machine and fill the ``auto`` settings of ``config``."""
    cores = os.cpu_count() or 1
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        kind = classify_gpu(name)
        memory = torch.cuda.get_device_properties(0).total_memory / 2**30
    else:
        name, kind, memory = "cpu", "cpu", 0.0
    if config.precision != "auto":
        precision = config.precision
    elif kind in ("a100", "h100") or (kind == "gpu" and torch.cuda.is_bf16_supported()):
        precision = "bf16"
    elif kind != "cpu":
        precision = "fp16"
    else:
        precision = "fp32"
    checkpointing = kind != "cpu" if config.gradient_checkpointing == "auto" else config.gradient_checkpointing == "on"
    if config.vllm_mode == "auto":
        use_vllm = kind != "cpu" and _vllm_installed()
        vllm_mode: Literal["server", "colocate"] = "server"
    else:
        use_vllm = config.vllm_mode != "off"
        vllm_mode = "colocate" if config.vllm_mode == "colocate" else "server"
    local = max(1, _launched(("LOCAL_WORLD_SIZE",), 1))
    return Platform(
        kind=kind,
        device_name=name,
        gpu_memory_gb=memory,
        cpu_cores=cores,
        precision=precision,
        gradient_checkpointing=checkpointing,
        offline=decide_offline(config, probe=probe_hub),
        use_vllm=use_vllm,
        vllm_mode=vllm_mode,
        # threads asked for are taken as asked; the free cores are shared by the training processes here
        threads=config.threads or max(1, cpu_threads(0, cores) // local),
        rank=training_rank(),
        processes=max(1, _launched(SIZE_VARIABLES, 1)),
    )


def per_device_batch(platform: Platform, completions_per_step: int) -> tuple[int, int]:
    """(completions per forward pass, gradient accumulation steps) that fit the machine.

    A V100 (16-32 GiB) takes the step in smaller slices; larger GPUs and the CPU take it whole.
    """
    cap = {"v100": 8, "gpu": 16}.get(platform.kind, completions_per_step)
    micro = completions_per_step
    while micro > cap and micro % 2 == 0:
        micro //= 2
    return micro, completions_per_step // micro
