//===- KernelUtils.h - Shared helpers of the CPU kernels --------*- C++ -*-===//
//
// Private to runtime/cpu: element-type dispatch, arity checks and numpy
// broadcasting. Float kernels are instantiated for float and double (double
// serves gradient checks by finite differences); i1 is stored as uint8_t.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CPU_KERNELUTILS_H
#define STRATA_RUNTIME_CPU_KERNELUTILS_H

#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/KernelChecks.h"
#include "strata/Runtime/UnaryGrad.h"

#include "kernels/VectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace strata::runtime::cpu {

/// Calls fn(T{}) with T the C++ type of float dtype `t` (f32, f64).
template <typename Fn>
Status dispatchFloat(DType t, std::string_view op, Fn &&fn) {
  switch (t) {
  case DType::F32:
    return fn(float{});
  case DType::F64:
    return fn(double{});
  default:
    return Status::error(std::string(op) + ": element type " +
                         std::string(name(t)) + " is not supported");
  }
}

/// Calls fn(T{}) for every storable dtype (i1 as uint8_t).
template <typename Fn>
Status dispatchAll(DType t, std::string_view op, Fn &&fn) {
  switch (t) {
  case DType::F32: return fn(float{});
  case DType::F64: return fn(double{});
  case DType::I64: return fn(int64_t{});
  case DType::I32: return fn(int32_t{});
  case DType::I16: return fn(int16_t{});
  case DType::I8: return fn(int8_t{});
  case DType::I1: return fn(uint8_t{});
  default:
    return Status::error(std::string(op) + ": element type " +
                         std::string(name(t)) + " is not supported");
  }
}

/// Calls fn(I{}) with I the C++ type of an index dtype (gather, embedding
/// and their gradients).
template <typename Fn>
Status dispatchIndex(DType t, std::string_view op, Fn &&fn) {
  switch (t) {
  case DType::I64:
    return fn(int64_t{});
  case DType::I32:
    return fn(int32_t{});
  case DType::I16:
    return fn(int16_t{});
  case DType::I8:
    return fn(int8_t{});
  default:
    return Status::error(std::string(op) +
                         ": indices must be i64, i32, i16 or i8, got " +
                         std::string(name(t)));
  }
}

/// For every flat index of `out`, the flat index of `in` it reads under numpy
/// broadcasting (`in` right-aligned against `out`).
inline std::vector<int64_t> broadcastIndexMap(const std::vector<int64_t> &in,
                                              const std::vector<int64_t> &out) {
  int64_t total = 1;
  for (int64_t d : out)
    total *= d;
  std::vector<int64_t> map(total);
  std::vector<int64_t> inStrides = rowMajorStrides(in);
  size_t offset = out.size() - in.size();
  // Odometer over the output coordinates.
  std::vector<int64_t> coord(out.size(), 0);
  int64_t src = 0;
  for (int64_t flat = 0; flat < total; ++flat) {
    map[flat] = src;
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      bool broadcast = d < static_cast<int64_t>(offset) || in[d - offset] == 1;
      int64_t step = broadcast ? 0 : inStrides[d - offset];
      if (++coord[d] < out[d]) {
        src += step;
        break;
      }
      src -= step * (out[d] - 1);
      coord[d] = 0;
    }
  }
  return map;
}

/// The threads of the kernels' pool (ParallelFor.cpp): STRATA_NUM_THREADS,
/// else OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS, else the cores (shared
/// among the node's ranks).
int kernelThreads();

/// Runs body(begin, end) over contiguous blocks covering [0, n), on up to
/// kernelThreads() threads, at least `grain` iterations a block. The blocks
/// must write disjoint outputs; a result then does not depend on the thread
/// count. Called inside another loop (or while one runs), runs serially.
void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body);

/// The offset of batch matrix `b` (flat over `batchShape`) in a tensor with
/// `strides` over those dims (0 where it broadcasts): the attention mask's.
inline int64_t maskOffset(const std::vector<int64_t> &batchShape,
                          const std::vector<int64_t> &strides, int64_t b) {
  int64_t offset = 0;
  for (int64_t dim = static_cast<int64_t>(batchShape.size()) - 1; dim >= 0;
       --dim) {
    offset += (b % batchShape[dim]) * strides[dim];
    b /= batchShape[dim];
  }
  return offset;
}

/// One BLAS call: row-major C[m, n] = op(A) op(B) (+ C if `accumulate`).
template <typename T>
void blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
              int64_t ldc, bool accumulate) {
  CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0f, a,
                int(lda), b, int(ldb), accumulate ? 1.0f : 0.0f, c, int(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), 1.0, a,
                int(lda), b, int(ldb), accumulate ? 1.0 : 0.0, c, int(ldc));
}

