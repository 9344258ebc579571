//===- AttentionMma.cuh - Flash attention on tensor cores ------*- CUDA -*-===//
//
// graph.attention and graph.attention_grad for bf16 / fp16 operands on
// tensor cores (MmaPortable.cuh: WMMA 16 x 16 x 16 tiles, f32
// accumulators), FlashAttention-2's algorithm: the S x T scores never reach
// global memory. A block has 4 warps; each warp owns 16 rows of the block's
// 64 (queries, or keys for dK / dV) and steps over the other side 64 at a
// time through shared memory.
//
//  forward     per query tile: S = Q K^T, an online softmax (running max m
//              and sum l per row, O rescaled when m grows), O += P V with P
//              rounded to the element type; out = O / l.
//  gradQuery   per query tile, two passes over the keys: the forward's
//              (m, l and O, so lse = m + log l and delta = dO . O / l, both
//              saved per row for gradKey), then dP = dO V^T,
//              dS = P (dP - delta), dQ += dS K; dq = scale dQ.
//  gradKey     per key tile, over the queries: P^T from S^T = K Q^T and the
//              saved lse, dV += P^T dO, dP^T = V dO^T,
//              dS^T = P^T (dP^T - delta), dK += dS^T Q; dk = scale dK.
// Deterministic: every sum has one order, no atomics. Causal attention
// (key j > query i hidden) skips the tiles above the diagonal.
//
// The CPU computes the same attention in f32 with the softmax in double
// (its narrow adapter widens the operands, rounds each result once); here
// the products' operands are the element type (P and dS rounded to it), so
// results differ from the CPU's within bf16 / fp16 precision. An additive
// f32 mask and dropout (graph.dropout's Philox stream, the CPU's mask) are
// applied as the CPU applies them; one head dim D = Dv in {16, 32, 64, 128};
// other attentions take the widened f32 kernels (AttentionMma.cu decides,
// `takes`). heads_inner operands ([..., S, H, D]) are read and written in
// place: rows H * D apart from the batch matrix's first (matrixAt,
// rowStride); the stats, the mask and dropout keep the logical order.
//
// The block functions are written in MmaPortable.cuh's primitives only, so
// they also compile as host C++ and run emulated in
// tests/runtime/AttentionMmaTest.cpp against the CPU kernels.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_ATTENTIONMMA_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_ATTENTIONMMA_CUH

#include "DropoutPhilox.cuh"
#include "MmaPortable.cuh"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace strata::runtime::cuda::attention_mma {

using namespace mma;

/// Rows a block owns, and rows of the other side a step takes.
inline constexpr int kRows = 64;
inline constexpr int kCols = 64;
inline constexpr int kThreads = 128; // 4 warps of 16 rows
/// The head dims with a kernel.
inline constexpr bool supportedHeadDim(int64_t d) {
  return d == 16 || d == 32 || d == 64 || d == 128;
}

STRATA_MMA_FN float negInf() { return -std::numeric_limits<float>::infinity(); }

/// Whether key `key` is hidden from query `query`.
STRATA_MMA_FN bool hidden(const int64_t query, const int64_t key, int64_t keys,
                          bool causal) {
  return key >= keys || (causal && key > query);
}

/// Batch dims of a mask, merged (AttentionCommon.cuh's kMaxMaskDims).
inline constexpr int kMaskDims = 8;

