//===- MmaPortable.cuh - Tensor-core tiles, on the GPU or emulated -*- CUDA -*-===//
//
// The few primitives the tensor-core kernels (AttentionMma.cuh) are written
// in: 16 x 16 x 16 WMMA tiles of bf16 / fp16 with f32 accumulators, block
// and warp barriers, and element conversions. Under nvcc they are
// nvcuda::wmma and the CUDA intrinsics. Compiled as host C++ they are an
// emulation, so the kernels' tiling, masking and softmax run on the CPU in
// the unit tests (tests/runtime/AttentionMmaTest.cpp) against the CPU
// kernels:
//  - a block is `threads` std::threads sharing one dynamic shared-memory
//    buffer, with std::barrier for __syncthreads and one per warp for
//    __syncwarp;
//  - a fragment is the whole 16 x 16 tile in every lane (each lane does the
//    whole product; lane 0 alone stores), so a kernel may use fragments only
//    through these functions, never by element;
//  - the product accumulates in f32 in k order (the tensor cores' order is
//    unspecified; results differ in the last bits).
// 16-byte copies (copy16, zero16) move tiles between global and shared
// memory. The memory layouts are WMMA's: matrix_a row-major (m, k) at p[m * ld + k];
// matrix_b column-major (k, n) at p[k + n * ld], row-major at p[k * ld + n];
// the accumulator row-major (m, n) at p[m * ld + n].
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_MMAPORTABLE_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_MMAPORTABLE_CUH

#include <cstdint>

#if defined(__CUDACC__)

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#define STRATA_MMA_FN __device__ __forceinline__

namespace strata::runtime::cuda::mma {

using Bf16 = __nv_bfloat16;
using Fp16 = __half;

template <typename E>
using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, E,
                                     nvcuda::wmma::row_major>;
template <typename E>
using FragBCol = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, E,
                                        nvcuda::wmma::col_major>;
template <typename E>
using FragBRow = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, E,
                                        nvcuda::wmma::row_major>;
using FragC = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16,
                                     float>;

STRATA_MMA_FN void zero(FragC &c) { nvcuda::wmma::fill_fragment(c, 0.0f); }
template <typename E>
STRATA_MMA_FN void load(FragA<E> &a, const E *p, unsigned ld) {
  nvcuda::wmma::load_matrix_sync(a, p, ld);
}
template <typename E>
STRATA_MMA_FN void load(FragBCol<E> &b, const E *p, unsigned ld) {
  nvcuda::wmma::load_matrix_sync(b, p, ld);
}
template <typename E>
STRATA_MMA_FN void load(FragBRow<E> &b, const E *p, unsigned ld) {
  nvcuda::wmma::load_matrix_sync(b, p, ld);
}
STRATA_MMA_FN void load(FragC &c, const float *p, unsigned ld) {
  nvcuda::wmma::load_matrix_sync(c, p, ld, nvcuda::wmma::mem_row_major);
}
STRATA_MMA_FN void store(float *p, const FragC &c, unsigned ld) {
  nvcuda::wmma::store_matrix_sync(p, c, ld, nvcuda::wmma::mem_row_major);
}
/// c += a b.
template <typename A, typename B>
STRATA_MMA_FN void mmaSync(FragC &c, const A &a, const B &b) {
  nvcuda::wmma::mma_sync(c, a, b, c);
}

STRATA_MMA_FN void syncThreads() { __syncthreads(); }
STRATA_MMA_FN void syncWarp() { __syncwarp(); }

/// 16 bytes from `src` to `dst` (both 16-byte aligned), or zeros.
STRATA_MMA_FN void copy16(void *dst, const void *src) {
  *static_cast<uint4 *>(dst) = *static_cast<const uint4 *>(src);
}
STRATA_MMA_FN void zero16(void *dst) {
  *static_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
}

STRATA_MMA_FN float toFloat(Bf16 x) { return __bfloat162float(x); }
STRATA_MMA_FN float toFloat(Fp16 x) { return __half2float(x); }
template <typename E> STRATA_MMA_FN E fromFloat(float x);
template <> STRATA_MMA_FN Bf16 fromFloat<Bf16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> STRATA_MMA_FN Fp16 fromFloat<Fp16>(float x) {
  return __float2half_rn(x);
}
template <typename E> STRATA_MMA_FN E zeroOf() { return fromFloat<E>(0.0f); }

} // namespace strata::runtime::cuda::mma

#else // host emulation

#include "strata/Runtime/NarrowFloat.h"

#if defined(STRATA_CUDA_EMULATION)
#include <cuda_runtime.h>
#endif

#include <barrier>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define STRATA_MMA_FN inline

