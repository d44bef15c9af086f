# shellcheck shell=bash
# Functions shared by codegym's Slurm scripts: start the sandbox and a model server on the allocated
# node(s), wait for their health checks, and stop everything on exit. Sourced, never run.
#
# Settings (environment variables; defaults in brackets):
#   CODEGYM_DRY_RUN      1: print every command instead of running it, and skip the health waits [0]
#   CODEGYM_RUNTIME      podman-hpc or apptainer: how containers run [podman-hpc]
#   CODEGYM_VENV         virtual environment with codegym installed (shared file system) [$HOME/codegym/.venv]
#   CODEGYM_SANDBOX_BACKEND  where the venv's sandbox runs programs (podman-hpc runtime) [podman-hpc]
#   CODEGYM_RUNTIME_IMAGE  image of the program containers (podman-hpc) [codegym-sandbox-runtime:latest]
#   CODEGYM_SANDBOX_SIF  the sandbox server's image as a SIF file (apptainer) [$CODEGYM_IMAGE_DIR/codegym-sandbox.sif]
#   CODEGYM_VLLM_IMAGE   vLLM's OpenAI server image [vllm/vllm-openai:latest]
#   CODEGYM_VLLM_SIF     the same as a SIF file (apptainer) [$CODEGYM_IMAGE_DIR/vllm-openai.sif]
#   CODEGYM_IMAGE_DIR    where SIF files live [$SCRATCH/codegym-images or $HOME/codegym-images]
#   CODEGYM_SANDBOX_PORT / CODEGYM_VLLM_PORT  [8080 / 8000]
#   CODEGYM_SANDBOX_WORKERS  concurrent programs per sandbox node [the node's CPUs in this job, less 2]
#   CODEGYM_HEALTH_TIMEOUT   seconds to wait for each health check [600]
#   HF_HOME              model cache shared by vLLM and the trainer [$SCRATCH/hf or $HOME/.cache/huggingface]

CODEGYM_DRY_RUN=${CODEGYM_DRY_RUN:-0}
CODEGYM_RUNTIME=${CODEGYM_RUNTIME:-podman-hpc}
CODEGYM_VENV=${CODEGYM_VENV:-$HOME/codegym/.venv}
CODEGYM_SANDBOX_BACKEND=${CODEGYM_SANDBOX_BACKEND:-podman-hpc}
CODEGYM_IMAGE_DIR=${CODEGYM_IMAGE_DIR:-${SCRATCH:-$HOME}/codegym-images}
CODEGYM_RUNTIME_IMAGE=${CODEGYM_RUNTIME_IMAGE:-codegym-sandbox-runtime:latest}
CODEGYM_SANDBOX_SIF=${CODEGYM_SANDBOX_SIF:-$CODEGYM_IMAGE_DIR/codegym-sandbox.sif}
CODEGYM_VLLM_IMAGE=${CODEGYM_VLLM_IMAGE:-vllm/vllm-openai:latest}
CODEGYM_VLLM_SIF=${CODEGYM_VLLM_SIF:-$CODEGYM_IMAGE_DIR/vllm-openai.sif}
CODEGYM_SANDBOX_PORT=${CODEGYM_SANDBOX_PORT:-8080}
CODEGYM_VLLM_PORT=${CODEGYM_VLLM_PORT:-8000}
CODEGYM_HEALTH_TIMEOUT=${CODEGYM_HEALTH_TIMEOUT:-600}
HF_HOME=${HF_HOME:-${SCRATCH:-$HOME/.cache}/hf}
export HF_HOME
JOB_ID=${SLURM_JOB_ID:-local}
CODEGYM_PIDS=()
CMD=()

say() { echo "codegym[$JOB_ID]: $*" >&2; }
die() { say "error: $*"; exit 1; }
dry() { [ "$CODEGYM_DRY_RUN" = 1 ]; }

# Run a command, or print it (shell-quoted, so it can be pasted) under CODEGYM_DRY_RUN=1.
run() {
    if dry; then
        printf '+'; printf ' %q' "$@"; printf '\n'
    else
        "$@"
    fi
}

# Export NAME=VALUE (printed under CODEGYM_DRY_RUN=1).
set_env() {
    dry && echo "+ export $1=$2"
    export "$1=$2"
}

# Start a long-lived command in the background; cleanup stops it on exit.
start() {
    if dry; then
        printf '+'; printf ' %q' "$@"; printf ' &\n'
    else
        "$@" &
        CODEGYM_PIDS+=("$!")
    fi
}

# Wait until URL answers 2xx, or fail after CODEGYM_HEALTH_TIMEOUT seconds (or when the service died).
wait_healthy() {
    local url=$1 what=$2 deadline
    if dry; then
        echo "+ wait until $url answers ($what)"
        return 0
    fi
    deadline=$((SECONDS + CODEGYM_HEALTH_TIMEOUT))
    until curl -fs -o /dev/null --max-time 5 "$url"; do
        for pid in "${CODEGYM_PIDS[@]}"; do
            kill -0 "$pid" 2>/dev/null || die "$what exited before it was healthy"
        done
        [ "$SECONDS" -lt "$deadline" ] || die "$what not healthy at $url after ${CODEGYM_HEALTH_TIMEOUT}s"
        sleep 2
    done
    say "$what is healthy ($url)"
}

