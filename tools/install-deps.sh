#!/usr/bin/env bash
# Installs the Debian packages Strata builds and tests with, when missing.
# Quick and silent when everything is there. Needs root (or sudo) to install.
set -euo pipefail

packages=(
  cmake ninja-build ccache lld g++ python3
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin libopenblas-dev
  iproute2 util-linux # tools/cluster.sh: ip, tc; unshare, flock
  libgtest-dev
  python3-onnx
  clang-19 libclang-rt-19-dev # the libFuzzer build (tools/fuzz.sh)
  python3-sklearn python3-torch # digits.cnn and python.readme (docs/data.md, docs/python.md)
  slurm-wlm # slurm.srun: a one-node cluster (docs/distributed.md)
)
# python3-onnx: models/generate_model.py writes the weightless models the
# compile-scale test compiles. python3-sklearn brings python3-numpy: the
# digits dataset (models/digits.py); python3-torch: the strata Python
# package's compile() exports with torch.onnx.export. `tools/install-deps.sh --models` adds what
# models/ needs to re-export from PyTorch.
if [[ "${1:-}" == "--models" ]]; then
  packages+=(python3-numpy python3-torchvision)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
