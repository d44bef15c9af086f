"""hpc/: every script is valid bash and shellcheck-clean; dry runs print the commands a job would run;
the sandbox's start, health wait and clean-up on exit run for real on this machine (local backend)."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from deploy_tools import ROOT, tool, trainer_cli

HPC = ROOT / "hpc"
SCRIPTS = sorted(p for p in HPC.iterdir() if p.suffix in (".sh", ".sbatch"))
VENV = Path(sys.executable).parent.parent


def bash(script: str | Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CODEGYM_", "SLURM_", "APPTAINERENV_"))}
    return subprocess.run(
        ["bash", str(script), *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def commands(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [line[2:] for line in done.stdout.splitlines() if line.startswith("+ ")]


def test_there_are_scripts() -> None:
    assert {p.name for p in SCRIPTS} >= {"lib.sh", "images.sh", "eval.sbatch", "train.sbatch", "train-multinode.sbatch"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_parses(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_is_shellcheck_clean(script: Path) -> None:
    done = subprocess.run(
        [tool("shellcheck"), "--external-sources", "--shell=bash", str(script)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout


def test_eval_dry_run_starts_sandbox_and_vllm_then_evaluates() -> None:
    cmds = commands(
        bash(
            HPC / "eval.sbatch",
            "--dry-run",
            "org/model",
            "mbpp",
            "--limit",
            "5",
            CODEGYM_VENV="/shared/venv",
            SLURM_JOB_ID="42",
            SLURM_CPUS_ON_NODE="32",
        )
    )
    assert cmds[0] == "trap cleanup EXIT INT TERM"
    assert cmds[1] == (
        "/shared/venv/bin/codegym-sandbox serve --host 127.0.0.1 --port 8080 --backend podman-hpc --workers 30 &"
    )
    assert cmds[2] == "wait until http://127.0.0.1:8080/readyz answers (sandbox)"
    assert cmds[3].startswith("podman-hpc run --rm --gpu --name codegym-vllm-42 ")
    assert cmds[3].endswith("vllm/vllm-openai:latest --model org/model &")
    assert cmds[4] == "wait until http://127.0.0.1:8000/health answers (vLLM)"
    assert cmds[5] == (
        "/shared/venv/bin/codegym-eval run --dataset mbpp --base-url http://127.0.0.1:8000/v1 --model org/model "
        f"--api-key none --sandbox-url http://127.0.0.1:8080 --output {ROOT}/results/eval-42 --limit 5"
    )


def test_apptainer_variant_runs_the_images_as_sif_files() -> None:
    cmds = commands(
        bash(
            HPC / "eval.sbatch",
            "--dry-run",
            "m",
            CODEGYM_RUNTIME="apptainer",
            CODEGYM_IMAGE_DIR="/scratch/img",
            SLURM_CPUS_ON_NODE="8",
        )
    )
    assert cmds[1] == (
        "apptainer exec --containall --no-home --writable-tmpfs /scratch/img/codegym-sandbox.sif "
        "codegym-sandbox serve --host 127.0.0.1 --port 8080 --backend local --workers 6 &"
    )
    assert cmds[3].startswith("apptainer run --nv --containall --no-home --bind ")
    assert "/scratch/img/vllm-openai.sif --model m --port 8000 &" in cmds[3]
    images = commands(bash(HPC / "images.sh", "--dry-run", "apptainer", CODEGYM_IMAGE_DIR="/scratch/img"))
    assert images == [
        "mkdir -p /scratch/img",
        "apptainer build --force /scratch/img/codegym-sandbox.sif docker-daemon://codegym-sandbox:latest",
        "apptainer build --force /scratch/img/vllm-openai.sif docker://vllm/vllm-openai:latest",
    ]


def test_images_pull_and_migrate_for_podman_hpc() -> None:
    cmds = commands(bash(HPC / "images.sh", "--dry-run", "podman-hpc"))
    assert cmds == [
        "podman-hpc pull codegym-sandbox-runtime:latest",
        "podman-hpc migrate codegym-sandbox-runtime:latest",
        "podman-hpc pull vllm/vllm-openai:latest",
        "podman-hpc migrate vllm/vllm-openai:latest",
    ]
    built = commands(bash(HPC / "images.sh", "--dry-run", "podman-hpc", CODEGYM_BUILD="1"))
    assert built[0].startswith("podman-hpc build -f ") and "services/sandbox/runtime/Dockerfile" in built[0]


def test_train_dry_run_splits_gpus_between_vllm_serve_and_the_trainer() -> None:
    env = {
        "CODEGYM_TRL_VLLM": "1",
        "CODEGYM_MODEL": "org/m",
        "CODEGYM_VENV": "/v",
        "SLURM_GPUS_ON_NODE": "4",
        "SLURM_JOB_ID": "7",
    }
    cmds = commands(bash(HPC / "train.sbatch", "--dry-run", "cfg.yaml", "--train-steps", "10", **env))
    assert "env CUDA_VISIBLE_DEVICES=3 /v/bin/trl vllm-serve --model org/m --host 127.0.0.1 --port 8001 &" in cmds
    assert "export CUDA_VISIBLE_DEVICES=0,1,2" in cmds
    assert cmds[-1] == (
        "/v/bin/codegym-train --config cfg.yaml --sandbox-url http://127.0.0.1:8080 "
        f"--output-dir {ROOT}/results/train-7 --vllm-mode server --host 127.0.0.1 --port 8001 --train-steps 10"
    )


def test_learning_curve_dry_run_points_the_bench_at_the_jobs_sandbox() -> None:
    cmds = commands(
        bash(
            HPC / "learning-curve.sbatch",
            "--dry-run",
            "--seeds",
            "4",
            CODEGYM_VENV="/v",
            SLURM_JOB_ID="5",
            CODEGYM_MODEL="org/m",
        )
    )
    assert cmds[1].startswith("/v/bin/codegym-sandbox serve --host 127.0.0.1 --port 8080")
    bench = cmds[-1].split()
    assert bench[:2] == ["/v/bin/python", f"{ROOT}/bench/learning_curve.py"]
    assert bench[bench.index("--model") + 1] == "org/m" and bench[bench.index("--vllm-mode") + 1] == "colocate"
    assert bench[bench.index("--sandbox-url") + 1] == "http://127.0.0.1:8080"
    assert bench[bench.index("--out") + 1] == f"{ROOT}/results/learning-curve-5"
    assert bench[-2:] == ["--seeds", "4"]  # the job's own flags come last, and argparse lets the last win
    spec = importlib.util.spec_from_file_location("learning_curve", ROOT / "bench" / "learning_curve.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    args = module.parse(bench[2:])  # every flag the recipe passes is one the bench takes
    assert args.seeds == [4] and args.steps == 100 and args.humaneval_limit == 164 and args.humaneval_samples == 10


def test_multinode_dry_run_gives_the_trainer_every_sandbox() -> None:
    cmds = commands(
        bash(
            HPC / "train-multinode.sbatch",
            "--dry-run",
            "cfg.yaml",
            CODEGYM_VENV="/v",
            SLURM_JOB_NODELIST_HET_GROUP_0="cpu01,cpu02,cpu03",
            SLURM_JOB_ID="9",
        )
    )
    assert cmds[1] == (
        "srun --het-group=0 --ntasks-per-node=1 --kill-on-bad-exit=1 /v/bin/codegym-sandbox serve --host 0.0.0.0 "
        "--port 8080 --backend podman-hpc --workers 0 &"
    )
    assert cmds[2:5] == [f"wait until http://cpu0{i}:8080/readyz answers (sandbox on cpu0{i})" for i in (1, 2, 3)]
    assert cmds[5] == (
        "srun --het-group=1 /v/bin/codegym-train --config cfg.yaml --sandbox-url http://cpu01:8080 "
        f"--sandbox-url http://cpu02:8080 --sandbox-url http://cpu03:8080 --output-dir {ROOT}/results/train-9"
    )


def test_scripts_explain_missing_arguments() -> None:
    for script in ("eval.sbatch", "train.sbatch", "train-multinode.sbatch"):
        done = bash(HPC / script, "--dry-run")
        assert done.returncode != 0 and "usage: hpc/" in done.stderr, script
    done = bash(HPC / "train-multinode.sbatch", "--dry-run", "cfg.yaml")
    assert done.returncode != 0 and "heterogeneous job" in done.stderr
    done = bash(HPC / "eval.sbatch", "--dry-run", "m", CODEGYM_RUNTIME="docker")
    assert done.returncode != 0 and "CODEGYM_RUNTIME must be podman-hpc or apptainer" in done.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lifecycle(port: int, then: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Source lib.sh for real: start the sandbox from this venv, wait for it, run THEN, exit."""
    driver = f"set -euo pipefail; source hpc/lib.sh; on_exit_cleanup; start_sandbox 127.0.0.1; {then}"
    settings = {
        "CODEGYM_SANDBOX_BACKEND": "local",
        "CODEGYM_VENV": str(VENV),
        "CODEGYM_SANDBOX_PORT": str(port),
        "CODEGYM_SANDBOX_WORKERS": "1",
        "CODEGYM_HEALTH_TIMEOUT": "60",
        **env,
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith(("CODEGYM_", "SLURM_"))}
    return subprocess.run(
        ["bash", "-c", driver], cwd=ROOT, env={**base, **settings}, capture_output=True, text=True, timeout=120
    )


