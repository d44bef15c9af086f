from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from codegym_trainer.config import TrainConfig
from codegym_trainer.platform import (
    classify_gpu,
    cpu_threads,
    decide_offline,
    detect,
    hub_reachable,
    per_device_batch,
    training_rank,
)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Tesla V100-SXM2-32GB", "v100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA GeForce RTX 4090", "gpu"),
    ],
)
def test_gpu_families(name: str, kind: str) -> None:
    assert classify_gpu(name) == kind


def test_cpu_platform_settings() -> None:
    platform = detect(TrainConfig(), probe_hub=False)
    assert platform.kind == "cpu"
    assert platform.precision == "fp32" and not platform.gradient_checkpointing and not platform.use_vllm
    assert platform.offline  # the embedded model needs no hub
    assert "platform cpu" in platform.describe()


def test_offline_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    hub = TrainConfig(model="org/some-model")
    assert decide_offline(hub, probe=False) is True  # no probe: assume unreachable
    assert decide_offline(TrainConfig(model="org/x", offline="off"), probe=False) is False
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert decide_offline(TrainConfig(model="org/x"), probe=True) is True


def test_hub_probe_reports_a_closed_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert hub_reachable("127.0.0.1", port, timeout_s=1.0) is False
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        assert hub_reachable("127.0.0.1", listener.getsockname()[1], timeout_s=1.0) is True


def test_batch_split_for_small_gpus() -> None:
    platform = detect(TrainConfig(), probe_hub=False)
    assert per_device_batch(platform, 16) == (16, 1)
    v100 = type(platform)(**{**platform.__dict__, "kind": "v100"})
    assert per_device_batch(v100, 32) == (8, 4)


def test_threads() -> None:
    assert cpu_threads(3, 2) == 3
    assert 1 <= cpu_threads(0, 2) <= 2


LAUNCHERS = [
    {},  # one process, no launcher
    {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"},  # torchrun, accelerate launch
    {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"},  # mpirun (Open MPI)
    {"PMI_RANK": "0", "PMI_SIZE": "2"},  # mpirun (MPICH)
]


@pytest.mark.parametrize(("env", "rank", "processes"), [*zip(LAUNCHERS, [0, 1, 3, 0], [1, 4, 4, 2], strict=True)])
def test_a_launchers_rank_decides_which_process_writes(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], rank: int, processes: int
) -> None:
    for name in {name for launcher in LAUNCHERS for name in launcher}:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    platform = detect(TrainConfig(threads=0), probe_hub=False)
    assert (training_rank(), platform.rank, platform.processes) == (rank, rank, processes)
    assert platform.main is (rank == 0)
    assert ("training processes" in platform.describe()) is (processes > 1)
    # two processes on this machine share its free cores; threads asked for are taken as asked
    assert platform.threads <= max(1, (os.cpu_count() or 1) // int(env.get("LOCAL_WORLD_SIZE", "1")))
    assert detect(TrainConfig(threads=3), probe_hub=False).threads == 3


@pytest.mark.parametrize(("given", "seen"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_openmp_threads_do_not_spin_unless_asked(given: str | None, seen: str) -> None:
    """The package sets OpenMP's wait policy before torch loads (libgomp reads it once, at load); a user's
    own value is kept."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given is not None:
        env["OMP_WAIT_POLICY"] = given
    probe = (
        "import os, sys\n"
        "import codegym_trainer\n"
        "assert 'torch' not in sys.modules, 'torch loaded before the wait policy was set'\n"
        "import codegym_trainer.run\n"
        "print(os.environ['OMP_WAIT_POLICY'])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == seen
