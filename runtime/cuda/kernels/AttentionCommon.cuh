//===- AttentionCommon.cuh - Fused attention, its checks and tiles -*- CUDA -*-===//
//
// Private to AttentionKernels.cu. The checks of graph.attention and
// graph.attention_grad (the CPU kernels', message for message:
// runtime/cpu/kernels/AttentionKernels.cpp, NeuralNetGradKernels.cpp), the
// shared-memory layout of the tiles, and the per-block bodies of the three
// kernels, written against the CUDA built-ins only (threadIdx, blockIdx,
// blockDim, gridDim, __syncthreads, expf/exp) so that nothing else of CUDA is
// needed to compile them.
//
// The math (the CPU's): s = (q k^T) * scale + mask, s[i, j > i] = -inf if
// causal; p = softmax(s) (a row with every score -inf, or any NaN or +inf,
// is NaN); pd = p * keep (graph.dropout's Philox rule on the flat index of
// [..., S, T], scaled by 1 / (1 - ratio)); out = pd v.
//
// Forward: one block per (batch matrix, tile of query rows); K and V go
// through shared memory a tile of keys at a time with an online softmax (a
// running max and sum per row), so the S x T scores never exist. Backward:
// the flash-attention split, deterministic (no atomics):
//   1. per query tile: the forward's pass again for the row statistics
//      (max m, sum l) and o; D = dY . o; then a second pass over the keys
//      for dQ = dS K, with p = exp(s - m) / l, dPd = dY V^T, dp = dPd keep,
//      dS = p (dp - D) scale. The statistics (m, l, D) go to a scratch
//      buffer of 3 per query row.
//   2. per key tile: every query tile, from those statistics, for
//      dV = pd^T dY and dK = dS^T Q.
// keep_probabilities: once a query tile's statistics are final, the
// forward sweeps the keys again and writes p = exp(s - m) / l (before
// dropout; 0 where a key is hidden) into its second result, every one of
// the T columns of each row. The gradient does not read them back: it
// makes them again as above (the same numbers, in the kernel's rounding).
// A row whose statistics are bad has m = NaN, so every p of it is NaN, as
// the CPU's are (and so are the dK, dV of its batch matrix).
//
// heads_inner (q [..., S, H, D] and so on, AttentionPlan.h) changes only
// where a batch matrix's rows are read and written (matrixAt, rowStride);
// the mask, dropout's index and the statistics stay in the logical
// [..., H, S, *] order.
//
// All arithmetic is in the element type (f32 accumulators for f32), the CPU
// sums the softmax in double: f32 results agree within ~1e-5 relative.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_ATTENTIONCOMMON_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_ATTENTIONCOMMON_CUH

#include "DropoutPhilox.cuh"

#include "strata/Runtime/AttentionPlan.h"
#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/KernelChecks.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace strata::runtime::cuda::attention {

/// Threads per block of the three kernels.
inline constexpr int kThreads = 128;
/// The mask's batch dims (after merging) travel by value, up to this many.
inline constexpr int kMaxMaskDims = 8;

//===----------------------------------------------------------------------===//
// Host: checks
//===----------------------------------------------------------------------===//

/// An instruction's sizes, as the shared checks (AttentionPlan.h) found
/// them.
using Geometry = AttentionPlan;

/// attention_grad's prepared object: the statistics' scratch on the GPU
/// that was current at load (the f32 kernels' m, l, D per query row; the
/// tensor-core kernels' lse and delta).
struct GradScratch {
  void *data = nullptr;
  size_t bytes = 0;
  int device = 0;
  GradScratch() = default;
  GradScratch(const GradScratch &) = delete;
  GradScratch &operator=(const GradScratch &) = delete;
  ~GradScratch() {
    if (!data)
      return;
    int current = 0;
    bool switched = cudaGetDevice(&current) == cudaSuccess &&
                    current != device && cudaSetDevice(device) == cudaSuccess;
    cudaFree(data);
    if (switched)
      cudaSetDevice(current);
  }
};