/// How many rows (or columns) of C one block of a split product takes:
/// blocks of about 1024, at least 4 of them while each can keep 128, and a
/// multiple of 16. A block is one BLAS call, and each call packs the other
/// operand again: at 1 thread, sgemm of [2048, 512] x [512, 2048] in blocks
/// of 128 rows ran at 91 GFLOP/s against 98 in one call, 512 rows at 95.
/// The size depends on the extent alone, never on the thread count.
inline int64_t gemmBlockExtent(int64_t extent) {
  constexpr int64_t kTarget = 1024, kMinBlock = 128, kMinBlocks = 4;
  int64_t blocks = std::max((extent + kTarget - 1) / kTarget,
                            std::min(kMinBlocks, extent / kMinBlock));
  int64_t size = (extent + blocks - 1) / blocks;
  return (size + 15) / 16 * 16;
}

/// Row-major C[m, n] = op(A) * op(B) (+ C if `accumulate`), with explicit
/// leading dimensions. With more than one thread, a large product is split
/// into blocks of rows of C (or columns, when the rows are few;
/// gemmBlockExtent), one BLAS call each, run on the pool: one thread pool
/// for every kernel (OpenBLAS then runs on one thread, ParallelFor.cpp).
/// With one thread it is one call. Either way each element of C is the
/// same sum: OpenBLAS's level-3 driver splits the k dimension by k alone
/// and blocks of rows or columns only choose which elements a call makes
/// (blocks stay above OpenBLAS's small-matrix kernels, kMinFlops), so the
/// results do not depend on the thread count (tests/lit/Runtime/
/// kernel-threads.test: 1, 2 and 3 threads train the same bits). BLAS
/// rejects a zero leading dimension, so k == 0 is written out here.
template <typename T>
void gemmEx(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
            const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
            int64_t ldc, bool accumulate = false) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < m; ++i)
        std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  // The pool, and OpenBLAS on one thread, first. With one thread there
  // is no one to share blocks with, and each block would pack the other
  // operand again: one call.
  bool alone = kernelThreads() == 1;
  constexpr int64_t kMinSplit = 256, kMinFlops = int64_t(1) << 22;
  bool large = !alone && 2 * m * n * k >= kMinFlops;
  if (large && m >= kMinSplit) {
    // Rows of C: rows of op(A) (columns of A when transposed).
    int64_t block = gemmBlockExtent(m);
    parallelFor((m + block - 1) / block, 1, [&](int64_t first, int64_t last) {
      for (int64_t blk = first; blk < last; ++blk) {
        int64_t r0 = blk * block, rows = std::min(block, m - r0);
        const T *ab = transA ? a + r0 : a + r0 * lda;
        blasGemm(transA, transB, rows, n, k, ab, lda, b, ldb, c + r0 * ldc,
                 ldc, accumulate);
      }
    });
  } else if (large && n >= kMinSplit) {
    // Columns of C: columns of op(B) (rows of B when transposed).
    int64_t block = gemmBlockExtent(n);
    parallelFor((n + block - 1) / block, 1, [&](int64_t first, int64_t last) {
      for (int64_t blk = first; blk < last; ++blk) {
        int64_t c0 = blk * block, cols = std::min(block, n - c0);
        const T *bb = transB ? b + c0 * ldb : b + c0;
        blasGemm(transA, transB, m, cols, k, a, lda, bb, ldb, c + c0, ldc,
                 accumulate);
      }
    });
  } else {
    blasGemm(transA, transB, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
  }
}

/// Row-major C[m, n] = A[m, k] * op(B) (+ C if `accumulate`), op(B) =
/// B[k, n] or B[n, k]^T.
template <typename T>
void gemm(bool transB, int64_t m, int64_t n, int64_t k, const T *a, const T *b,
          T *c, bool accumulate = false) {
  gemmEx<T>(false, transB, m, n, k, a, k, b, transB ? k : n, c, n,
            accumulate);
}

/// dx[i] = unaryDerivative(p, x[i], y[i], dy[i]) rounded to T, for i < n:
/// graph.unary_grad and a fused program's gradient. One loop per kind, so
/// the kind's switch folds away and the loop vectorizes, built for the
/// CPU at hand as VectorMath.h's are (ElementwiseGradKernels.cpp).
void unaryDerivativeLoop(const UnaryGradParams &p, const float *dy,
                         const float *x, const float *y, float *dx, int64_t n);
void unaryDerivativeLoop(const UnaryGradParams &p, const double *dy,
                         const double *x, const double *y, double *dx,
                         int64_t n);