def _closed(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_sandbox_starts_answers_and_is_stopped_on_exit() -> None:
    port = _free_port()
    request = '{"code": "print(6 * 7)", "language": "python"}'
    done = _lifecycle(
        port, f"curl -fsS http://127.0.0.1:{port}/run_code -H content-type:application/json -d '{request}'"
    )
    assert done.returncode == 0, done.stderr
    assert '"stdout":"42\\n"' in done.stdout
    assert "sandbox is healthy" in done.stderr and "cleaning up" in done.stderr
    assert _closed(port)


def test_a_failing_job_still_stops_the_sandbox() -> None:
    port = _free_port()
    done = _lifecycle(port, "false")
    assert done.returncode == 1
    assert "cleaning up" in done.stderr and _closed(port)


def test_a_service_that_dies_before_it_is_healthy_fails_the_job_at_once() -> None:
    done = _lifecycle(_free_port(), "true", CODEGYM_SANDBOX_BACKEND="no-such-backend")
    assert done.returncode == 1
    assert "sandbox exited before it was healthy" in done.stderr


def test_the_trainer_accepts_the_scripts_command_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "train.yaml"
    config.write_text((ROOT / "docs" / "deploy" / "examples" / "train.yaml").read_text())
    single = commands(
        bash(
            HPC / "train.sbatch",
            "--dry-run",
            str(config),
            CODEGYM_TRL_VLLM="1",
            CODEGYM_MODEL="m",
            CODEGYM_VENV="/v",
            SLURM_GPUS_ON_NODE="2",
        )
    )[-1]
    multi = commands(
        bash(
            HPC / "train-multinode.sbatch",
            "--dry-run",
            str(config),
            CODEGYM_VENV="/v",
            SLURM_JOB_NODELIST_HET_GROUP_0="cpu01,cpu02",
        )
    )[-1]
    for name in [n for n in os.environ if n.startswith("CODEGYM_")]:
        monkeypatch.delenv(name)
    parsed = trainer_cli().parse_config(single.split()[1:])
    assert (parsed.vllm_mode, parsed.host, parsed.port) == ("server", "127.0.0.1", 8001)
    parsed = trainer_cli().parse_config(multi.split()[3:])  # after `srun --het-group=1 codegym-train`
    assert parsed.sandbox_url == ["http://cpu01:8080", "http://cpu02:8080"]