inline Status notSupported(std::string_view op, DType t) {
  return Status::error(std::string(op) + ": element type " +
                       std::string(name(t)) + " is not supported");
}


//===----------------------------------------------------------------------===//
// Tiles
//===----------------------------------------------------------------------===//

enum class Kernel { Forward, GradQuery, GradKey };

/// Where each array of a block's shared memory starts (in elements of T).
/// Tiles are B x B (B query rows, B keys); rows of Q, K, V, dY and the
/// scores are padded to an odd length, so a warp reading one element of each
/// of 32 rows hits 32 banks.
struct Layout {
  int tile = 0;
  int64_t ldD = 1, ldV = 1, ldS = 1, ldAcc = 1;
  // Forward and GradQuery: q, k, v, s, acc (o, then dQ), m, l, corr, bad;
  // GradQuery also dy, dot. GradKey: k, v, q, dy, s (p), ds, dk, dv, m, l,
  // dot.
  int64_t q = 0, k = 0, v = 0, dy = 0, s = 0, ds = 0, acc = 0, dk = 0,
          dvAcc = 0, m = 0, l = 0, corr = 0, bad = 0, dot = 0;
  int64_t total = 0; // elements
};

inline Layout layoutFor(Kernel kernel, int tile, int64_t d, int64_t dv) {
  Layout L;
  L.tile = tile;
  L.ldD = d | 1;
  L.ldV = dv | 1;
  L.ldS = tile | 1;
  int64_t at = 0;
  auto take = [&](int64_t elements) {
    int64_t start = at;
    at += elements;
    return start;
  };
  int64_t B = tile;
  switch (kernel) {
  case Kernel::Forward:
  case Kernel::GradQuery:
    L.ldAcc = kernel == Kernel::Forward ? L.ldV : std::max(L.ldD, L.ldV);
    L.q = take(B * L.ldD);
    L.k = take(B * L.ldD);
    L.v = take(B * L.ldV);
    L.s = take(B * L.ldS);
    L.acc = take(B * L.ldAcc);
    if (kernel == Kernel::GradQuery) {
      L.dy = take(B * L.ldV);
      L.dot = take(B);
    }
    L.m = take(B);
    L.l = take(B);
    L.corr = take(B);
    L.bad = take(B);
    break;
  case Kernel::GradKey:
    L.k = take(B * L.ldD);
    L.v = take(B * L.ldV);
    L.q = take(B * L.ldD);
    L.dy = take(B * L.ldV);
    L.s = take(B * L.ldS);
    L.ds = take(B * L.ldS);
    L.dk = take(B * L.ldD);
    L.dvAcc = take(B * L.ldV);
    L.m = take(B);
    L.l = take(B);
    L.dot = take(B);
    break;
  }
  L.total = at;
  return L;
}

/// The largest tile (32 down to 1) whose layout fits in `limitBytes` of
/// shared memory; tile 0 when none does.
inline Layout chooseLayout(Kernel kernel, int64_t d, int64_t dv,
                           size_t elementBytes, size_t limitBytes) {
  for (int tile = 32; tile >= 1; tile /= 2) {
    Layout L = layoutFor(kernel, tile, d, dv);
    if (size_t(L.total) * elementBytes <= limitBytes)
      return L;
  }
  return Layout();
}

//===----------------------------------------------------------------------===//
// Kernel parameters
//===----------------------------------------------------------------------===//