template <typename E> struct MmaParams {
  const E *q = nullptr, *k = nullptr, *v = nullptr, *dy = nullptr;
  E *out = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  /// Per query row (batch-major): lse, then delta. gradQuery writes them,
  /// gradKey reads them.
  float *stats = nullptr;
  int64_t batches = 0, s = 0, t = 0;
  float scale = 1.0f;
  bool causal = false;
  /// heads_inner (AttentionPlan.h): q, dy, out, dq [..., S, H, D] and k, v,
  /// dk, dv [..., T, H, D]; batch matrix b = (outer, head) starts at
  /// matrixAt(p, b, rows) * D and its rows are rowStride(p) * D apart.
  /// Off: b * rows * D and D, the plain layout.
  bool headsInner = false;
  int64_t heads = 1;
  /// The additive f32 mask, or null: score (b, i, j) adds
  /// mask[base(b) + i * maskRow + j * maskCol], base(b) the sum of b's
  /// coordinates in the merged batch dims times their strides.
  const float *mask = nullptr;
  int maskDims = 0;
  int64_t maskSize[kMaskDims] = {}, maskStride[kMaskDims] = {};
  int64_t maskRow = 0, maskCol = 0;
  /// Dropout of the probabilities (ratio 0: none), graph.dropout's Philox
  /// mask of stream `seed` (or *seedSlot, read when the kernel runs, so a
  /// replayed CUDA graph draws afresh) at index (b * s + i) * t + j; kept
  /// probabilities are multiplied by dropScale = 1 / (1 - ratio).
  double ratio = 0;
  float dropScale = 1.0f;
  uint64_t seed = 0;
  const uint64_t *seedSlot = nullptr;
};

/// The mask's offset of batch matrix b.
template <typename E>
STRATA_MMA_FN int64_t maskBase(const MmaParams<E> &p, int64_t b) {
  int64_t base = 0;
  for (int dim = p.maskDims - 1; dim >= 0; --dim) {
    base += (b % p.maskSize[dim]) * p.maskStride[dim];
    b /= p.maskSize[dim];
  }
  return base;
}

/// Where batch matrix b of an operand or result of `rows` rows starts, in
/// rows of the head dim (AttentionPlan::offset / D).
template <typename E>
STRATA_MMA_FN int64_t matrixAt(const MmaParams<E> &p, int64_t b,
                               int64_t rows) {
  return p.headsInner ? (b / p.heads) * rows * p.heads + b % p.heads
                      : b * rows;
}

/// The distance between a batch matrix's rows, in rows of the head dim
/// (AttentionPlan::ld / D).
template <typename E> STRATA_MMA_FN int64_t rowStride(const MmaParams<E> &p) {
  return p.headsInner ? p.heads : 1;
}

/// The random stream of this launch.
template <typename E> STRATA_MMA_FN uint64_t seedOf(const MmaParams<E> &p) {
  return p.seedSlot ? *p.seedSlot : p.seed;
}

/// Dropout's factor on probability (query, key) of batch matrix b.
template <typename E>
STRATA_MMA_FN float keepFactor(const MmaParams<E> &p, uint64_t seed,
                               int64_t b, int64_t query, int64_t key) {
  if (!(p.ratio > 0))
    return 1.0f;
  if (query >= p.s || key >= p.t)
    return 0.0f;
  uint64_t index = uint64_t((b * p.s + query) * p.t + key);
  return philox::dropoutKeeps(seed, index, p.ratio) ? p.dropScale : 0.0f;
}

/// Score (query, key) of batch matrix b from its product `dot`, as the CPU
/// computes it: dot * scale + mask, -inf where the key is hidden.
template <typename E>
STRATA_MMA_FN float scoreOf(const MmaParams<E> &p, int64_t base,
                            int64_t query, int64_t key, float dot) {
  if (hidden(query, key, p.t, p.causal))
    return negInf();
  float x = dot * p.scale;
  if (p.mask && query < p.s)
    x += p.mask[base + query * p.maskRow + key * p.maskCol];
  return x;
}

constexpr size_t align32(size_t x) { return (x + 31) / 32 * 32; }

/// Leading dimensions of the shared tiles, padded (16 bytes for the 2-byte
/// tiles, 16 for f32) so the 16 rows a fragment reads do not fall in the
/// same banks: `e` for element-type tiles of D columns, `f` for f32 tiles
/// of D columns.
template <int D> struct Ld {
  static constexpr int e = D + 8, f = D + 4;
};
/// Element-type tiles of kCols columns (P, dS) and f32 ones (S, dP).
inline constexpr int kLdP = kCols + 8, kLdS = kCols + 4;

