#!/usr/bin/env bash
# MPI step of CI: installs Debian's OpenMPI (and libclang for the bindings), builds dpml with
# the `mpi` feature and runs the MPI tests (`mpirun --allow-run-as-root --oversubscribe -np 2`)
# plus the checkpoint tests. Run from the repository root: bash .ci/mpi.sh
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
if ! command -v mpirun >/dev/null || ! dpkg -s libopenmpi-dev libclang-dev >/dev/null 2>&1; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libopenmpi-dev openmpi-bin libclang-dev
fi

start=$(date +%s)
# The default build needs no MPI; the feature build links the system's libmpi.
cargo clippy -p dpml --features mpi --all-targets --locked -- -D warnings
cargo build -p dpml --features mpi --locked
# OpenMPI refuses root unless told; oversubscribe lets 2 ranks share fewer cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo test -p dpml --features mpi --locked --test cli_mpi --test cli_checkpoint -- --test-threads=1
echo "mpi CI step: $(( $(date +%s) - start )) s (after the apt install)"