/// A sum in double in a fixed order that does not wait on one running
/// total: kLanes partial sums, lane j taking the terms j, j + kLanes, ...
/// of each add() (every add() starts again at lane 0), and total() adds
/// the lanes pairwise. The order depends on the lengths alone, never on the
/// CPU or the thread count; the lanes vectorize and hide the latency of the
/// add that a single running sum is bound by (about 3 cycles a term).
class LaneSum {
public:
  static constexpr int kLanes = 8;

  /// Adds term(i) for i < n.
  template <typename Term>
  __attribute__((always_inline)) void add(int64_t n, Term term) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j)
        lane[j] += term(i + j);
    for (int j = 0; i < n; ++i, ++j)
      lane[j] += term(i);
  }

  double total() const {
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
           ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  }

private:
  double lane[kLanes] = {};
};

/// The sum of term(i), i < n, through one LaneSum.
template <typename Term>
__attribute__((always_inline)) inline double laneSum(int64_t n, Term term) {
  LaneSum sum;
  sum.add(n, term);
  return sum.total();
}

/// The max of row[0, n), n > 0, as the serial scan `if (v > max || v !=
/// v) max = v` finds it (NaN wins, the last one), but a 64-byte vector at
/// a time (GCC's vector extensions: 16 floats or 8 doubles): a row with a
/// NaN, or whose max is a zero (whose sign the serial scan takes from the
/// first zero), is scanned serially instead. Written with plain lanes
/// (`T lane[8]`) GCC -O3 left the loop scalar, a vucomiss and a cmova an
/// element, 0.86 against 0.09 ns an element (perf, 2026-11-27).
template <typename T>
__attribute__((always_inline)) inline T rowMax(const T *row, int64_t n) {
  constexpr int kLanes = 64 / int(sizeof(T));
  typedef T Vec __attribute__((vector_size(64)));
  using Mask = decltype(Vec{} != Vec{});
  Vec lane = Vec{} + row[0];
  Mask unordered = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Vec v;
    std::memcpy(&v, row + i, sizeof v);
    lane = v > lane ? v : lane;
    unordered |= v != v;
  }
  bool nan = false;
  T max = lane[0];
  for (int j = 0; j < kLanes; ++j) {
    max = lane[j] > max ? lane[j] : max;
    nan |= unordered[j] != 0;
  }
  for (; i < n; ++i) {
    T v = row[i];
    max = v > max ? v : max;
    nan |= v != v;
  }
  if (nan || max == T(0)) {
    max = row[0];
    for (int64_t k = 1; k < n; ++k)
      if (row[k] > max || row[k] != row[k])
        max = row[k];
  }
  return max;
}

/// out[j] = e[j] / sum in double, rounded to the element type, for j < n:
/// the normalization of a softmax row, built for the CPU at hand
/// (VectorMath.h; ElementwiseKernels.cpp).
void divideRow(const float *e, double sum, float *out, int64_t n);
void divideRow(const double *e, double sum, double *out, int64_t n);

/// The max (NaN wins, as in torch's max-reduction) of `len` > 0 elements
/// `stride` apart, and the sum in double of exp(x - max): the log-sum-exp of
/// softmax and cross entropy.
template <typename T>
std::pair<T, double> maxAndExpSum(const T *in, int64_t len, int64_t stride) {
  T max = in[0];
  for (int64_t i = 1; i < len; ++i) {
    T v = in[i * stride];
    if (v > max || v != v)
      max = v;
  }
  double sum = 0;
  for (int64_t i = 0; i < len; ++i)
    sum += std::exp(double(in[i * stride]) - double(max));
  return {max, sum};
}

/// e[j] = exp(row[j] - max) for j < n, and their sum in double (a
/// LaneSum): the exponentials of a softmax row. Float rows take vectorExp
/// (VectorMath.h, in float, as PyTorch's CPU softmax); double rows
/// std::exp in double.
template <typename T>
__attribute__((always_inline)) inline double expAndSum(const T *row, T max,
                                                       int64_t n, T *e) {
  if constexpr (std::is_same_v<T, float>) {
    expShifted(row, max, e, n);
  } else {
    for (int64_t j = 0; j < n; ++j)
      e[j] = std::exp(row[j] - max);
  }
  return laneSum(n, [&](int64_t j) { return double(e[j]); });
}