/// Byte offsets into a block's dynamic shared memory; E is 2 bytes.
template <int D> struct ForwardLayout {
  static constexpr size_t q = 0;
  static constexpr size_t k = align32(q + kRows * Ld<D>::e * 2);
  static constexpr size_t v = align32(k + kCols * Ld<D>::e * 2);
  static constexpr size_t s = align32(v + kCols * Ld<D>::e * 2);
  static constexpr size_t p = align32(s + kRows * kLdS * 4);
  static constexpr size_t o = align32(p + kRows * kLdP * 2);
  static constexpr size_t m = align32(o + kRows * Ld<D>::f * 4);
  static constexpr size_t l = m + kRows * 4;
  static constexpr size_t alpha = l + kRows * 4;
  static constexpr size_t partial = alpha + kRows * 4; // 2 per row
  static constexpr size_t bytes = align32(partial + kRows * 2 * 4);
};

template <int D> struct GradQueryLayout {
  static constexpr size_t q = 0;
  static constexpr size_t dy = align32(q + kRows * Ld<D>::e * 2);
  static constexpr size_t k = align32(dy + kRows * Ld<D>::e * 2);
  static constexpr size_t v = align32(k + kCols * Ld<D>::e * 2);
  static constexpr size_t s = align32(v + kCols * Ld<D>::e * 2);
  static constexpr size_t dp = align32(s + kRows * kLdS * 4);
  static constexpr size_t p = align32(dp + kRows * kLdS * 4); // P, then dS
  static constexpr size_t o = align32(p + kRows * kLdP * 2);  // O, then dQ
  static constexpr size_t m = align32(o + kRows * Ld<D>::f * 4);
  static constexpr size_t l = m + kRows * 4;
  static constexpr size_t alpha = l + kRows * 4;
  static constexpr size_t partial = alpha + kRows * 4;
  static constexpr size_t lse = partial + kRows * 2 * 4;
  static constexpr size_t delta = lse + kRows * 4;
  static constexpr size_t bytes = align32(delta + kRows * 4);
};

template <int D> struct GradKeyLayout {
  static constexpr size_t k = 0;
  static constexpr size_t v = align32(k + kRows * Ld<D>::e * 2);
  static constexpr size_t q = align32(v + kRows * Ld<D>::e * 2);
  static constexpr size_t dy = align32(q + kCols * Ld<D>::e * 2);
  static constexpr size_t st = align32(dy + kCols * Ld<D>::e * 2);
  static constexpr size_t dpt = align32(st + kRows * kLdS * 4);
  static constexpr size_t pt = align32(dpt + kRows * kLdS * 4);
  static constexpr size_t dst = align32(pt + kRows * kLdP * 2);
  static constexpr size_t dk = align32(dst + kRows * kLdP * 2);
  static constexpr size_t dv = align32(dk + kRows * Ld<D>::f * 4);
  static constexpr size_t lse = align32(dv + kRows * Ld<D>::f * 4);
  static constexpr size_t delta = lse + kCols * 4;
  static constexpr size_t bytes = align32(delta + kCols * 4);
};

template <typename T> STRATA_MMA_FN T *at(unsigned char *shared, size_t offset) {
  return reinterpret_cast<T *>(shared + offset);
}

/// Rows [row0, row0 + Rows) of a [total, D] matrix (rows `ld` elements
/// apart) into the tile `dst` (leading dim Ld<D>::e), zeros past `total`;
/// 16 bytes (8 elements) a copy, as D and ld are multiples of 16 and every
/// row starts 16-byte aligned.
template <typename E, int D, int Rows>
STRATA_MMA_FN void loadRows(E *dst, const E *src, int64_t ld, int64_t row0,
                            int64_t total, int thread) {
  constexpr int chunks = D / 8;
  for (int i = thread; i < Rows * chunks; i += kThreads) {
    int r = i / chunks, c = i % chunks * 8;
    int64_t row = row0 + r;
    if (row < total)
      copy16(dst + r * Ld<D>::e + c, src + row * ld + c);
    else
      zero16(dst + r * Ld<D>::e + c);
  }
}