namespace strata::runtime::cuda::mma {

struct Bf16 {
  uint16_t bits;
};
struct Fp16 {
  uint16_t bits;
};

inline float toFloat(Bf16 x) { return fromBf16Bits(x.bits); }
inline float toFloat(Fp16 x) { return fromFp16Bits(x.bits); }
template <typename E> E fromFloat(float x);
template <> inline Bf16 fromFloat<Bf16>(float x) { return {bf16Bits(x)}; }
template <> inline Fp16 fromFloat<Fp16>(float x) { return {fp16Bits(x)}; }
template <typename E> E zeroOf() { return fromFloat<E>(0.0f); }

#if defined(STRATA_CUDA_EMULATION)
// Inside the CUDA emulation (runtime/cuda/emulation) a block's threads are
// its fibers.
inline void syncThreads() { __syncthreads(); }
inline void syncWarp() { __syncwarp(); }
inline int threadInBlock() { return int(threadIdx.x); }
#else
/// The emulated thread: its index in the block and the block's barriers.
struct EmulatedThread {
  int thread = 0;
  std::barrier<> *block = nullptr;
  std::barrier<> *warp = nullptr;
};
inline thread_local EmulatedThread *currentThread = nullptr;

inline void syncThreads() { currentThread->block->arrive_and_wait(); }
inline void syncWarp() { currentThread->warp->arrive_and_wait(); }
inline int threadInBlock() { return currentThread->thread; }
#endif

inline void copy16(void *dst, const void *src) { std::memcpy(dst, src, 16); }
inline void zero16(void *dst) { std::memset(dst, 0, 16); }

/// A whole 16 x 16 tile, in every lane.
struct Tile {
  float x[256];
};
template <typename E> struct FragA : Tile {};
template <typename E> struct FragBCol : Tile {};
template <typename E> struct FragBRow : Tile {};
struct FragC : Tile {};

inline void zero(FragC &c) {
  for (float &v : c.x)
    v = 0.0f;
}
template <typename E> void load(FragA<E> &a, const E *p, unsigned ld) {
  for (int m = 0; m < 16; ++m)
    for (int k = 0; k < 16; ++k)
      a.x[m * 16 + k] = toFloat(p[m * ld + k]);
}
template <typename E> void load(FragBCol<E> &b, const E *p, unsigned ld) {
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 16; ++n)
      b.x[k * 16 + n] = toFloat(p[k + n * ld]);
}
template <typename E> void load(FragBRow<E> &b, const E *p, unsigned ld) {
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 16; ++n)
      b.x[k * 16 + n] = toFloat(p[k * ld + n]);
}
inline void load(FragC &c, const float *p, unsigned ld) {
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n)
      c.x[m * 16 + n] = p[m * ld + n];
}
/// Every lane holds the same tile; lane 0 writes it.
inline void store(float *p, const FragC &c, unsigned ld) {
  if (threadInBlock() % 32 != 0)
    return;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n)
      p[m * ld + n] = c.x[m * 16 + n];
}
template <typename A, typename B> void mmaSync(FragC &c, const A &a, const B &b) {
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float acc = c.x[m * 16 + n];
      for (int k = 0; k < 16; ++k)
        acc += a.x[m * 16 + k] * b.x[k * 16 + n];
      c.x[m * 16 + n] = acc;
    }
}

#if !defined(STRATA_CUDA_EMULATION)
/// Runs body(block, thread, shared) for every thread of `blocks` blocks of
/// `threads` (a multiple of 32), one block at a time: the same `threads`
/// std::threads run every block, over one buffer of `sharedBytes` that is
/// filled with 0xff bytes (NaN in every float type) before each block, as
/// a GPU's shared memory holds whatever the last block left.
template <typename Body>
void emulateLaunch(int64_t blocks, int threads, size_t sharedBytes,
                   Body &&body) {
  if (blocks <= 0)
    return;
  std::unique_ptr<std::max_align_t[]> shared(
      new std::max_align_t[sharedBytes / sizeof(std::max_align_t) + 1]);
  auto *bytes = reinterpret_cast<unsigned char *>(shared.get());
  std::barrier<> block(threads);
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  for (int w = 0; w < threads / 32; ++w)
    warps.push_back(std::make_unique<std::barrier<>>(32));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      EmulatedThread self{t, &block, warps[size_t(t / 32)].get()};
      currentThread = &self;
      for (int64_t b = 0; b < blocks; ++b) {
        // The previous block done, thread 0 poisons the buffer.
        block.arrive_and_wait();
        if (t == 0)
          std::memset(bytes, 0xff, sharedBytes);
        block.arrive_and_wait();
        body(b, t, bytes);
      }
      currentThread = nullptr;
    });
  for (std::thread &t : pool)
    t.join();
}

#endif

} // namespace strata::runtime::cuda::mma

#endif

#endif // STRATA_RUNTIME_CUDA_KERNELS_MMAPORTABLE_CUH
