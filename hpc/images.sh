#!/usr/bin/env bash
# Prepare codegym's images on a login node, once per image version.
#
#   hpc/images.sh [--dry-run] podman-hpc    # pull the runtime and vLLM images and migrate them for compute nodes
#   hpc/images.sh [--dry-run] apptainer     # build SIF files of the sandbox server and vLLM in CODEGYM_IMAGE_DIR
#
# podman-hpc: CODEGYM_RUNTIME_IMAGE (the program containers' image, from a registry your site reaches, or
# built here with CODEGYM_BUILD=1 from services/sandbox/runtime/Dockerfile) and CODEGYM_VLLM_IMAGE are
# pulled, then `podman-hpc migrate` copies them to the squashfs store that compute nodes read.
# apptainer: CODEGYM_SANDBOX_SERVER_IMAGE [docker-daemon://codegym-sandbox:latest] and
# CODEGYM_VLLM_IMAGE (prefixed with docker://) are converted to SIF files.
set -euo pipefail
if [ "${1:-}" = --dry-run ]; then
    export CODEGYM_DRY_RUN=1
    shift
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hpc/lib.sh
source "$here/lib.sh"
runtime=${1:-$CODEGYM_RUNTIME}

case "$runtime" in
    podman-hpc)
        if [ "${CODEGYM_BUILD:-0}" = 1 ]; then
            run podman-hpc build -f "$here/../services/sandbox/runtime/Dockerfile" -t "$CODEGYM_RUNTIME_IMAGE" \
                "$here/../services/sandbox"
        else
            run podman-hpc pull "$CODEGYM_RUNTIME_IMAGE"
        fi
        run podman-hpc migrate "$CODEGYM_RUNTIME_IMAGE"
        run podman-hpc pull "$CODEGYM_VLLM_IMAGE"
        run podman-hpc migrate "$CODEGYM_VLLM_IMAGE"
        ;;
    apptainer)
        run mkdir -p "$CODEGYM_IMAGE_DIR"
        run apptainer build --force "$CODEGYM_SANDBOX_SIF" \
            "${CODEGYM_SANDBOX_SERVER_IMAGE:-docker-daemon://codegym-sandbox:latest}"
        run apptainer build --force "$CODEGYM_VLLM_SIF" "docker://$CODEGYM_VLLM_IMAGE"
        ;;
    *) die "usage: hpc/images.sh [--dry-run] podman-hpc|apptainer" ;;
esac
say "images ready for $runtime"