/// out (16 x kCols, f32, ld kLdS) = a (16 rows of D) b^T, b being kCols
/// rows of D (both leading dim Ld<D>::e): a warp's scores.
template <typename E, int D>
STRATA_MMA_FN void productABt(const E *a, const E *b, float *out) {
  for (int n = 0; n < kCols / 16; ++n) {
    FragC acc;
    zero(acc);
    for (int kk = 0; kk < D / 16; ++kk) {
      FragA<E> fa;
      load(fa, a + kk * 16, Ld<D>::e);
      FragBCol<E> fb;
      load(fb, b + n * 16 * Ld<D>::e + kk * 16, Ld<D>::e);
      mmaSync(acc, fa, fb);
    }
    store(out + n * 16, acc, kLdS);
  }
}

/// acc (16 x D, f32, ld Ld<D>::f) += a (16 x kCols, ld kLdP) b (kCols x D,
/// ld Ld<D>::e).
template <typename E, int D>
STRATA_MMA_FN void accumulateAB(float *acc, const E *a, const E *b) {
  for (int dn = 0; dn < D / 16; ++dn) {
    FragC c;
    load(c, acc + dn * 16, Ld<D>::f);
    for (int kk = 0; kk < kCols / 16; ++kk) {
      FragA<E> fa;
      load(fa, a + kk * 16, kLdP);
      FragBRow<E> fb;
      load(fb, b + kk * 16 * Ld<D>::e + dn * 16, Ld<D>::e);
      mmaSync(c, fa, fb);
    }
    store(acc + dn * 16, c, Ld<D>::f);
  }
}

/// One step of the online softmax for a warp's 16 rows of scores `s`
/// (queries q0 + r0 ..., keys k0 ... of batch matrix b, its mask at `base`):
/// scales and masks the scores, updates each row's m and l (of the
/// probabilities before dropout), writes P with dropout applied (rounded to
/// E) and rescales the rows of O.
/// Lanes l and l + 16 share row l, 32 columns each.
template <typename E, int D>
STRATA_MMA_FN void softmaxStep(const MmaParams<E> &p, int64_t b, int64_t base,
                               uint64_t seed, int64_t q0, int64_t k0, int r0,
                               int lane, float *s, E *prob, float *o, float *m,
                               float *l, float *alpha, float *partial) {
  const int r = r0 + (lane & 15), half = lane >> 4;
  const int64_t query = q0 + r;
  float *row = s + r * kLdS;
  float rowMax = negInf();
  for (int j = half * 32; j < half * 32 + 32; ++j) {
    float x = scoreOf(p, base, query, k0 + j, row[j]);
    row[j] = x;
    rowMax = x > rowMax ? x : rowMax;
  }
  partial[r * 2 + half] = rowMax;
  syncWarp();
  float old = m[r];
  float mNew = old;
  mNew = partial[r * 2] > mNew ? partial[r * 2] : mNew;
  mNew = partial[r * 2 + 1] > mNew ? partial[r * 2 + 1] : mNew;
  syncWarp(); // every lane has read the maxima
  float sum = 0.0f;
  for (int j = half * 32; j < half * 32 + 32; ++j) {
    float e = mNew == negInf() ? 0.0f : expf(row[j] - mNew);
    sum += e;
    prob[r * kLdP + j] =
        fromFloat<E>(e * keepFactor(p, seed, b, query, k0 + j));
  }
  partial[r * 2 + half] = sum;
  syncWarp();
  if (half == 0) {
    float a = mNew == negInf() ? 1.0f : expf(old - mNew);
    m[r] = mNew;
    l[r] = l[r] * a + (partial[r * 2] + partial[r * 2 + 1]);
    alpha[r] = a;
  }
  syncWarp();
  for (int i = lane; i < 16 * D; i += 32) {
    int rr = r0 + i / D;
    o[rr * Ld<D>::f + i % D] *= alpha[rr];
  }
  syncWarp();
}