template <typename T> struct Params {
  const T *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr,
          *dy = nullptr;
  T *out = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  /// keep_probabilities: the forward's second result [batches, S, T] (the
  /// logical order, heads_inner or not); null: none.
  T *probs = nullptr;
  /// GradQuery writes, GradKey reads: (m, l, D) per query row.
  T *stats = nullptr;
  int64_t batches = 0, s = 0, t = 0, d = 0, dvDim = 0;
  T scale = 0;      // the scores' scale, rounded to T as the CPU's tScale
  T gradScale = 0;  // dS's
  T dropScale = 1;  // T(1) / T(1 - ratio)
  double ratio = 0;
  uint64_t seed = 0;
  /// Where the executor gives one, this run's seed in device memory (read
  /// when the kernel runs, so a replayed CUDA graph draws afresh).
  const uint64_t *seedSlot = nullptr;
  bool dropout = false, causal = false;
  /// heads_inner (AttentionPlan.h): q [..., S, H, D], k, v [..., T, H, *],
  /// dy and the results likewise; batch matrix b = (outer, head) starts at
  /// matrixAt(p, b, rows, width) and its rows are rowStride(p, width)
  /// apart. Off: b * rows * width and width, the plain layout.
  bool headsInner = false;
  int64_t heads = 1;
  /// The mask's offset of batch matrix b: sum of its coordinates (in the
  /// merged dims maskSize) times maskStride; then i * maskRowStride +
  /// j * maskColStride.
  int maskDims = 0;
  int64_t maskSize[kMaxMaskDims] = {}, maskStride[kMaxMaskDims] = {};
  int64_t maskRowStride = 0, maskColStride = 0;
  Layout layout;
};

/// The mask's layout (AttentionPlan.h's maskLayout) into fixed arrays for
/// a kernel; false when more than kMaxMaskDims batch dims remain.
inline bool mergeMaskDims(const Geometry &g, int &dims, int64_t *sizeOut,
                          int64_t *strideOut, int64_t &row, int64_t &col) {
  MaskLayout layout = maskLayout(g);
  if (layout.sizes.size() > size_t(kMaxMaskDims))
    return false;
  dims = int(layout.sizes.size());
  for (size_t i = 0; i < layout.sizes.size(); ++i) {
    sizeOut[i] = layout.sizes[i];
    strideOut[i] = layout.strides[i];
  }
  row = layout.row;
  col = layout.col;
  return true;
}

/// Fills everything of `p` but the pointers and the layout. False when the
/// mask's batch dims do not merge into kMaxMaskDims.
template <typename T>
bool fillParams(const Geometry &g, uint64_t seed, Params<T> &p) {
  p.batches = g.batches;
  p.s = g.s;
  p.t = g.t;
  p.d = g.d;
  p.dvDim = g.dv;
  p.scale = static_cast<T>(g.scale);
  p.gradScale = static_cast<T>(g.scale);
  p.dropScale = T(1) / T(1 - g.ratio);
  p.ratio = g.ratio;
  p.seed = seed;
  p.dropout = g.ratio > 0;
  p.causal = g.causal;
  p.headsInner = g.headsInner;
  p.heads = g.heads;
  if (!g.hasMask)
    return true;
  return mergeMaskDims(g, p.maskDims, p.maskSize, p.maskStride,
                       p.maskRowStride, p.maskColStride);
}

//===----------------------------------------------------------------------===//
// Device: the blocks
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float expOf(float x) { return expf(x); }
__device__ __forceinline__ double expOf(double x) { return exp(x); }

template <typename T> __device__ __forceinline__ T negInf() {
  return -std::numeric_limits<T>::infinity();
}
template <typename T> __device__ __forceinline__ T posInf() {
  return std::numeric_limits<T>::infinity();
}
template <typename T> __device__ __forceinline__ T quietNaN() {
  return std::numeric_limits<T>::quiet_NaN();
}

