//===- ConvImplicitGemm.cuh - Convolutions as implicit GEMMs -*- CUDA -*-===//
//
// graph.conv, graph.conv_grad_input and graph.conv_grad_weight as tiled
// GEMMs whose im2col operand is gathered into shared memory while its tile
// loads: an implicit GEMM, with no column buffer in memory. Per group g,
// with n a batch index, p an output position, i an input position, c an
// input channel of the group, o an output channel of the group and t a
// kernel tap:
//
//   conv              y[o, (n,p)]  = sum over (c,t) of W[o, (c,t)] X[(c,t), (n,p)]
//   conv_grad_input   dx[c, (n,i)] = sum over (o,t) of W[o, c, t] D[(o,t), (n,i)]
//   conv_grad_weight  dW[o, (c,t)] = sum over (n,p) of dy[o, (n,p)] X[(c,t), (n,p)]
//
// X[(c,t), (n,p)] is the input element that tap t of output position p
// reads (0 in the padding); D[(o,t), (n,i)] is the output gradient at the
// position whose tap t reads input i (0 when none does: off the stride grid
// or past the output). So any number of spatial dims up to 6, separate
// begin and end pads, strides, dilations and groups.
//
// A block computes a 64 x 64 tile of one group's result over a range of
// the sum, 16 deep at a time: 256 threads load the A and B tiles into
// shared memory (the gathers' per-column and per-depth coordinates are
// worked out once per tile and per step, not per element), then
//  - f32 / f64: each thread adds its 4 x 4 products on the CUDA cores, in
//    the element type (as the CPU's GEMM);
//  - bf16 / fp16: each of the 8 warps adds a 16 x 32 strip on the tensor
//    cores (WMMA 16 x 16 x 16, f32 accumulators), and the result rounds
//    once as it is stored (the CPU's adapter widens, sums in f32, rounds:
//    the products are exact in f32 either way, only the sums' order
//    differs).
// Every sum runs in a fixed order.
//
// When the tiles are too few to fill a GPU and the sum is long (a weight
// gradient's sum over batch and positions), the sum is split into
// `splits` ranges written to scratch and added, in range order, by a
// second kernel: the split depends only on the shape, so a run is
// reproducible on any GPU.
//
// Written over MmaPortable.cuh's block primitives, so the unit tests
// (tests/runtime/ConvImplicitGemmTest.cpp) run these kernels on the CPU,
// every tile, gather and split, against the CPU's convolutions.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_CONVIMPLICITGEMM_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_CONVIMPLICITGEMM_CUH

#include "MmaPortable.cuh"

#include "strata/Runtime/HostDevice.h"
#include "strata/Runtime/WindowPlan.h"

#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

namespace strata::runtime::cuda::conv_gemm {

/// Spatial dims a kernel takes by value (the runtime's rank 8, less N and C).
inline constexpr int kMaxSpatial = 6;

inline constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kThreads = 256;
/// Each thread's outputs: rows ty + 16 i and columns tx + 16 j, i, j < 4.
inline constexpr int kPerThread = 4;
/// A row of a shared tile (padded against bank conflicts on the stores).
inline constexpr int kLd = kTileN + 4;
static_assert(kTileM == kTileN && kTileM == 16 * kPerThread &&
                  kThreads == 16 * 16 && kTileM * kTileK == 4 * kThreads,
              "the load and product loops assume these tiles");

/// A sliding window over the spatial dims of an [N, C, x...] tensor.
struct Window {
  int spatial = 0;
  int64_t in[kMaxSpatial] = {}, out[kMaxSpatial] = {}, kernel[kMaxSpatial] = {};
  int64_t stride[kMaxSpatial] = {}, padBegin[kMaxSpatial] = {};
  int64_t padEnd[kMaxSpatial] = {}, dilation[kMaxSpatial] = {};
  int64_t inPlane = 1, outPlane = 1, taps = 1;
};

/// A convolution: x [batch, channels, in...], weight [m, cg, kernel...],
/// y [batch, m, out...]; cg = channels / groups, mg = m / groups.
struct Conv {
  Window w;
  int64_t batch = 0, channels = 0, m = 0, groups = 1, cg = 0, mg = 0;
};

enum class Pass { Forward, GradInput, GradWeight };

/// One group's GEMM (M x N, summed over K), its tiles and its split.
struct Gemm {
  int64_t M = 0, N = 0, K = 0;
  int64_t tilesM = 0, tilesN = 0;
  /// The sum in `splits` ranges of kChunk (a multiple of kTileK).
  int64_t splits = 1, kChunk = 0;