/// The forward's pass over the keys for the block's query tile at q0:
/// leaves each row's m, l and unnormalised O in shared memory. `q` holds the
/// tile's queries; k, v, s, prob are scratch.
template <typename E, int D>
STRATA_MMA_FN void forwardPass(const MmaParams<E> &p, int64_t b, int64_t q0,
                               int thread, const E *q, E *k, E *v, float *s,
                               E *prob, float *o, float *m, float *l,
                               float *alpha, float *partial) {
  for (int r = thread; r < kRows; r += kThreads) {
    m[r] = negInf();
    l[r] = 0.0f;
  }
  for (int i = thread; i < kRows * Ld<D>::f; i += kThreads)
    o[i] = 0.0f;
  const int warp = thread / 32, lane = thread % 32, r0 = warp * 16;
  const E *keys = p.k + matrixAt(p, b, p.t) * D,
          *values = p.v + matrixAt(p, b, p.t) * D;
  const int64_t ld = rowStride(p) * D;
  const int64_t base = maskBase(p, b);
  const uint64_t seed = seedOf(p);
  const int64_t end = p.causal && q0 + kRows < p.t ? q0 + kRows : p.t;
  for (int64_t k0 = 0; k0 < end; k0 += kCols) {
    syncThreads(); // the last step is done with k and v
    loadRows<E, D, kCols>(k, keys, ld, k0, p.t, thread);
    loadRows<E, D, kCols>(v, values, ld, k0, p.t, thread);
    syncThreads();
    productABt<E, D>(q + r0 * Ld<D>::e, k, s + r0 * kLdS);
    syncWarp();
    softmaxStep<E, D>(p, b, base, seed, q0, k0, r0, lane, s, prob, o, m, l,
                      alpha, partial);
    accumulateAB<E, D>(o + r0 * Ld<D>::f, prob + r0 * kLdP, v);
  }
  syncThreads();
}

template <typename E, int D>
STRATA_MMA_FN void forwardBlock(const MmaParams<E> &p, int64_t block,
                                int thread, unsigned char *shared) {
  using L = ForwardLayout<D>;
  E *q = at<E>(shared, L::q);
  float *o = at<float>(shared, L::o), *l = at<float>(shared, L::l);
  const int64_t tiles = (p.s + kRows - 1) / kRows;
  const int64_t b = block / tiles, q0 = (block % tiles) * kRows;
  const int64_t at0 = matrixAt(p, b, p.s) * D, ld = rowStride(p) * D;
  loadRows<E, D, kRows>(q, p.q + at0, ld, q0, p.s, thread);
  forwardPass<E, D>(p, b, q0, thread, q, at<E>(shared, L::k),
                    at<E>(shared, L::v), at<float>(shared, L::s),
                    at<E>(shared, L::p), o, at<float>(shared, L::m), l,
                    at<float>(shared, L::alpha), at<float>(shared, L::partial));
  for (int i = thread; i < kRows * D; i += kThreads) {
    int r = i / D, c = i % D;
    int64_t query = q0 + r;
    if (query < p.s)
      p.out[at0 + query * ld + c] = fromFloat<E>(o[r * Ld<D>::f + c] / l[r]);
  }
}