__device__ __forceinline__ int64_t minOf(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/// Where batch matrix b of an operand or result of `rows` rows of `width`
/// starts (AttentionPlan::offset), in elements.
template <typename T>
__device__ __forceinline__ int64_t matrixAt(const Params<T> &p, int64_t b,
                                            int64_t rows, int64_t width) {
  return p.headsInner ? ((b / p.heads) * rows * p.heads + b % p.heads) * width
                      : b * rows * width;
}

/// The distance between a batch matrix's rows of `width` in an operand or
/// result (AttentionPlan::ld), in elements.
template <typename T>
__device__ __forceinline__ int64_t rowStride(const Params<T> &p,
                                             int64_t width) {
  return p.headsInner ? p.heads * width : width;
}

/// The factor dropout leaves on probability (i, j) of batch matrix b.
template <typename T>
__device__ __forceinline__ T keepFactor(const Params<T> &p, int64_t b,
                                        int64_t i, int64_t j) {
  if (!p.dropout)
    return T(1);
  uint64_t index = uint64_t((b * p.s + i) * p.t + j);
  uint64_t seed = p.seedSlot ? *p.seedSlot : p.seed;
  return philox::dropoutKeeps(seed, index, p.ratio) ? p.dropScale : T(0);
}

template <typename T>
__device__ __forceinline__ int64_t maskBase(const Params<T> &p, int64_t b) {
  int64_t base = 0;
  for (int dim = p.maskDims - 1; dim >= 0; --dim) {
    base += (b % p.maskSize[dim]) * p.maskStride[dim];
    b /= p.maskSize[dim];
  }
  return base;
}

/// Score (i, j) from a row of Q and one of K in shared memory, as the CPU
/// computes it: the dot product in T, * scale, + mask, -inf above the
/// diagonal when causal.
template <typename T>
__device__ __forceinline__ T scoreOf(const Params<T> &p, const T *qRow,
                                     const T *kRow, int64_t maskAt, int64_t i,
                                     int64_t j) {
  T dot = 0;
  for (int64_t x = 0; x < p.d; ++x)
    dot += qRow[x] * kRow[x];
  T score = dot * p.scale;
  if (p.mask)
    score += p.mask[maskAt];
  return p.causal && j > i ? negInf<T>() : score;
}

/// Copies `rows` rows of `width` elements from global `src` (rows `srcLd`
/// apart) to shared `dst` (rows `ld` apart).
template <typename T>
__device__ __forceinline__ void loadRows(T *dst, int64_t ld, const T *src,
                                         int64_t srcLd, int64_t rows,
                                         int64_t width) {
  for (int64_t e = threadIdx.x; e < rows * width; e += blockDim.x) {
    int64_t r = e / width, x = e % width;
    dst[r * ld + x] = src[r * srcLd + x];
  }
}

/// The online-softmax pass over every key for the `rows` query rows at i0 of
/// batch matrix b, whose Q tile is in shared memory (written before the
/// call; the first barrier here orders it): leaves the unnormalized
/// o = sum_j pd_ij v_j in acc, the running max in m (-inf: no finite score),
/// the sum of exp(s - m) in l, and bad != 0 where a score was NaN or +inf.
template <typename T>
__device__ void onlinePass(const Params<T> &p, T *sm, int64_t b, int64_t i0,
                          int64_t rows) {
  const Layout &L = p.layout;
  const int64_t B = L.tile;
  T *Q = sm + L.q, *K = sm + L.k, *V = sm + L.v, *S = sm + L.s,
    *O = sm + L.acc, *M = sm + L.m, *Lsum = sm + L.l, *Corr = sm + L.corr,
    *Bad = sm + L.bad;
  for (int64_t r = threadIdx.x; r < B; r += blockDim.x) {
    M[r] = negInf<T>();
    Lsum[r] = 0;
    Bad[r] = 0;
  }
  for (int64_t e = threadIdx.x; e < B * L.ldAcc; e += blockDim.x)
    O[e] = 0;
  __syncthreads();
  const T *kb = p.k + matrixAt(p, b, p.t, p.d),
          *vb = p.v + matrixAt(p, b, p.t, p.dvDim);
  const int64_t rowD = rowStride(p, p.d), rowV = rowStride(p, p.dvDim);
  const int64_t mBase = p.mask ? maskBase(p, b) : 0;
  // Causal: the keys after the tile's last row are -inf for all its rows.
  const int64_t kEnd = p.causal ? minOf(p.t, i0 + rows) : p.t;
  for (int64_t j0 = 0; j0 < kEnd; j0 += B) {
    const int64_t cols = minOf(B, p.t - j0);
    loadRows(K, L.ldD, kb + j0 * rowD, rowD, cols, p.d);
    loadRows(V, L.ldV, vb + j0 * rowV, rowV, cols, p.dvDim);
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * cols; e += blockDim.x) {
      int64_t r = e / cols, c = e % cols, i = i0 + r, j = j0 + c;
      S[r * L.ldS + c] =
          scoreOf(p, Q + r * L.ldD, K + c * L.ldD,
                  mBase + i * p.maskRowStride + j * p.maskColStride, i, j);
    }
    __syncthreads();
    // One thread per row: the tile's max, the rescale of what came before,
    // exp(s - m) (undropped into l, dropped into S for o).
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      T *row = S + r * L.ldS;
      T mOld = M[r], tileMax = negInf<T>();
      bool bad = Bad[r] != 0;
      for (int64_t c = 0; c < cols; ++c) {
        T x = row[c];
        if (x != x || x == posInf<T>())
          bad = true;
        else if (x > tileMax)
          tileMax = x;
      }
      T mNew = mOld > tileMax ? mOld : tileMax;
      T corr = 1, sum = 0;
      if (mNew == negInf<T>()) {
        for (int64_t c = 0; c < cols; ++c)
          row[c] = 0;
      } else {
        corr = expOf(mOld - mNew); // 0 when mOld is -inf
        for (int64_t c = 0; c < cols; ++c) {
          T x = row[c];
          T e = (x != x || x == posInf<T>() || x == negInf<T>())
                    ? T(0)
                    : expOf(x - mNew);
          sum += e;
          row[c] = e * keepFactor(p, b, i0 + r, j0 + c);
        }
      }
      Lsum[r] = Lsum[r] * corr + sum;
      M[r] = mNew;
      Corr[r] = corr;
      Bad[r] = bad ? T(1) : T(0);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * p.dvDim; e += blockDim.x) {
      int64_t r = e / p.dvDim, x = e % p.dvDim;
      T acc = O[r * L.ldAcc + x] * Corr[r];
      for (int64_t c = 0; c < cols; ++c)
        acc += S[r * L.ldS + c] * V[c * L.ldV + x];
      O[r * L.ldAcc + x] = acc;
    }
    __syncthreads();
  }
}

