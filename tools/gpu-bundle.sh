#!/usr/bin/env bash
# Packs what Strata's GPU checks and benchmark need on a GPU machine that
# has CUDA and PyTorch but none of Debian's MLIR, OpenMPI, OpenBLAS or
# protobuf (the device machines): strata-compile linked statically against
# MLIR and LLVM (-DSTRATA_STATIC_MLIR=ON), strata-run, strata-inspect,
# strata-sim, strata-cuda-tests, strata-device-tests, libStrataRuntimeCUDA.so and the shared libraries they
# load that are not glibc's, libstdc++'s or CUDA's, into
# .gpu/strata-gpu.tar.xz (ignored by git: name .gpu in the device tool's
# carry). There:
#
#   tar -C /tmp -xJf .gpu/strata-gpu.tar.xz && . /tmp/strata-gpu/env.sh
#   python3 tests/gpu/check_cuda.py --bin /tmp/strata-gpu/bin --report ...
#
# The portable build goes to build-portable/ (STRATA_BUNDLE_BUILD= to
# change it); the first one compiles the compiler once more.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${STRATA_BUNDLE_BUILD:-$root/build-portable}"
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DSTRATA_STATIC_MLIR=ON
fi
ninja -C "$build" strata-compile strata-run strata-inspect strata-sim \
  strata-cuda-tests strata-device-tests StrataRuntimeCUDA

stage="$(mktemp -d)/strata-gpu"
mkdir -p "$stage/bin" "$stage/lib"
for tool in strata-compile strata-run strata-inspect strata-sim \
    strata-cuda-tests strata-device-tests; do
  cp "$build/bin/$tool" "$stage/bin/"
done
cp "$build/lib/libStrataRuntimeCUDA.so" "$stage/lib/"
if ldd "$stage/bin/strata-compile" | grep -q libMLIR; then
  echo "gpu-bundle: $build links libMLIR.so; configure it with -DSTRATA_STATIC_MLIR=ON" >&2
  exit 1
fi
# Every library they load but glibc, libstdc++, libgcc and CUDA's (the GPU
# machine has its own, matching its driver).
for f in "$stage"/bin/* "$stage/lib/libStrataRuntimeCUDA.so"; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+)\.so|ld-linux|/usr/local/cuda' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done

cat > "$stage/env.sh" <<'ENV'
# Sourced on the GPU machine: the bundle's tools and libraries first, then
# CUDA's (the toolkit's, else the ones PyTorch's wheels bring: NCCL).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="$here/bin:$PATH"
extra=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [[ -d "$d" ]] && extra="$extra:$d"
done
py_libs="$(python3 - <<'PY' 2>/dev/null
import importlib, os
dirs = []
for mod in ("nvidia.nccl", "nvidia.cublas", "nvidia.cuda_runtime", "nvidia.nvtx"):
    try:
        m = importlib.import_module(mod)
        for p in m.__path__:
            if os.path.isdir(os.path.join(p, "lib")):
                dirs.append(os.path.join(p, "lib"))
    except Exception:
        pass
print(":".join(dirs))
PY
)"
export LD_LIBRARY_PATH="$here/lib${extra}${py_libs:+:$py_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STRATA_CUDA_BACKEND="$here/lib/libStrataRuntimeCUDA.so"
ENV

mkdir -p "$root/.gpu"
tar -C "$(dirname "$stage")" -cJf "$root/.gpu/strata-gpu.tar.xz" strata-gpu
rm -rf "$(dirname "$stage")"
echo "gpu-bundle: $root/.gpu/strata-gpu.tar.xz ($(du -h "$root/.gpu/strata-gpu.tar.xz" | cut -f1))"