template <typename E, int D>
STRATA_MMA_FN void gradQueryBlock(const MmaParams<E> &p, int64_t block,
                                  int thread, unsigned char *shared) {
  using L = GradQueryLayout<D>;
  E *q = at<E>(shared, L::q), *dy = at<E>(shared, L::dy);
  E *k = at<E>(shared, L::k), *v = at<E>(shared, L::v);
  E *prob = at<E>(shared, L::p);
  float *s = at<float>(shared, L::s), *dp = at<float>(shared, L::dp);
  float *o = at<float>(shared, L::o), *l = at<float>(shared, L::l);
  float *m = at<float>(shared, L::m);
  float *lse = at<float>(shared, L::lse), *delta = at<float>(shared, L::delta);
  const int64_t tiles = (p.s + kRows - 1) / kRows;
  const int64_t b = block / tiles, q0 = (block % tiles) * kRows;
  const int64_t at0 = matrixAt(p, b, p.s) * D, ld = rowStride(p) * D;
  loadRows<E, D, kRows>(q, p.q + at0, ld, q0, p.s, thread);
  loadRows<E, D, kRows>(dy, p.dy + at0, ld, q0, p.s, thread);
  // Pass 1: the forward's statistics and O.
  forwardPass<E, D>(p, b, q0, thread, q, k, v, s, prob, o, m, l,
                    at<float>(shared, L::alpha),
                    at<float>(shared, L::partial));
  for (int r = thread; r < kRows; r += kThreads) {
    float dot = 0.0f;
    for (int d = 0; d < D; ++d)
      dot += toFloat(dy[r * Ld<D>::e + d]) * o[r * Ld<D>::f + d];
    float rowLse = m[r] + logf(l[r]);
    // A row without a finite log-sum-exp (every key hidden, or an inf or
    // NaN score) is NaN, as the CPU's softmax makes it: through P it must
    // reach dK and dV too (pr below), not only dQ.
    lse[r] = l[r] > 0.0f && rowLse - rowLse == 0.0f
                 ? rowLse
                 : std::numeric_limits<float>::quiet_NaN();
    delta[r] = dot / l[r];
    int64_t query = q0 + r;
    if (query < p.s) {
      p.stats[(b * p.s + query) * 2] = lse[r];
      p.stats[(b * p.s + query) * 2 + 1] = delta[r];
    }
  }
  syncThreads();
  for (int i = thread; i < kRows * Ld<D>::f; i += kThreads)
    o[i] = 0.0f; // now dQ
  // Pass 2: dS and dQ.
  const int warp = thread / 32, lane = thread % 32, r0 = warp * 16;
  const E *keys = p.k + matrixAt(p, b, p.t) * D,
          *values = p.v + matrixAt(p, b, p.t) * D;
  const int64_t base = maskBase(p, b);
  const uint64_t seed = seedOf(p);
  const int64_t end = p.causal && q0 + kRows < p.t ? q0 + kRows : p.t;
  for (int64_t k0 = 0; k0 < end; k0 += kCols) {
    syncThreads();
    loadRows<E, D, kCols>(k, keys, ld, k0, p.t, thread);
    loadRows<E, D, kCols>(v, values, ld, k0, p.t, thread);
    syncThreads();
    productABt<E, D>(q + r0 * Ld<D>::e, k, s + r0 * kLdS);
    productABt<E, D>(dy + r0 * Ld<D>::e, v, dp + r0 * kLdS);
    syncWarp();
    const int r = r0 + (lane & 15), half = lane >> 4;
    for (int j = half * 32; j < half * 32 + 32; ++j) {
      const int64_t query = q0 + r, key = k0 + j;
      float x = scoreOf(p, base, query, key, s[r * kLdS + j]);
      float pr = x == negInf() && lse[r] == lse[r] ? 0.0f : expf(x - lse[r]);
      float keep = keepFactor(p, seed, b, query, key);
      prob[r * kLdP + j] =
          fromFloat<E>(pr * (keep * dp[r * kLdS + j] - delta[r]));
    }
    syncWarp();
    accumulateAB<E, D>(o + r0 * Ld<D>::f, prob + r0 * kLdP, k);
  }
  syncThreads();
  for (int i = thread; i < kRows * D; i += kThreads) {
    int r = i / D, c = i % D;
    int64_t query = q0 + r;
    if (query < p.s)
      p.dq[at0 + query * ld + c] = fromFloat<E>(p.scale * o[r * Ld<D>::f + c]);
  }
}