  int64_t blocks(int64_t groups) const {
    return groups * tilesM * tilesN * splits;
  }
  /// Scratch elements of the partial sums (0 without a split).
  int64_t partialElements(int64_t groups) const {
    return splits > 1 ? splits * groups * M * N : 0;
  }
};

/// Blocks that fill an H100 (132 SMs) about twice; below that a long sum
/// is split. A constant, not the device's count, so the split (and the
/// result's rounding) depends on the shape alone.
inline constexpr int64_t kFillBlocks = 264;
/// A split range is at least this many 16-deep steps; at most kMaxSplits.
inline constexpr int64_t kMinStepsPerSplit = 16, kMaxSplits = 32;

inline Gemm planGemm(Pass pass, const Conv &c) {
  Gemm g;
  const Window &w = c.w;
  switch (pass) {
  case Pass::Forward:
    g.M = c.mg, g.N = c.batch * w.outPlane, g.K = c.cg * w.taps;
    break;
  case Pass::GradInput:
    g.M = c.cg, g.N = c.batch * w.inPlane, g.K = c.mg * w.taps;
    break;
  case Pass::GradWeight:
    g.M = c.mg, g.N = c.cg * w.taps, g.K = c.batch * w.outPlane;
    break;
  }
  g.tilesM = (g.M + kTileM - 1) / kTileM;
  g.tilesN = (g.N + kTileN - 1) / kTileN;
  int64_t tiles = c.groups * g.tilesM * g.tilesN;
  int64_t steps = (g.K + kTileK - 1) / kTileK;
  int64_t splits = 1;
  if (tiles > 0 && tiles < kFillBlocks) {
    splits = (kFillBlocks + tiles - 1) / tiles;
    if (splits > steps / kMinStepsPerSplit)
      splits = steps / kMinStepsPerSplit;
    if (splits > kMaxSplits)
      splits = kMaxSplits;
    if (splits < 1)
      splits = 1;
  }
  int64_t stepsPerSplit = (steps + splits - 1) / splits;
  g.kChunk = stepsPerSplit * kTileK;
  // Every range non-empty.
  g.splits = g.K == 0 ? 1 : (g.K + g.kChunk - 1) / g.kChunk;
  return g;
}

//===----------------------------------------------------------------------===//
// Planning (host)
//===----------------------------------------------------------------------===//

/// A shared plan's window (WindowPlan.h), by value.
inline Status windowOf(const std::string &op, const window::Window &plan,
                       Window &w) {
  if (plan.spatial > size_t(kMaxSpatial))
    return Status::error(op + ": more than " + std::to_string(kMaxSpatial) +
                         " spatial dims are not supported on CUDA");
  w = Window();
  w.spatial = int(plan.spatial);
  for (size_t d = 0; d < plan.spatial; ++d) {
    w.in[d] = plan.in[d];
    w.out[d] = plan.out[d];
    w.kernel[d] = plan.kernel[d];
    w.stride[d] = plan.strides[d];
    w.padBegin[d] = plan.padBegin[d];
    w.padEnd[d] = plan.padEnd[d];
    w.dilation[d] = plan.dilations[d];
    w.inPlane *= w.in[d];
    w.outPlane *= w.out[d];
    w.taps *= w.kernel[d];
  }
  return Status::ok();
}

inline const char *convOpName(Pass pass) {
  switch (pass) {
  case Pass::Forward:
    return "graph.conv";
  case Pass::GradInput:
    return "graph.conv_grad_input";
  case Pass::GradWeight:
    return "graph.conv_grad_weight";
  }
  return "graph.conv";
}

/// The convolution and GEMM of a conv instruction (graph.conv (x, weight[,
/// bias]) -> y, graph.conv_grad_input (dy, weight) -> dx or
/// graph.conv_grad_weight (dy, x) -> dw), checked by WindowPlan.h's
/// planConv / planConvGrad.
inline Status planPass(const KernelContext &ctx, Pass pass, Conv &c,
                       Gemm &gemm) {
  const std::string op = convOpName(pass);
  window::ConvGeometry g;
  Status checked = pass == Pass::Forward
                       ? window::planConv(ctx, g)
                       : window::planConvGrad(ctx, pass == Pass::GradInput, g);
  if (!checked)
    return checked;
  if (Status s = windowOf(op, g.w, c.w); !s)
    return s;
  const TensorView &x = pass == Pass::Forward     ? ctx.inputs[0]
                        : pass == Pass::GradInput ? ctx.outputs[0]
                                                  : ctx.inputs[1];
  c.batch = x.shape[0];
  c.channels = x.shape[1];
  c.m = g.m;
  c.groups = g.groups;
  c.cg = g.cg;
  c.mg = g.mg;
  gemm = planGemm(pass, c);
  if (gemm.blocks(c.groups) > INT_MAX)
    return Status::error(op + ": " + std::to_string(gemm.blocks(c.groups)) +
                         " blocks are more than one launch takes");
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// The type a storage type computes in: f32 and f64 their own; bf16 and
/// fp16 f32, widened as loaded and rounded once as stored (the narrow
/// adapter's numbers, without its f32 copies).
template <typename S> struct ComputeOf {
  using type = S;
};
template <> struct ComputeOf<mma::Bf16> {
  using type = float;
};
template <> struct ComputeOf<mma::Fp16> {
  using type = float;
};

STRATA_MMA_FN float widen(float v) { return v; }
STRATA_MMA_FN double widen(double v) { return v; }
STRATA_MMA_FN float widen(mma::Bf16 v) { return mma::toFloat(v); }
STRATA_MMA_FN float widen(mma::Fp16 v) { return mma::toFloat(v); }
template <typename S, typename T> STRATA_MMA_FN S narrowTo(T v) {
  if constexpr (std::is_same_v<S, T>)
    return v;
  else
    return mma::fromFloat<S>(v);
}

/// A pass's launch over tensors of storage type S (float, double,
/// mma::Bf16, mma::Fp16).
template <typename S> struct Params {
  using T = typename ComputeOf<S>::type;
  Conv c;
  Gemm gemm;
  /// The operands the pass reads: x and weight (Forward), dy and weight
  /// (GradInput), dy and x (GradWeight); bias only in Forward.
  const S *x = nullptr, *weight = nullptr, *dy = nullptr, *bias = nullptr;
  S *out = nullptr;
  /// [splits, groups, M, N] partial sums when gemm.splits > 1.
  T *partial = nullptr;
};

/// Points `p` at a conv instruction's operands and result (host).
template <typename S>
inline void bindOperands(Pass pass, const KernelContext &ctx, Params<S> &p) {
  std::span<const TensorView> in = ctx.inputs;
  p.out = ctx.outputs[0].as<S>();
  if (pass == Pass::Forward) {
    p.x = in[0].as<S>();
    p.weight = in[1].as<S>();
    p.bias = in.size() == 3 ? in[2].as<S>() : nullptr;
  } else if (pass == Pass::GradInput) {
    p.dy = in[0].as<S>();
    p.weight = in[1].as<S>();
  } else {
    p.dy = in[0].as<S>();
    p.x = in[1].as<S>();
  }
}

/// The gathers' coordinates in shared memory: per tile column (fixed for
/// the block) and per step depth.
struct Info {
  int64_t *colBase, *colCoord, *depthBase, *depthAux, *depthCoord;

  static constexpr size_t kBytes =
      (kTileN * (1 + kMaxSpatial) + kTileK * (2 + kMaxSpatial)) *
      sizeof(int64_t);

  STRATA_MMA_FN static Info at(unsigned char *bytes) {
    Info i;
    i.colBase = reinterpret_cast<int64_t *>(bytes);
    i.colCoord = i.colBase + kTileN;
    i.depthBase = i.colCoord + kTileN * kMaxSpatial;
    i.depthAux = i.depthBase + kTileK;
    i.depthCoord = i.depthAux + kTileK;
    return i;
  }
};

/// f32 / f64 blocks (SIMT): the A tile [K][M] and the B tile [K][N] in the
/// compute type, then the coordinates.
template <typename T> struct SimtLayout {
  static constexpr size_t kTileBytes = size_t(kTileK) * kLd * sizeof(T);
  static constexpr size_t a = 0, b = kTileBytes, info = 2 * kTileBytes;
  static constexpr size_t bytes = info + Info::kBytes;
};

/// bf16 / fp16 blocks (tensor cores): the A tile row-major (m, k) and the B
/// tile row-major (k, n) in the element type, the f32 accumulators (m, n)
/// for the epilogue, then the coordinates. Rows are padded by 16 bytes
/// (against bank conflicts) and keep WMMA's rules: ldm a multiple of 8
/// elements (4 for f32), every fragment 32-byte aligned.
struct MmaLayout {
  static constexpr int kLdA = kTileK + 8, kLdB = kTileN + 8, kLdC = kTileN + 4;
  static constexpr size_t a = 0, b = a + size_t(kTileM) * kLdA * 2,
                          c = b + size_t(kTileK) * kLdB * 2,
                          info = c + size_t(kTileM) * kLdC * 4;
  static constexpr size_t bytes = info + Info::kBytes;
};
static_assert(MmaLayout::kLdA % 8 == 0 && MmaLayout::kLdB % 8 == 0 &&
                  MmaLayout::kLdC % 4 == 0,
              "WMMA's ldm: a multiple of 16 bytes");
static_assert(MmaLayout::b % 32 == 0 && MmaLayout::c % 32 == 0 &&
                  (16 * MmaLayout::kLdA * 2) % 32 == 0 &&
                  (16 * MmaLayout::kLdC * 4) % 32 == 0,
              "every WMMA fragment starts 32-byte aligned");

template <typename S> inline constexpr bool kOnTensorCores =
    std::is_same_v<S, mma::Bf16> || std::is_same_v<S, mma::Fp16>;

/// Dynamic shared memory of a block over storage type S.
template <typename S> constexpr size_t sharedBytes() {
  if constexpr (kOnTensorCores<S>)
    return MmaLayout::bytes;
  else
    return SimtLayout<S>::bytes;
}
static_assert(sharedBytes<double>() <= 48 * 1024 &&
                  sharedBytes<mma::Bf16>() <= 48 * 1024,
              "the tiles fit the default 48 KB of shared memory");

/// A storage type's zero.
template <typename S> STRATA_MMA_FN S zeroOf() {
  if constexpr (kOnTensorCores<S>)
    return mma::zeroOf<S>();
  else
    return S(0);
}

/// Row-major coordinates of `flat` in `dims` (the pooling kernels use it
/// too).
STRATA_HOST_DEVICE inline void unflatten(int64_t flat, const int64_t *dims,
                                         int n, int64_t *coord) {
  for (int d = n - 1; d >= 0; --d) {
    coord[d] = flat % dims[d];
    flat /= dims[d];
  }
}

/// The flat output position whose tap reads the input element at `padded`
/// (its coordinates plus padBegin), `offset` the tap's (its index times the
/// dilation); -1 when none does: off the stride grid or past the output.
STRATA_HOST_DEVICE inline int64_t outputAt(const Window &w,
                                           const int64_t *padded,
                                           const int64_t *offset) {
  int64_t at = 0;
  for (int d = 0; d < w.spatial; ++d) {
    int64_t num = padded[d] - offset[d];
    if (num < 0 || num % w.stride[d] != 0)
      return -1;
    int64_t o = num / w.stride[d];
    if (o >= w.out[d])
      return -1;
    at = at * w.out[d] + o;
  }
  return at;
}

/// The input element at `start` + `offset` per spatial dim below `base`, or
/// 0 in the padding.
template <typename S>
STRATA_MMA_FN S gatherInput(const Window &w, const S *x, int64_t base,
                            const int64_t *start, const int64_t *offset) {
  int64_t at = 0;
  for (int d = 0; d < w.spatial; ++d) {
    int64_t i = start[d] + offset[d];
    if (i < 0 || i >= w.in[d])
      return zeroOf<S>();
    at = at * w.in[d] + i;
  }
  return x[base + at];
}

/// Column `col` of the pass's result tile: the base and per-dim coordinates
/// its gathers start from.
template <Pass P, typename S, typename T = typename ComputeOf<S>::type>
STRATA_MMA_FN void columnInfo(const Params<S> &p, int64_t g, int64_t col,
                              int64_t &base, int64_t *coord) {
  const Conv &c = p.c;
  const Window &w = c.w;
  if (P == Pass::Forward) {
    // (n, p): the window's start in the group's channels of batch n.
    int64_t n = col / w.outPlane;
    unflatten(col % w.outPlane, w.out, w.spatial, coord);
    for (int d = 0; d < w.spatial; ++d)
      coord[d] = coord[d] * w.stride[d] - w.padBegin[d];
    base = (n * c.channels + g * c.cg) * w.inPlane;
  } else if (P == Pass::GradInput) {
    // (n, i): the padded input coordinate, in batch n's output gradient.
    int64_t n = col / w.inPlane;
    unflatten(col % w.inPlane, w.in, w.spatial, coord);
    for (int d = 0; d < w.spatial; ++d)
      coord[d] += w.padBegin[d];
    base = n * c.m * w.outPlane;
  } else {
    // (c, t): the tap's offset, in input channel c of the group.
    int64_t ch = col / w.taps;
    unflatten(col % w.taps, w.kernel, w.spatial, coord);
    for (int d = 0; d < w.spatial; ++d)
      coord[d] *= w.dilation[d];
    base = (g * c.cg + ch) * w.inPlane;
  }
}

/// Depth `k` of the sum: the bases and per-dim coordinates its gathers add.
template <Pass P, typename S, typename T = typename ComputeOf<S>::type>
STRATA_MMA_FN void depthInfo(const Params<S> &p, int64_t g, int64_t k,
                             int64_t &base, int64_t &aux, int64_t *coord) {
  const Conv &c = p.c;
  const Window &w = c.w;
  if (P == Pass::Forward) {
    // (c, t): input channel c's plane, the tap's offset.
    unflatten(k % w.taps, w.kernel, w.spatial, coord);
    for (int d = 0; d < w.spatial; ++d)
      coord[d] *= w.dilation[d];
    base = k / w.taps * w.inPlane;
    aux = 0;
  } else if (P == Pass::GradInput) {
    // (o, t): output channel o's gradient plane; W[o, 0, t].
    int64_t o = g * c.mg + k / w.taps, t = k % w.taps;
    unflatten(t, w.kernel, w.spatial, coord);
    for (int d = 0; d < w.spatial; ++d)
      coord[d] *= w.dilation[d];
    base = o * w.outPlane;
    aux = o * c.cg * w.taps + t;
  } else {
    // (n, p): batch n's input, the window's start; dy[n, g * mg, p].
    int64_t n = k / w.outPlane, pos = k % w.outPlane;
    unflatten(pos, w.out, w.spatial, coord);
    for (int d = 0; d < w.spatial; ++d)
      coord[d] = coord[d] * w.stride[d] - w.padBegin[d];
    base = n * c.channels * w.inPlane;
    aux = (n * c.m + g * c.mg) * w.outPlane + pos;
  }
}

/// A[row, k] of the tile step whose depth info is entry `kk` of `s`.
template <Pass P, typename S>
STRATA_MMA_FN S loadA(const Params<S> &p, const Info &s, int64_t g,
                      int64_t row, int64_t k, int kk) {
  const Conv &c = p.c;
  if (P == Pass::Forward)
    return p.weight[(g * c.mg + row) * p.gemm.K + k];
  if (P == Pass::GradInput)
    return p.weight[s.depthAux[kk] + row * c.w.taps];
  return p.dy[s.depthAux[kk] + row * c.w.outPlane];
}

/// B[k, col] from the tile's column `nn` and the step's depth `kk`.
template <Pass P, typename S>
STRATA_MMA_FN S loadB(const Params<S> &p, const Info &s, int kk, int nn) {
  const Window &w = p.c.w;
  const int64_t *colCoord = s.colCoord + nn * kMaxSpatial;
  const int64_t *depthCoord = s.depthCoord + kk * kMaxSpatial;
  if (P == Pass::GradInput) {
    int64_t at = outputAt(w, colCoord, depthCoord);
    return at < 0 ? zeroOf<S>() : p.dy[s.colBase[nn] + s.depthBase[kk] + at];
  }
  return gatherInput(w, p.x, s.colBase[nn] + s.depthBase[kk], colCoord,
                     depthCoord);
}

/// Writes the result element (row, col) of group g.
template <Pass P, typename S, typename T = typename ComputeOf<S>::type>
STRATA_MMA_FN void store(const Params<S> &p, int64_t g, int64_t row,
                         int64_t col, T value) {
  const Conv &c = p.c;
  const Window &w = c.w;
  if (P == Pass::Forward) {
    int64_t o = g * c.mg + row, n = col / w.outPlane, pos = col % w.outPlane;
    p.out[(n * c.m + o) * w.outPlane + pos] =
        narrowTo<S>(value + (p.bias ? widen(p.bias[o]) : T(0)));
  } else if (P == Pass::GradInput) {
    int64_t n = col / w.inPlane, pos = col % w.inPlane;
    p.out[(n * c.channels + g * c.cg + row) * w.inPlane + pos] =
        narrowTo<S>(value);
  } else {
    p.out[(g * c.mg + row) * p.gemm.N + col] = narrowTo<S>(value);
  }
}

/// Where a block is in its launch: group, tile and range of the sum.
struct BlockPlace {
  int64_t split, g, row0, col0, kBegin, kEnd;
  STRATA_MMA_FN BlockPlace(const Gemm &G, int64_t block) {
    split = block % G.splits;
    int64_t rest = block / G.splits;
    int64_t tileN = rest % G.tilesN;
    rest /= G.tilesN;
    g = rest / G.tilesM;
    row0 = rest % G.tilesM * kTileM;
    col0 = tileN * kTileN;
    kBegin = split * G.kChunk;
    kEnd = kBegin + G.kChunk < G.K ? kBegin + G.kChunk : G.K;
  }
};

/// Loads the block's column coordinates (before the first step).
template <Pass P, typename S>
STRATA_MMA_FN void loadColumns(const Params<S> &p, const Info &info,
                               const BlockPlace &at, int thread) {
  if (thread < kTileN && at.col0 + thread < p.gemm.N)
    columnInfo<P>(p, at.g, at.col0 + thread, info.colBase[thread],
                  info.colCoord + thread * kMaxSpatial);
}

/// Loads step k0's depth coordinates; the caller then syncs.
template <Pass P, typename S>
STRATA_MMA_FN void loadDepths(const Params<S> &p, const Info &info,
                              const BlockPlace &at, int64_t k0, int thread) {
  if (thread < kTileK && k0 + thread < at.kEnd)
    depthInfo<P>(p, at.g, k0 + thread, info.depthBase[thread],
                 info.depthAux[thread], info.depthCoord + thread * kMaxSpatial);
}

/// Calls put(mm, kk, value) for the step's A elements, depth fastest (the
/// weight rows and dy's positions are contiguous), then
/// put(kk, nn, value) through `putB` for its B elements: along the
/// positions, which are the columns except in GradWeight. Out of range:
/// zero.
template <Pass P, typename S, typename PutA, typename PutB>
STRATA_MMA_FN void loadStep(const Params<S> &p, const Info &info,
                            const BlockPlace &at, int64_t k0, int thread,
                            PutA &&putA, PutB &&putB) {
  const Gemm &G = p.gemm;
  for (int l = 0; l < kTileM * kTileK / kThreads; ++l) {
    int e = thread + l * kThreads, kk = e % kTileK, mm = e / kTileK;
    int64_t row = at.row0 + mm, k = k0 + kk;
    putA(mm, kk, row < G.M && k < at.kEnd ? loadA<P>(p, info, at.g, row, k, kk)
                                          : zeroOf<S>());
  }
  for (int l = 0; l < kTileK * kTileN / kThreads; ++l) {
    int e = thread + l * kThreads;
    int kk = P == Pass::GradWeight ? e % kTileK : e / kTileN;
    int nn = P == Pass::GradWeight ? e / kTileK : e % kTileN;
    putB(kk, nn, at.col0 + nn < G.N && k0 + kk < at.kEnd
                     ? loadB<P>(p, info, kk, nn)
                     : zeroOf<S>());
  }
}

/// The block's result element (row0 + r, col0 + c), stored or, with a
/// split, kept as a partial sum.
template <Pass P, typename S, typename T>
STRATA_MMA_FN void finish(const Params<S> &p, const BlockPlace &at, int r,
                          int c, T value) {
  const Gemm &G = p.gemm;
  int64_t row = at.row0 + r, col = at.col0 + c;
  if (row >= G.M || col >= G.N)
    return;
  if (G.splits == 1)
    store<P>(p, at.g, row, col, value);
  else
    p.partial[((at.split * p.c.groups + at.g) * G.M + row) * G.N + col] =
        value;
}

/// An f32 / f64 block: each thread sums a 4 x 4 patch on the CUDA cores.
template <Pass P, typename S>
STRATA_MMA_FN void simtBlock(const Params<S> &p, int64_t block, int thread,
                             unsigned char *shared) {
  using T = typename ComputeOf<S>::type;
  using L = SimtLayout<T>;
  T *sa = reinterpret_cast<T *>(shared + L::a);
  T *sb = reinterpret_cast<T *>(shared + L::b);
  Info info = Info::at(shared + L::info);
  BlockPlace at(p.gemm, block);
  loadColumns<P>(p, info, at, thread);

  const int ty = thread / 16, tx = thread % 16;
  T acc[kPerThread][kPerThread];
  for (int i = 0; i < kPerThread; ++i)
    for (int j = 0; j < kPerThread; ++j)
      acc[i][j] = T(0);

  for (int64_t k0 = at.kBegin; k0 < at.kEnd; k0 += kTileK) {
    loadDepths<P>(p, info, at, k0, thread);
    mma::syncThreads();
    loadStep<P>(
        p, info, at, k0, thread,
        [&](int mm, int kk, S v) { sa[kk * kLd + mm] = widen(v); },
        [&](int kk, int nn, S v) { sb[kk * kLd + nn] = widen(v); });
    mma::syncThreads();
    for (int kk = 0; kk < kTileK; ++kk) {
      T a[kPerThread], b[kPerThread];
      for (int i = 0; i < kPerThread; ++i)
        a[i] = sa[kk * kLd + ty + 16 * i];
      for (int j = 0; j < kPerThread; ++j)
        b[j] = sb[kk * kLd + tx + 16 * j];
      for (int i = 0; i < kPerThread; ++i)
        for (int j = 0; j < kPerThread; ++j)
          acc[i][j] += a[i] * b[j];
    }
    mma::syncThreads();
  }

  for (int i = 0; i < kPerThread; ++i)
    for (int j = 0; j < kPerThread; ++j)
      finish<P>(p, at, ty + 16 * i, tx + 16 * j, acc[i][j]);
}

/// A bf16 / fp16 block on tensor cores: 8 warps, each a 16 x 32 strip of
/// the 64 x 64 tile in two 16 x 16 f32 accumulators; the tiles stay in the
/// element type (the products are exact in f32, as the CPU's widened ones).
template <Pass P, typename S>
STRATA_MMA_FN void mmaBlock(const Params<S> &p, int64_t block, int thread,
                            unsigned char *shared) {
  using L = MmaLayout;
  S *sa = reinterpret_cast<S *>(shared + L::a);
  S *sb = reinterpret_cast<S *>(shared + L::b);
  float *sc = reinterpret_cast<float *>(shared + L::c);
  Info info = Info::at(shared + L::info);
  BlockPlace at(p.gemm, block);
  loadColumns<P>(p, info, at, thread);

  const int warp = thread / 32, r0 = warp / 2 * 16, c0 = warp % 2 * 32;
  mma::FragC acc[2];
  mma::zero(acc[0]);
  mma::zero(acc[1]);
  mma::FragA<S> fa;
  mma::FragBRow<S> fb;
  for (int64_t k0 = at.kBegin; k0 < at.kEnd; k0 += kTileK) {
    loadDepths<P>(p, info, at, k0, thread);
    mma::syncThreads();
    loadStep<P>(
        p, info, at, k0, thread,
        [&](int mm, int kk, S v) { sa[mm * L::kLdA + kk] = v; },
        [&](int kk, int nn, S v) { sb[kk * L::kLdB + nn] = v; });
    mma::syncThreads();
    mma::load(fa, sa + r0 * L::kLdA, L::kLdA);
    for (int j = 0; j < 2; ++j) {
      mma::load(fb, sb + c0 + 16 * j, L::kLdB);
      mma::mmaSync(acc[j], fa, fb);
    }
    mma::syncThreads();
  }
  for (int j = 0; j < 2; ++j)
    mma::store(sc + r0 * L::kLdC + c0 + 16 * j, acc[j], L::kLdC);
  mma::syncThreads();
  for (int e = thread; e < kTileM * kTileN; e += kThreads)
    finish<P>(p, at, e / kTileN, e % kTileN, sc[e / kTileN * L::kLdC + e % kTileN]);
}

/// Block `block` of the pass's launch (gemm.blocks(groups) blocks of
/// kThreads, sharedBytes<S>() of shared memory each).
template <Pass P, typename S>
STRATA_MMA_FN void gemmBlock(const Params<S> &p, int64_t block, int thread,
                             unsigned char *shared) {
  if constexpr (kOnTensorCores<S>)
    mmaBlock<P>(p, block, thread, shared);
  else
    simtBlock<P>(p, block, thread, shared);
}

/// Element e of [groups, M, N] after a split: its ranges' sums in order.
template <Pass P, typename S, typename T = typename ComputeOf<S>::type>
STRATA_MMA_FN void addSplits(const Params<S> &p, int64_t e) {
  const Gemm &G = p.gemm;
  int64_t per = p.c.groups * G.M * G.N;
  T sum = p.partial[e];
  for (int64_t s = 1; s < G.splits; ++s)
    sum += p.partial[s * per + e];
  store<P>(p, e / (G.M * G.N), e / G.N % G.M, e % G.N, sum);
}

} // namespace strata::runtime::cuda::conv_gemm

#endif // STRATA_RUNTIME_CUDA_KERNELS_CONVIMPLICITGEMM_CUH
