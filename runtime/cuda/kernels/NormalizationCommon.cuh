//===- NormalizationCommon.cuh - Helpers of the row-reducing kernels -*- CUDA -*-===//
//
// Private to the normalization, loss, dropout, neural-net gradient,
// optimizer and convolution kernels on CUDA: deterministic block reductions
// (a fixed tree for a fixed block size: the same bits on every run), grid
// sizing for one-block-per-row kernels, rounding-exact arithmetic where the
// CPU's order of operations must be kept, and per-instruction device scratch
// made once by a PrepareFn. In namespace norm, so that no other family's
// helper of the same name can meet these in the library.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_NORMALIZATIONCOMMON_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_NORMALIZATIONCOMMON_CUH

#include "CudaKernelUtils.cuh"

#include "strata/Runtime/ShapePlans.h"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime::cuda::norm {

//===----------------------------------------------------------------------===//
// Host helpers
//===----------------------------------------------------------------------===//

using shape::product;

/// Blocks of a kernel that gives each of `rows` rows one block (the kernel
/// strides over the rest).
inline unsigned rowGrid(int64_t rows) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(rows, int64_t(1) << 20)));
}

/// Device scratch of one instruction, made at load by its PrepareFn and
/// freed with it (cudaFree waits for the work that still uses it).
struct DeviceScratch {
  void *data = nullptr;
  size_t bytes = 0;
  template <typename T> T *at(size_t offset) const {
    return reinterpret_cast<T *>(static_cast<char *>(data) + offset);
  }
};

/// Bytes rounded up to 256, so every part of a scratch block is aligned.
inline size_t alignScratch(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Allocates `bytes` (at least 256) of device scratch into `prepared`.
inline Status makeScratch(const std::string &op, size_t bytes,
                          std::shared_ptr<void> &prepared) {
  auto *scratch = new DeviceScratch();
  scratch->bytes = std::max<size_t>(bytes, 256);
  cudaError_t e = cudaMalloc(&scratch->data, scratch->bytes);
  if (e != cudaSuccess) {
    delete scratch;
    return cudaStatus(e, op + ": cannot allocate " + std::to_string(bytes) +
                             " bytes of scratch");
  }
  prepared = std::shared_ptr<void>(scratch, [](void *p) {
    auto *s = static_cast<DeviceScratch *>(p);
    cudaFree(s->data);
    delete s;
  });
  return Status::ok();
}

/// The scratch a launch's prepare made into `out`; an error when there is
/// none or it is smaller than `bytes`.
inline Status scratchOf(const KernelContext &ctx, const std::string &op,
                        size_t bytes, const DeviceScratch *&out) {
  out = static_cast<const DeviceScratch *>(ctx.prepared);
  if (!out || out->bytes < bytes)
    return Status::error(op + ": the instruction's scratch was not prepared");
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Rounded arithmetic that the compiler may not contract into a fused
/// multiply-add: the CPU kernels (x86-64, no FMA) round every product.
__host__ __device__ inline float mulRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ inline double mulRn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ inline float addRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
__host__ __device__ inline double addRn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};

/// The max of maxAndExpSum (KernelUtils.h): NaN wins.
struct NanMaxOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    if (a != a)
      return a;
    if (b != b)
      return b;
    return b > a ? b : a;
  }
};

/// Reduces one value per thread over the block (blockDim.x a multiple of 32,
/// at most 1024) in a fixed order; every thread gets the result. Every
/// thread of the block must call it.
template <typename T, typename Op>
__device__ T blockReduce(T v, Op op) {
  __shared__ T partial[32];
  for (int offset = 16; offset > 0; offset >>= 1)
    v = op(v, __shfl_down_sync(0xffffffffu, v, offset));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); // every thread has read the previous call's result
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    T r = partial[0];
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
      r = op(r, partial[w]);
    partial[0] = r;
  }
  __syncthreads();
  return partial[0];
}

template <typename T> __device__ T blockSum(T v) {
  return blockReduce(v, SumOp());
}

/// Flat index and stride of a grid-stride loop, in 64 bits.
__device__ inline int64_t gridStart() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t gridStride() {
  return int64_t(gridDim.x) * blockDim.x;
}

} // namespace strata::runtime::cuda::norm

#endif // STRATA_RUNTIME_CUDA_KERNELS_NORMALIZATIONCOMMON_CUH