/// keep_probabilities: after onlinePass, whose m, l and bad are final for
/// the `rows` query rows at i0 of batch matrix b (Q still in shared
/// memory), a second sweep over the key tiles writes every column of those
/// rows of p.probs: exp(s - m) / l before dropout, 0 where the key is
/// hidden (causal j > i, a -inf score); a row whose output is NaN (a score
/// NaN or +inf, or every score -inf) is NaN in every column, as
/// softmax(s) is (the CPU's, too, over the keys it multiplies). Ends with a
/// barrier after its last read of K; it writes no shared memory the caller
/// reads.
template <typename T>
__device__ void writeProbabilities(const Params<T> &p, T *sm, int64_t b,
                                   int64_t i0, int64_t rows) {
  const Layout &L = p.layout;
  const int64_t B = L.tile;
  const T *Q = sm + L.q, *M = sm + L.m, *Lsum = sm + L.l, *Bad = sm + L.bad;
  T *K = sm + L.k;
  const T *kb = p.k + matrixAt(p, b, p.t, p.d);
  const int64_t rowD = rowStride(p, p.d);
  const int64_t mBase = p.mask ? maskBase(p, b) : 0;
  T *probs = p.probs + (b * p.s + i0) * p.t;
  // Causal: the keys after the tile's last row are hidden from all its rows.
  const int64_t kEnd = p.causal ? minOf(p.t, i0 + rows) : p.t;
  for (int64_t j0 = 0; j0 < kEnd; j0 += B) {
    const int64_t cols = minOf(B, p.t - j0);
    loadRows(K, L.ldD, kb + j0 * rowD, rowD, cols, p.d);
    __syncthreads();
    for (int64_t e = threadIdx.x; e < rows * cols; e += blockDim.x) {
      int64_t r = e / cols, c = e % cols, i = i0 + r, j = j0 + c;
      T prob;
      if (Bad[r] != 0 || M[r] == negInf<T>())
        prob = quietNaN<T>();
      else if (p.causal && j > i)
        prob = 0;
      else
        prob = expOf(scoreOf(p, Q + r * L.ldD, K + c * L.ldD,
                             mBase + i * p.maskRowStride + j * p.maskColStride,
                             i, j) -
                     M[r]) /
               Lsum[r];
      probs[r * p.t + j] = prob;
    }
    __syncthreads(); // K is loaded again
  }
  const int64_t hiddenCols = p.t - kEnd;
  for (int64_t e = threadIdx.x; e < rows * hiddenCols; e += blockDim.x) {
    int64_t r = e / hiddenCols;
    probs[r * p.t + kEnd + e % hiddenCols] =
        Bad[r] != 0 || M[r] == negInf<T>() ? quietNaN<T>() : T(0);
  }
}