# Stop every background service and remove this job's containers; installed by on_exit_cleanup.
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    say "cleaning up"
    for pid in "${CODEGYM_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${CODEGYM_PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [ "$CODEGYM_RUNTIME" = podman-hpc ] && command -v podman-hpc >/dev/null; then
        # the sandbox removes its containers when it stops; a killed server leaves them to this
        podman-hpc ps -aq --filter "name=codegym-.*-$JOB_ID" | xargs -r podman-hpc rm -f >/dev/null 2>&1 || true
    fi
    exit "$status"
}

on_exit_cleanup() {
    if dry; then
        echo "+ trap cleanup EXIT INT TERM"
    else
        trap cleanup EXIT INT TERM
    fi
}

# CPUs this job has on one node, less two for the server and the system.
sandbox_workers() {
    local cpus=${SLURM_CPUS_ON_NODE:-$(nproc)}
    echo "${CODEGYM_SANDBOX_WORKERS:-$((cpus > 3 ? cpus - 2 : 1))}"
}

# Set CMD to the command that serves the sandbox on this node, bound to HOST.
sandbox_command() {
    local host=$1
    case "$CODEGYM_RUNTIME" in
        podman-hpc)
            # The server runs from the venv; each worker slot is a podman-hpc container of the runtime image.
            CMD=("$CODEGYM_VENV/bin/codegym-sandbox" serve --host "$host" --port "$CODEGYM_SANDBOX_PORT"
                --backend "$CODEGYM_SANDBOX_BACKEND" --workers "$(sandbox_workers)")
            ;;
        apptainer)
            # The server image under Apptainer; programs run in namespaces inside it (local backend).
            # --containall starts from a clean environment: the token goes in through APPTAINERENV_.
            export APPTAINERENV_CODEGYM_SANDBOX_API_TOKEN=${CODEGYM_SANDBOX_API_TOKEN:-}
            CMD=(apptainer exec --containall --no-home --writable-tmpfs "$CODEGYM_SANDBOX_SIF"
                codegym-sandbox serve --host "$host" --port "$CODEGYM_SANDBOX_PORT"
                --backend local --workers "$(sandbox_workers)")
            ;;
        *) die "CODEGYM_RUNTIME must be podman-hpc or apptainer, not $CODEGYM_RUNTIME" ;;
    esac
}

# Start the sandbox on this node and wait for it. HOST: 127.0.0.1 (one node) or 0.0.0.0 (others call it;
# then CODEGYM_SANDBOX_API_TOKEN must be set).
start_sandbox() {
    local host=${1:-127.0.0.1}
    export CODEGYM_SANDBOX_IMAGE=$CODEGYM_RUNTIME_IMAGE
    sandbox_command "$host"
    start "${CMD[@]}"
    wait_healthy "http://127.0.0.1:$CODEGYM_SANDBOX_PORT/readyz" sandbox
}

# Set CMD to the command that serves MODEL (and extra vLLM flags) on this node's GPUs, OpenAI-compatible.
vllm_command() {
    local model=$1
    shift
    case "$CODEGYM_RUNTIME" in
        podman-hpc)
            CMD=(podman-hpc run --rm --gpu --name "codegym-vllm-$JOB_ID" --ipc host -p "$CODEGYM_VLLM_PORT:8000"
                -v "$HF_HOME:/models" -e HF_HOME=/models -e HF_TOKEN "$CODEGYM_VLLM_IMAGE" --model "$model" "$@")
            ;;
        apptainer)
            export APPTAINERENV_HF_HOME=/models APPTAINERENV_HF_TOKEN=${HF_TOKEN:-}
            CMD=(apptainer run --nv --containall --no-home --bind "$HF_HOME:/models"
                "$CODEGYM_VLLM_SIF" --model "$model" --port "$CODEGYM_VLLM_PORT" "$@")
            ;;
        *) die "CODEGYM_RUNTIME must be podman-hpc or apptainer, not $CODEGYM_RUNTIME" ;;
    esac
}

# Start vLLM serving MODEL on this node and wait for it.
start_vllm() {
    vllm_command "$@"
    start "${CMD[@]}"
    wait_healthy "http://127.0.0.1:$CODEGYM_VLLM_PORT/health" vLLM
}

# A random API token (the sandbox refuses to listen beyond loopback without one).
new_token() {
    if dry; then echo DRY-RUN-TOKEN; else od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; fi
}

# The host names of a Slurm node list (compressed form, e.g. cpu[01-04]).
expand_nodes() {
    if dry && ! command -v scontrol >/dev/null; then
        echo "$1" | tr ',' '\n'
    else
        scontrol show hostnames "$1"
    fi
}