/// A row's mean over `len` elements and 1 / sqrt(variance + epsilon), the
/// variance from the centred values (two passes: it cannot go negative),
/// each sum in double through a LaneSum: layer_norm's statistics, which
/// its gradient recomputes the same way.
template <typename T>
__attribute__((always_inline)) inline void
rowMoments(const T *row, int64_t len, double epsilon, double &mean,
           double &rstd) {
  mean = laneSum(len, [&](int64_t i) { return double(row[i]); }) / double(len);
  double sq = laneSum(len, [&](int64_t i) {
    double d = row[i] - mean;
    return d * d;
  });
  rstd = 1.0 / std::sqrt(sq / double(len) + epsilon);
}

/// One channel's mean over `batch` planes of `spatial` elements, `stride`
/// apart from `in` (the channel's first plane), and the sum of its
/// centred squares, each in double through a LaneSum over the planes in
/// order: the statistics of batch_norm and of its gradient. Built for
/// AVX-512 and the baseline (NormalizationKernels.cpp).
void channelMoments(const float *in, int64_t batch, int64_t stride,
                    int64_t spatial, double count, double &mean, double &sq);
void channelMoments(const double *in, int64_t batch, int64_t stride,
                    int64_t spatial, double count, double &mean, double &sq);

/// The max of a row of n > 0 (rowMax) and the sum in double of exp(x -
/// max), each exponential into e (expAndSum): the log-sum-exp of cross
/// entropy's rows. f32 rows take rowMaxExpSumF32, built for AVX-512 and
/// the baseline (VectorMath.h's dispatch; LossKernels.cpp).
template <typename T>
__attribute__((always_inline)) inline T rowMaxExpSumBody(const T *row,
                                                         int64_t n, T *e,
                                                         double &sum) {
  T max = rowMax(row, n);
  sum = expAndSum(row, max, n, e);
  return max;
}
float rowMaxExpSumF32(const float *row, int64_t n, float *e, double &sum);
template <typename T>
T rowMaxExpSum(const T *row, int64_t n, T *e, double &sum) {
  if constexpr (std::is_same_v<T, float>)
    return rowMaxExpSumF32(row, n, e, sum);
  else
    return rowMaxExpSumBody(row, n, e, sum);
}

/// One row of cross entropy's gradient over `classes` logits: scale *
/// (softmax(row) - onehot(label)) into dx, the softmax's exponentials
/// into e (rowMaxExpSum; the quotients in double). f32 rows take
/// crossEntropyGradRowF32 (dispatched as rowMaxExpSumF32).
template <typename T>
__attribute__((always_inline)) inline void
crossEntropyGradRowBody(const T *row, int64_t classes, int64_t label,
                        double scale, T *e, T *dx) {
  double sum;
  rowMaxExpSumBody(row, classes, e, sum);
  for (int64_t c = 0; c < classes; ++c) {
    double p = double(e[c]) / sum;
    dx[c] = static_cast<T>(scale * (p - (c == label ? 1.0 : 0.0)));
  }
}
void crossEntropyGradRowF32(const float *row, int64_t classes, int64_t label,
                            double scale, float *e, float *dx);
template <typename T>
void crossEntropyGradRow(const T *row, int64_t classes, int64_t label,
                         double scale, T *e, T *dx) {
  if constexpr (std::is_same_v<T, float>)
    crossEntropyGradRowF32(row, classes, label, scale, e, dx);
  else
    crossEntropyGradRowBody(row, classes, label, scale, e, dx);
}

/// Row `i` of an attention block, the products q k^T of its first `keys`
/// keys already in `row`: scaled, plus the additive mask (`mask` at
/// `maskRow`, `maskStride` apart; null without), -inf past the diagonal
/// when `causal`, then the softmax over those keys into `row` (the max
/// first, each exponential once into `e`, the sum in double; 0 past the
/// live keys). graph.attention and graph.attention_grad compute the same
/// probabilities through here.
template <typename T>
__attribute__((always_inline)) inline void
attentionRowProbabilitiesBody(T *row, int64_t i, int64_t keys, T scale,
                              const T *mask, int64_t maskRow,
                              int64_t maskStride, bool causal, T *e) {
  const T negInf = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < keys; ++j) {
    T score = row[j] * scale;
    if (mask)
      score += mask[maskRow + j * maskStride];
    row[j] = causal && j > i ? negInf : score;
  }
  T max = keys > 0 ? rowMax(row, keys) : T(0);
  // Past the diagonal exp(-inf - max) is 0 when max is finite.
  int64_t live =
      causal && std::isfinite(double(max)) ? std::min(keys, i + 1) : keys;
  double sum = expAndSum(row, max, live, e);
  divideRow(e, sum, row, live);
  std::fill(row + live, row + keys, T(0));
}