/// graph.attention: out for every (batch matrix, query tile), grid-stride;
/// keep_probabilities: the probabilities too (writeProbabilities).
template <typename T>
__device__ void forwardBlocks(const Params<T> &p, T *sm) {
  const Layout &L = p.layout;
  const int64_t B = L.tile;
  const int64_t tiles = (p.s + B - 1) / B, work = p.batches * tiles;
  T *Q = sm + L.q, *O = sm + L.acc, *M = sm + L.m, *Lsum = sm + L.l,
    *Bad = sm + L.bad;
  const int64_t rowD = rowStride(p, p.d), rowV = rowStride(p, p.dvDim);
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const int64_t b = w / tiles, i0 = (w % tiles) * B;
    const int64_t rows = minOf(B, p.s - i0);
    loadRows(Q, L.ldD, p.q + matrixAt(p, b, p.s, p.d) + i0 * rowD, rowD, rows,
             p.d);
    onlinePass(p, sm, b, i0, rows);
    T *out = p.out + matrixAt(p, b, p.s, p.dvDim) + i0 * rowV;
    for (int64_t e = threadIdx.x; e < rows * p.dvDim; e += blockDim.x) {
      int64_t r = e / p.dvDim, x = e % p.dvDim;
      out[r * rowV + x] = Bad[r] != 0 || M[r] == negInf<T>() ? quietNaN<T>()
                                                 : O[r * L.ldAcc + x] / Lsum[r];
    }
    // It reads what onlinePass left (Q, m, l, bad) and overwrites K, which
    // the loop above does not read: no barrier first.
    if (p.probs)
      writeProbabilities(p, sm, b, i0, rows);
    __syncthreads();
  }
}