template <typename E, int D>
STRATA_MMA_FN void gradKeyBlock(const MmaParams<E> &p, int64_t block,
                                int thread, unsigned char *shared) {
  using L = GradKeyLayout<D>;
  E *k = at<E>(shared, L::k), *v = at<E>(shared, L::v);
  E *q = at<E>(shared, L::q), *dy = at<E>(shared, L::dy);
  E *pt = at<E>(shared, L::pt), *dst = at<E>(shared, L::dst);
  float *st = at<float>(shared, L::st), *dpt = at<float>(shared, L::dpt);
  float *dk = at<float>(shared, L::dk), *dv = at<float>(shared, L::dv);
  float *lse = at<float>(shared, L::lse), *delta = at<float>(shared, L::delta);
  const int64_t tiles = (p.t + kRows - 1) / kRows;
  const int64_t b = block / tiles, k0 = (block % tiles) * kRows;
  const int64_t at0 = matrixAt(p, b, p.t) * D, ld = rowStride(p) * D;
  loadRows<E, D, kRows>(k, p.k + at0, ld, k0, p.t, thread);
  loadRows<E, D, kRows>(v, p.v + at0, ld, k0, p.t, thread);
  for (int i = thread; i < kRows * Ld<D>::f; i += kThreads)
    dk[i] = dv[i] = 0.0f;
  const int warp = thread / 32, lane = thread % 32, r0 = warp * 16;
  const E *queries = p.q + matrixAt(p, b, p.s) * D,
          *grads = p.dy + matrixAt(p, b, p.s) * D;
  const int64_t base = maskBase(p, b);
  const uint64_t seed = seedOf(p);
  // Causal: the queries before the block's first key see none of them.
  const int64_t begin = p.causal ? k0 / kCols * kCols : 0;
  for (int64_t q0 = begin; q0 < p.s; q0 += kCols) {
    syncThreads();
    loadRows<E, D, kCols>(q, queries, ld, q0, p.s, thread);
    loadRows<E, D, kCols>(dy, grads, ld, q0, p.s, thread);
    for (int c = thread; c < kCols; c += kThreads) {
      int64_t query = q0 + c;
      lse[c] = query < p.s ? p.stats[(b * p.s + query) * 2] : 0.0f;
      delta[c] = query < p.s ? p.stats[(b * p.s + query) * 2 + 1] : 0.0f;
    }
    syncThreads();
    productABt<E, D>(k + r0 * Ld<D>::e, q, st + r0 * kLdS);
    productABt<E, D>(v + r0 * Ld<D>::e, dy, dpt + r0 * kLdS);
    syncWarp();
    const int r = r0 + (lane & 15), half = lane >> 4;
    const int64_t key = k0 + r;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      int64_t query = q0 + c;
      float x = query < p.s ? scoreOf(p, base, query, key, st[r * kLdS + c])
                            : negInf();
      float pr = x == negInf() && lse[c] == lse[c] ? 0.0f : expf(x - lse[c]);
      float keep = keepFactor(p, seed, b, query, key);
      pt[r * kLdP + c] = fromFloat<E>(pr * keep);
      dst[r * kLdP + c] =
          fromFloat<E>(pr * (keep * dpt[r * kLdS + c] - delta[c]));
    }
    syncWarp();
    accumulateAB<E, D>(dv + r0 * Ld<D>::f, pt + r0 * kLdP, dy);
    accumulateAB<E, D>(dk + r0 * Ld<D>::f, dst + r0 * kLdP, q);
  }
  syncThreads();
  for (int i = thread; i < kRows * D; i += kThreads) {
    int r = i / D, c = i % D;
    int64_t key = k0 + r;
    if (key < p.t) {
      p.dk[at0 + key * ld + c] = fromFloat<E>(p.scale * dk[r * Ld<D>::f + c]);
      p.dv[at0 + key * ld + c] = fromFloat<E>(dv[r * Ld<D>::f + c]);
    }
  }
}

/// Blocks of each kernel.
template <typename E> int64_t forwardBlocks(const MmaParams<E> &p) {
  return p.batches * ((p.s + kRows - 1) / kRows);
}
template <typename E> int64_t gradKeyBlocks(const MmaParams<E> &p) {
  return p.batches * ((p.t + kRows - 1) / kRows);
}

} // namespace strata::runtime::cuda::attention_mma

#endif // STRATA_RUNTIME_CUDA_KERNELS_ATTENTIONMMA_CUH