/// attentionRowProbabilitiesBody for float, compiled for AVX-512 and the
/// baseline ISA (VectorMath.h's dispatch; AttentionKernels.cpp): the same
/// operations in the same order, so the same bits, wider vectors.
void attentionRowProbabilitiesF32(float *row, int64_t i, int64_t keys,
                                  float scale, const float *mask,
                                  int64_t maskRow, int64_t maskStride,
                                  bool causal, float *e);

template <typename T>
void attentionRowProbabilities(T *row, int64_t i, int64_t keys, T scale,
                               const T *mask, int64_t maskRow,
                               int64_t maskStride, bool causal, T *e) {
  if constexpr (std::is_same_v<T, float>)
    attentionRowProbabilitiesF32(row, i, keys, scale, mask, maskRow,
                                 maskStride, causal, e);
  else
    attentionRowProbabilitiesBody(row, i, keys, scale, mask, maskRow,
                                  maskStride, causal, e);
}

/// Row i of attention's softmax gradient: `ds` holds dPd = dY V^T over the
/// row's `keys` keys; through dropout (`keep`, the row's kept scale per
/// key; null without dropout) and the softmax of `p` into
/// dS = p * (dP - sum(dP * p)) * scale, in double.
template <typename T>
__attribute__((always_inline)) inline void
attentionGradRowBody(T *ds, const T *p, const T *keep, int64_t keys,
                     double scale) {
  if (keep)
    for (int64_t j = 0; j < keys; ++j)
      ds[j] *= keep[j];
  double dot =
      laneSum(keys, [&](int64_t j) { return double(ds[j]) * double(p[j]); });
  for (int64_t j = 0; j < keys; ++j)
    ds[j] = static_cast<T>(double(p[j]) * (double(ds[j]) - dot) * scale);
}

/// attentionGradRowBody for float, dispatched as
/// attentionRowProbabilitiesF32 (NeuralNetGradKernels.cpp).
void attentionGradRowF32(float *ds, const float *p, const float *keep,
                         int64_t keys, double scale);

template <typename T>
void attentionGradRow(T *ds, const T *p, const T *keep, int64_t keys,
                      double scale) {
  if constexpr (std::is_same_v<T, float>)
    attentionGradRowF32(ds, p, keep, keys, scale);
  else
    attentionGradRowBody(ds, p, keep, keys, scale);
}

/// Query rows per block of the attention kernels: a causal block of rows
/// [i0, i0 + rows) multiplies only the keys it can see, so causal blocks
/// are short (32 rows: gpt_4l's attention and its gradient took 4 to 5 ms
/// less a step than with 64, 2 ms less than with 16; 128 took 8 ms more);
/// without causality every block sees every key and longer blocks make
/// larger products. The block only chooses which products are made: each
/// score and each output is the same sum either way.
constexpr int64_t attentionRows(bool causal) { return causal ? 32 : 64; }

/// Random123's philox4x32_R(10, ctr, key) (DropoutKernels.cpp).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                      std::array<uint32_t, 2> key);

/// The keep bit of element `index` of random stream `seed` under dropout
/// with `ratio`: a pure function of (seed, index), so the forward kernels
/// and their gradients draw the same mask (DropoutKernels.cpp).
bool dropoutKeeps(uint64_t seed, uint64_t index, double ratio);

/// Elements a block of an elementwise loop has at least: below about 2x
/// this an op runs on one thread (a block costs a wake-up, ~10 us).
constexpr int64_t kElementwiseGrain = 16384;

/// The grain of a loop over rows of `len` elements each: rows enough for
/// kElementwiseGrain / 4 elements (row kernels do several passes).
inline int64_t rowGrain(int64_t len) {
  return kElementwiseGrain / 4 / std::max<int64_t>(len, 1) + 1;
}

/// True if `in`, right-aligned against `out`, is `out`'s trailing dims
/// after dropping leading ones: `in` repeats whole along `out`'s leading
/// dims (a bias row).
inline bool isTrailingBroadcast(const std::vector<int64_t> &in,
                                const std::vector<int64_t> &out) {
  size_t lead = 0;
  while (lead < in.size() && in[lead] == 1)
    ++lead;
  size_t len = in.size() - lead;
  if (len > out.size())
    return false;
  for (size_t i = 0; i < len; ++i)
    if (in[lead + i] != out[out.size() - len + i])
      return false;
  return true;
}

/// True if `in` has the shape of `out` (no broadcasting needed).
inline bool sameShape(const TensorView &a, const TensorView &b) {
  return a.shape == b.shape;
}

} // namespace strata::runtime::cpu

#endif // STRATA_RUNTIME_CPU_KERNELUTILS_H