/// graph.attention_grad, part 1: the statistics and dQ of every (batch
/// matrix, query tile).
template <typename T>
__device__ void gradQueryBlocks(const Params<T> &p, T *sm) {
  const Layout &L = p.layout;
  const int64_t B = L.tile;
  const int64_t tiles = (p.s + B - 1) / B, work = p.batches * tiles;
  T *Q = sm + L.q, *K = sm + L.k, *V = sm + L.v, *S = sm + L.s,
    *Acc = sm + L.acc, *dY = sm + L.dy, *M = sm + L.m, *Lsum = sm + L.l,
    *Bad = sm + L.bad, *Dot = sm + L.dot;
  const int64_t rowD = rowStride(p, p.d), rowV = rowStride(p, p.dvDim);
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const int64_t b = w / tiles, i0 = (w % tiles) * B;
    const int64_t rows = minOf(B, p.s - i0);
    loadRows(Q, L.ldD, p.q + matrixAt(p, b, p.s, p.d) + i0 * rowD, rowD, rows,
             p.d);
    loadRows(dY, L.ldV, p.dy + matrixAt(p, b, p.s, p.dvDim) + i0 * rowV, rowV,
             rows, p.dvDim);
    onlinePass(p, sm, b, i0, rows);
    // m, l and D = dY . o / l; a bad row gets m = NaN (so p = NaN).
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      T *stats = p.stats + (b * p.s + i0 + r) * 3;
      if (Bad[r] != 0 || M[r] == negInf<T>()) {
        M[r] = quietNaN<T>();
        Lsum[r] = 1;
        Dot[r] = quietNaN<T>();
      } else {
        T dot = 0;
        for (int64_t x = 0; x < p.dvDim; ++x)
          dot += dY[r * L.ldV + x] * Acc[r * L.ldAcc + x];
        Dot[r] = dot / Lsum[r];
      }
      stats[0] = M[r];
      stats[1] = Lsum[r];
      stats[2] = Dot[r];
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < B * L.ldAcc; e += blockDim.x)
      Acc[e] = 0;
    __syncthreads();
    const T *kb = p.k + matrixAt(p, b, p.t, p.d),
            *vb = p.v + matrixAt(p, b, p.t, p.dvDim);
    const int64_t mBase = p.mask ? maskBase(p, b) : 0;
    const int64_t kEnd = p.causal ? minOf(p.t, i0 + rows) : p.t;
    for (int64_t j0 = 0; j0 < kEnd; j0 += B) {
      const int64_t cols = minOf(B, p.t - j0);
      loadRows(K, L.ldD, kb + j0 * rowD, rowD, cols, p.d);
      loadRows(V, L.ldV, vb + j0 * rowV, rowV, cols, p.dvDim);
      __syncthreads();
      // dS = p (dPd keep - D) scale.
      for (int64_t e = threadIdx.x; e < rows * cols; e += blockDim.x) {
        int64_t r = e / cols, c = e % cols, i = i0 + r, j = j0 + c;
        T score =
            scoreOf(p, Q + r * L.ldD, K + c * L.ldD,
                    mBase + i * p.maskRowStride + j * p.maskColStride, i, j);
        T prob = expOf(score - M[r]) / Lsum[r];
        T dpd = 0;
        for (int64_t x = 0; x < p.dvDim; ++x)
          dpd += dY[r * L.ldV + x] * V[c * L.ldV + x];
        T dp = dpd * keepFactor(p, b, i, j);
        S[r * L.ldS + c] = prob * (dp - Dot[r]) * p.gradScale;
      }
      __syncthreads();
      for (int64_t e = threadIdx.x; e < rows * p.d; e += blockDim.x) {
        int64_t r = e / p.d, x = e % p.d;
        T acc = Acc[r * L.ldAcc + x];
        for (int64_t c = 0; c < cols; ++c)
          acc += S[r * L.ldS + c] * K[c * L.ldD + x];
        Acc[r * L.ldAcc + x] = acc;
      }
      __syncthreads();
    }
    T *dq = p.dq + matrixAt(p, b, p.s, p.d) + i0 * rowD;
    for (int64_t e = threadIdx.x; e < rows * p.d; e += blockDim.x) {
      int64_t r = e / p.d, x = e % p.d;
      dq[r * rowD + x] = Acc[r * L.ldAcc + x];
    }
    __syncthreads();
  }
}

/// graph.attention_grad, part 2: dK and dV of every (batch matrix, key
/// tile), summing over the query tiles in order.
template <typename T>
__device__ void gradKeyBlocks(const Params<T> &p, T *sm) {
  const Layout &L = p.layout;
  const int64_t B = L.tile;
  const int64_t tiles = (p.t + B - 1) / B, work = p.batches * tiles;
  T *K = sm + L.k, *V = sm + L.v, *Q = sm + L.q, *dY = sm + L.dy,
    *P = sm + L.s, *dS = sm + L.ds, *dK = sm + L.dk, *dV = sm + L.dvAcc,
    *M = sm + L.m, *Lsum = sm + L.l, *Dot = sm + L.dot;
  const int64_t rowD = rowStride(p, p.d), rowV = rowStride(p, p.dvDim);
  for (int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const int64_t b = w / tiles, j0 = (w % tiles) * B;
    const int64_t cols = minOf(B, p.t - j0);
    const int64_t kAt = matrixAt(p, b, p.t, p.d) + j0 * rowD,
                  vAt = matrixAt(p, b, p.t, p.dvDim) + j0 * rowV;
    loadRows(K, L.ldD, p.k + kAt, rowD, cols, p.d);
    loadRows(V, L.ldV, p.v + vAt, rowV, cols, p.dvDim);
    for (int64_t e = threadIdx.x; e < B * L.ldD; e += blockDim.x)
      dK[e] = 0;
    for (int64_t e = threadIdx.x; e < B * L.ldV; e += blockDim.x)
      dV[e] = 0;
    __syncthreads();
    const int64_t mBase = p.mask ? maskBase(p, b) : 0;
    for (int64_t i0 = 0; i0 < p.s; i0 += B) {
      const int64_t rows = minOf(B, p.s - i0);
      for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        const T *stats = p.stats + (b * p.s + i0 + r) * 3;
        M[r] = stats[0];
        Lsum[r] = stats[1];
        Dot[r] = stats[2];
      }
      __syncthreads();
      // Causal: a tile of rows all before the first key sees none of them
      // (p = 0 exactly), unless a row is bad (p = NaN everywhere).
      bool skip = p.causal && i0 + rows - 1 < j0;
      for (int64_t r = 0; skip && r < rows; ++r)
        if (M[r] != M[r])
          skip = false;
      if (!skip) {
        loadRows(Q, L.ldD, p.q + matrixAt(p, b, p.s, p.d) + i0 * rowD, rowD,
                 rows, p.d);
        loadRows(dY, L.ldV, p.dy + matrixAt(p, b, p.s, p.dvDim) + i0 * rowV,
                 rowV, rows, p.dvDim);
        __syncthreads();
        for (int64_t e = threadIdx.x; e < rows * cols; e += blockDim.x) {
          int64_t r = e / cols, c = e % cols, i = i0 + r, j = j0 + c;
          T score =
              scoreOf(p, Q + r * L.ldD, K + c * L.ldD,
                      mBase + i * p.maskRowStride + j * p.maskColStride, i, j);
          T prob = expOf(score - M[r]) / Lsum[r];
          T keep = keepFactor(p, b, i, j);
          T dpd = 0;
          for (int64_t x = 0; x < p.dvDim; ++x)
            dpd += dY[r * L.ldV + x] * V[c * L.ldV + x];
          P[r * L.ldS + c] = prob * keep;
          dS[r * L.ldS + c] = prob * (dpd * keep - Dot[r]) * p.gradScale;
        }
        __syncthreads();
        for (int64_t e = threadIdx.x; e < cols * p.dvDim; e += blockDim.x) {
          int64_t c = e / p.dvDim, x = e % p.dvDim;
          T acc = dV[c * L.ldV + x];
          for (int64_t r = 0; r < rows; ++r)
            acc += P[r * L.ldS + c] * dY[r * L.ldV + x];
          dV[c * L.ldV + x] = acc;
        }
        for (int64_t e = threadIdx.x; e < cols * p.d; e += blockDim.x) {
          int64_t c = e / p.d, x = e % p.d;
          T acc = dK[c * L.ldD + x];
          for (int64_t r = 0; r < rows; ++r)
            acc += dS[r * L.ldS + c] * Q[r * L.ldD + x];
          dK[c * L.ldD + x] = acc;
        }
      }
      __syncthreads();
    }
    T *dk = p.dk + kAt, *dv = p.dv + vAt;
    for (int64_t e = threadIdx.x; e < cols * p.d; e += blockDim.x) {
      int64_t c = e / p.d, x = e % p.d;
      dk[c * rowD + x] = dK[c * L.ldD + x];
    }
    for (int64_t e = threadIdx.x; e < cols * p.dvDim; e += blockDim.x) {
      int64_t c = e / p.dvDim, x = e % p.dvDim;
      dv[c * rowV + x] = dV[c * L.ldV + x];
    }
    __syncthreads();
  }
}

} // namespace strata::runtime::cuda::attention

#endif // STRATA_RUNTIME_CUDA_KERNELS_ATTENTIONCOMMON_CUH
