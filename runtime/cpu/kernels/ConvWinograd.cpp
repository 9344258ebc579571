//===- ConvWinograd.cpp - Winograd F(2x2, 3x3) convolutions on the CPU ----===//
//
// Lavin and Gray's F(2 x 2, 3 x 3), "Fast Algorithms for Convolutional
// Neural Networks" (2016): a 2 x 2 output tile Y of a 3 x 3 kernel g over
// the 4 x 4 input tile d is
//
//   Y = A^T [(G g G^T) . (B^T d B)] A
//
//   B^T = | 1  0 -1  0 |   G = | 1    0    0   |   A^T = | 1  1  1  0 |
//         | 0  1  1  0 |       | 1/2  1/2  1/2 |         | 0  1 -1 -1 |
//         | 0 -1  1  0 |       | 1/2 -1/2  1/2 |
//         | 0  1  0 -1 |       | 0    0    1   |
//
// with . the elementwise product, summed over input channels: for each of
// the 16 transformed elements e, M_e [cout, tiles] = U_e [cout, cin] x
// V_e [cin, tiles], one GEMM. The gradient of g is the adjoint,
// G^T [sum over tiles (A dY A^T) . (B^T d B)] G: 16 GEMMs dU_e [cout, cin]
// = dM_e [cout, tiles] x V_e^T.
//
// Tiles are numbered over (sample, tile row, tile column) and taken in
// blocks whose size depends on the channels alone; each block's input
// transform runs over the pool by channel, its 16 GEMMs one per pool part,
// its output transform by output channel. Nothing depends on the thread
// count, so neither do the results. Tiles are read and written through
// zero-padded row buffers, so the transforms have no edge cases; where a
// row of tiles is shorter than a transform's 16 lanes (outputs narrower
// than 32), the transforms take 16 tiles from several rows and samples at
// once, through zero-padded planes and per-tile offsets. Those loops are
// compiled for AVX-512 too (STRATA_VECTOR_DISPATCHED), with the same
// rounding as the baseline build (no FMA contraction in the kernels).
//
//===----------------------------------------------------------------------===//

#include "kernels/ConvWinograd.h"

#include "kernels/KernelUtils.h"
#include "kernels/VectorMath.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime::cpu {
namespace {

constexpr int64_t kElems = 16; // 4 x 4 transformed elements a tile

/// The fewest tiles in a batch that take the Winograd path. The forward
/// and conv_grad_input gain from 64 on (the CIFAR ResNet's 4 x 4 layer at
/// batch 16, 64 tiles of 512 channels: 11.2 and 11.6 ms against im2col's
/// 15.2 and 14.2). conv_grad_weight does too (the same layer's three calls
/// a step: 42.8 -> 34.8 ms at one thread, 23.3 -> 17.5 at two), but from 64
/// tiles it would also take the digits CNN's 16- and 32-channel layer (128
/// tiles), whose losses then leave PyTorch's by 1.2e-4 within 20 AdamW
/// steps, where `digits.cnn` allows 1e-5. So conv_grad_weight takes it
/// from 64 tiles where both channel counts reach kWideChannels, and from
/// 256 otherwise.
constexpr int64_t kMinTiles = 64, kMinTilesGradWeight = 256;
constexpr int64_t kWideChannels = 128;

/// The tiles of one convolution's output: 2 x 2 blocks, ceil(out / 2) a
/// dim, numbered over (sample, tile row, tile column).
struct TileGrid {
  int64_t tilesH, tilesW, perImage, total;
  explicit TileGrid(const Conv3x3Shape &s)
      : tilesH((s.outH + 1) / 2), tilesW((s.outW + 1) / 2),
        perImage(tilesH * tilesW), total(s.batch * perImage) {}
};

/// Tiles per block: the block's transformed inputs and outputs (16
/// elements each for cin + cout channels) within about `bytes`, a multiple
/// of 16 tiles, 128 to 1024. The forward's 512 KiB keep a block in the
/// core's L2 between the transforms and the GEMMs; conv_grad_weight's
/// 2 MiB give its GEMMs a longer sum (K = tiles) to amortize their output.
/// Fewer than 128 tiles make the GEMMs too thin. (Tuned on the CIFAR
/// ResNet-18 shapes, one Zen 4 core: 32 x 32 x 64 channels ran 8.7 ms
/// forward at 512 KiB against 11.3 at 8 MiB.)
int64_t tilesPerBlock(const Conv3x3Shape &s, int64_t bytes) {
  int64_t perTile = kElems * (s.cin + s.cout) * int64_t(sizeof(float));
  int64_t tiles = std::clamp<int64_t>(bytes / perTile, 128, 1024);
  return tiles / 16 * 16;
}

/// Calls fn(sample, tileRow, firstTileColumn, count, blockOffset) for the
/// runs of tiles [t0, t0 + count) that lie in one tile row.
template <typename Fn>
void forEachRun(const TileGrid &g, int64_t t0, int64_t count, Fn fn) {
  for (int64_t t = t0, end = t0 + count; t < end;) {
    int64_t n = t / g.perImage, r = t % g.perImage;
    int64_t ty = r / g.tilesW, tx = r % g.tilesW;
    int64_t len = std::min(g.tilesW - tx, end - t);
    fn(n, ty, tx, len, t - t0);
    t += len;
  }
}

/// Copies columns [col0, col0 + width) of row `row` of a [rows, cols]
/// plane into buf, zeros where they fall outside the plane.
void paddedRow(const float *plane, int64_t rows, int64_t cols, int64_t row,
               int64_t col0, int64_t width, float *buf) {
  if (row < 0 || row >= rows) {
    std::fill(buf, buf + width, 0.0f);
    return;
  }
  int64_t lo = std::clamp<int64_t>(-col0, 0, width);
  int64_t hi = std::clamp<int64_t>(cols - col0, lo, width);
  std::fill(buf, buf + lo, 0.0f);
  std::copy(plane + row * cols + col0 + lo, plane + row * cols + col0 + hi,
            buf + lo);
  std::fill(buf + hi, buf + width, 0.0f);
}

//===----------------------------------------------------------------------===//
// Transforms
//===----------------------------------------------------------------------===//

/// Tiles a transform takes at once: their values go through fixed-size
/// local arrays, [element][tile], so the loops over tiles vectorize (no
/// aliasing between the 16 strided streams) and each element's lanes are
/// stored as one contiguous run.
constexpr int64_t kLanes = 16;

/// Whether a block's transforms take kLanes tiles at a time from several
/// tile rows and samples (through per-tile offsets) rather than one row of
/// tiles at a time: rows of fewer than kLanes tiles would leave most lanes
/// idle (the CIFAR ResNet's 4 x 4 layer has 2 tiles a row). Every tile is
/// transformed by the same operations either way.
bool gathersTiles(const TileGrid &g) { return g.tilesW < kLanes; }

/// Where tile t0 + i of a block lies: its first output element's offset in
/// a [batch, channels, outH, outW] tensor's channel 0, and how many of its
/// 2 x 2 outputs' rows and columns fall inside the output.
struct TilePlace {
  int64_t outBase;
  int rows, cols;
};

std::vector<TilePlace> tilePlaces(const Conv3x3Shape &s, const TileGrid &g,
                                  int64_t channels, int64_t t0, int64_t count) {
  std::vector<TilePlace> places(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t t = t0 + i, n = t / g.perImage, r = t % g.perImage;
    int64_t row = 2 * (r / g.tilesW), col = 2 * (r % g.tilesW);
    places[i] = {n * channels * s.outH * s.outW + row * s.outW + col,
                 static_cast<int>(std::min<int64_t>(2, s.outH - row)),
                 static_cast<int>(std::min<int64_t>(2, s.outW - col))};
  }
  return places;
}

/// Copies n <= kLanes floats; a whole kLanes as one fixed-size copy (a
/// vector move, where std::copy of a runtime count becomes rep movs).
STRATA_VECTOR_BODY void copyLanes(const float *src, int64_t n, float *dst) {
  if (n == kLanes)
    for (int64_t i = 0; i < kLanes; ++i)
      dst[i] = src[i];
  else
    std::copy(src, src + n, dst);
}

/// n floats, uninitialized (each is written before it is read).
std::unique_ptr<float[]> scratch(int64_t n) {
  return std::unique_ptr<float[]>(new float[static_cast<size_t>(n)]);
}

/// n rounded up to a multiple of kLanes: the row buffers' tiles.
int64_t roundUp(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

/// out = B^T d B of kLanes tiles, d [row][column][tile].
STRATA_VECTOR_BODY void inputTransformLanes(const float (&d)[4][4][kLanes],
                                            float (&out)[16][kLanes]) {
  float t[4][4][kLanes];
  for (int j = 0; j < 4; ++j) // B^T d
    for (int64_t i = 0; i < kLanes; ++i) {
      t[0][j][i] = d[0][j][i] - d[2][j][i];
      t[1][j][i] = d[1][j][i] + d[2][j][i];
      t[2][j][i] = d[2][j][i] - d[1][j][i];
      t[3][j][i] = d[1][j][i] - d[3][j][i];
    }
  for (int r = 0; r < 4; ++r) // (B^T d) B
    for (int64_t i = 0; i < kLanes; ++i) {
      out[4 * r + 0][i] = t[r][0][i] - t[r][2][i];
      out[4 * r + 1][i] = t[r][1][i] + t[r][2][i];
      out[4 * r + 2][i] = t[r][2][i] - t[r][1][i];
      out[4 * r + 3][i] = t[r][1][i] - t[r][3][i];
    }
}

/// V = B^T d B for `len` tiles side by side: tile i reads columns
/// [2i, 2i + 4) of the four rows (which hold 2 * roundUp(len, kLanes) + 2
/// columns); element e of tile i goes to v[e * stride + i].
STRATA_VECTOR_DISPATCHED
void inputTransform(const float *r0, const float *r1, const float *r2,
                    const float *r3, int64_t len, float *v, int64_t stride) {
  const float *rows[4] = {r0, r1, r2, r3};
  for (int64_t i0 = 0; i0 < len; i0 += kLanes) {
    float d[4][4][kLanes], out[16][kLanes];
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 4; ++j)
        for (int64_t i = 0; i < kLanes; ++i)
          d[r][j][i] = rows[r][2 * (i0 + i) + j];
    inputTransformLanes(d, out);
    int64_t n = std::min(kLanes, len - i0);
    for (int e = 0; e < 16; ++e)
      copyLanes(out[e], n, v + e * stride + i0);
  }
}

/// inputTransform for len <= kLanes tiles anywhere: tile i's 4 x 4 input
/// is at planes + offset[i], its rows `rowStride` apart (zero-padded
/// planes, so no edges); element e of tile i goes to v[e * stride + i].
/// The same operations per tile as inputTransform, so the same bits.
STRATA_VECTOR_DISPATCHED
void inputTransformGathered(const float *planes, const int64_t *offset,
                            int64_t rowStride, int64_t len, float *v,
                            int64_t stride) {
  float d[4][4][kLanes], out[16][kLanes];
  // Whole groups load without a test per lane (which kept the loads
  // scalar); the last, short one pads with zeros.
  if (len == kLanes)
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 4; ++j)
        for (int64_t i = 0; i < kLanes; ++i)
          d[r][j][i] = planes[offset[i] + r * rowStride + j];
  else
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 4; ++j)
        for (int64_t i = 0; i < kLanes; ++i)
          d[r][j][i] = i < len ? planes[offset[i] + r * rowStride + j] : 0.0f;
  inputTransformLanes(d, out);
  for (int e = 0; e < 16; ++e)
    copyLanes(out[e], len, v + e * stride);
}

/// Y = A^T M A for `len` tiles: element e of tile i at m[e * stride + i];
/// tile i's outputs go to columns 2i and 2i + 1 of y0 (first row) and y1
/// (each 2 * roundUp(len, kLanes) columns).
STRATA_VECTOR_DISPATCHED
void outputTransform(const float *m, int64_t stride, int64_t len, float *y0,
                     float *y1) {
  for (int64_t i0 = 0; i0 < len; i0 += kLanes) {
    float e[16][kLanes], t[2][4][kLanes], out[2][2 * kLanes];
    int64_t n = std::min(kLanes, len - i0);
    for (int k = 0; k < 16; ++k) {
      copyLanes(m + k * stride + i0, n, e[k]);
      std::fill(e[k] + n, e[k] + kLanes, 0.0f);
    }
    for (int j = 0; j < 4; ++j) // A^T M
      for (int64_t i = 0; i < kLanes; ++i) {
        t[0][j][i] = e[j][i] + e[4 + j][i] + e[8 + j][i];
        t[1][j][i] = e[4 + j][i] - e[8 + j][i] - e[12 + j][i];
      }
    for (int r = 0; r < 2; ++r) // (A^T M) A
      for (int64_t i = 0; i < kLanes; ++i) {
        out[r][2 * i] = t[r][0][i] + t[r][1][i] + t[r][2][i];
        out[r][2 * i + 1] = t[r][1][i] - t[r][2][i] - t[r][3][i];
      }
    std::copy(out[0], out[0] + 2 * kLanes, y0 + 2 * i0);
    std::copy(out[1], out[1] + 2 * kLanes, y1 + 2 * i0);
  }
}

/// dM = A dY A^T for `len` tiles: tile i's output gradient at columns 2i
/// and 2i + 1 of dy0 and dy1 (each 2 * roundUp(len, kLanes) columns);
/// element e to dm[e * stride + i].
STRATA_VECTOR_DISPATCHED
void gradOutputTransform(const float *dy0, const float *dy1, int64_t len,
                         float *dm, int64_t stride) {
  for (int64_t i0 = 0; i0 < len; i0 += kLanes) {
    float a[kLanes], b[kLanes], c[kLanes], d[kLanes], t[4][2][kLanes],
        out[16][kLanes];
    for (int64_t i = 0; i < kLanes; ++i) {
      a[i] = dy0[2 * (i0 + i)];
      b[i] = dy0[2 * (i0 + i) + 1];
      c[i] = dy1[2 * (i0 + i)];
      d[i] = dy1[2 * (i0 + i) + 1];
    }
    for (int64_t i = 0; i < kLanes; ++i) { // A dY
      t[0][0][i] = a[i];
      t[0][1][i] = b[i];
      t[1][0][i] = a[i] + c[i];
      t[1][1][i] = b[i] + d[i];
      t[2][0][i] = a[i] - c[i];
      t[2][1][i] = b[i] - d[i];
      t[3][0][i] = -c[i];
      t[3][1][i] = -d[i];
    }
    for (int r = 0; r < 4; ++r) // (A dY) A^T
      for (int64_t i = 0; i < kLanes; ++i) {
        out[4 * r + 0][i] = t[r][0][i];
        out[4 * r + 1][i] = t[r][0][i] + t[r][1][i];
        out[4 * r + 2][i] = t[r][0][i] - t[r][1][i];
        out[4 * r + 3][i] = -t[r][1][i];
      }
    int64_t n = std::min(kLanes, len - i0);
    for (int e = 0; e < 16; ++e)
      copyLanes(out[e], n, dm + e * stride + i0);
  }
}

/// U [16, rows, cols] = G g G^T of the kernels of one row, columns [0,
/// cols): kernel c's nine taps contiguous at src + c * colStep, tap (i, j)
/// at i * 3 + j, or at (2 - i) * 3 + (2 - j) when `Flipped`. Each group
/// of kLanes kernels is copied whole into a local array first, so the
/// transposition to lanes reads fixed offsets (a runtime tap table and a
/// test per lane kept these loads scalar, with their index arithmetic).
template <bool Flipped>
STRATA_VECTOR_BODY void transformKernelRowBody(const float *src,
                                               int64_t colStep, int64_t cols,
                                               float *u, int64_t plane) {
  for (int64_t c0 = 0; c0 < cols; c0 += kLanes) {
    int64_t n = std::min(kLanes, cols - c0);
    float k9[kLanes][9], g[3][3][kLanes], t[4][3][kLanes], out[16][kLanes];
    for (int64_t l = 0; l < n; ++l)
      for (int q = 0; q < 9; ++q)
        k9[l][q] = src[(c0 + l) * colStep + q];
    for (int64_t l = n; l < kLanes; ++l)
      for (int q = 0; q < 9; ++q)
        k9[l][q] = 0.0f;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        for (int64_t l = 0; l < kLanes; ++l)
          g[i][j][l] = k9[l][Flipped ? (2 - i) * 3 + (2 - j) : i * 3 + j];
    for (int j = 0; j < 3; ++j) // G g
      for (int64_t l = 0; l < kLanes; ++l) {
        t[0][j][l] = g[0][j][l];
        t[1][j][l] = 0.5f * (g[0][j][l] + g[1][j][l] + g[2][j][l]);
        t[2][j][l] = 0.5f * (g[0][j][l] - g[1][j][l] + g[2][j][l]);
        t[3][j][l] = g[2][j][l];
      }
    for (int r = 0; r < 4; ++r) // (G g) G^T
      for (int64_t l = 0; l < kLanes; ++l) {
        out[4 * r + 0][l] = t[r][0][l];
        out[4 * r + 1][l] = 0.5f * (t[r][0][l] + t[r][1][l] + t[r][2][l]);
        out[4 * r + 2][l] = 0.5f * (t[r][0][l] - t[r][1][l] + t[r][2][l]);
        out[4 * r + 3][l] = t[r][2][l];
      }
    for (int e = 0; e < 16; ++e)
      copyLanes(out[e], n, u + e * plane + c0);
  }
}

STRATA_VECTOR_DISPATCHED
void transformKernelRow(const float *src, int64_t colStep, int64_t cols,
                        float *u, int64_t plane) {
  transformKernelRowBody<false>(src, colStep, cols, u, plane);
}

STRATA_VECTOR_DISPATCHED
void transformFlippedKernelRow(const float *src, int64_t colStep, int64_t cols,
                               float *u, int64_t plane) {
  transformKernelRowBody<true>(src, colStep, cols, u, plane);
}

/// U [16, cout, cin] = G g G^T of every kernel [cout, cin, 3, 3]; with
/// `flipped`, of the kernel of the input gradient instead, g'[c][k][i][j]
/// = g[k][c][2 - i][2 - j] ([cin, cout, 3, 3], U [16, cin, cout]).
void transformWeights(const float *weight, int64_t cout, int64_t cin,
                      bool flipped, float *u) {
  int64_t rows = flipped ? cin : cout, cols = flipped ? cout : cin;
  int64_t plane = rows * cols;
  // Kernel (o, c) is weight[o][c] unflipped, weight[c][o] flipped.
  int64_t rowStep = flipped ? 9 : cin * 9, colStep = flipped ? cin * 9 : 9;
  parallelFor(rows, std::max<int64_t>(1, 4096 / (cols * 9)),
              [&](int64_t first, int64_t last) {
                for (int64_t o = first; o < last; ++o)
                  (flipped ? transformFlippedKernelRow : transformKernelRow)(
                      weight + o * rowStep, colStep, cols, u + o * cols, plane);
              });
}

/// dw [cout, cin, 3, 3] = G^T dU G of dU [16, cout, cin], kernels
/// [k0, k0 + n) of the flat (cout, cin) index, n <= kLanes.
STRATA_VECTOR_DISPATCHED
void inverseTransformKernels(const float *du, int64_t plane, int64_t k0,
                             int64_t n, float *dw) {
  float u[4][4][kLanes], t[3][4][kLanes], g[kLanes][9];
  // Whole groups load without a test per lane (as inputTransformGathered).
  if (n == kLanes)
    for (int e = 0; e < 16; ++e)
      for (int64_t l = 0; l < kLanes; ++l)
        u[e / 4][e % 4][l] = du[e * plane + k0 + l];
  else
    for (int e = 0; e < 16; ++e)
      for (int64_t l = 0; l < kLanes; ++l)
        u[e / 4][e % 4][l] = l < n ? du[e * plane + k0 + l] : 0.0f;
  for (int j = 0; j < 4; ++j) // G^T dU
    for (int64_t l = 0; l < kLanes; ++l) {
      t[0][j][l] = u[0][j][l] + 0.5f * (u[1][j][l] + u[2][j][l]);
      t[1][j][l] = 0.5f * (u[1][j][l] - u[2][j][l]);
      t[2][j][l] = 0.5f * (u[1][j][l] + u[2][j][l]) + u[3][j][l];
    }
  for (int r = 0; r < 3; ++r) // (G^T dU) G
    for (int64_t l = 0; l < kLanes; ++l) {
      g[l][r * 3 + 0] = t[r][0][l] + 0.5f * (t[r][1][l] + t[r][2][l]);
      g[l][r * 3 + 1] = 0.5f * (t[r][1][l] - t[r][2][l]);
      g[l][r * 3 + 2] = 0.5f * (t[r][1][l] + t[r][2][l]) + t[r][3][l];
    }
  std::copy(&g[0][0], &g[0][0] + 9 * n, dw + k0 * 9);
}

/// dw [cout, cin, 3, 3] = G^T dU G of dU [16, cout, cin].
void inverseTransformWeights(const float *du, int64_t cout, int64_t cin,
                             float *dw) {
  int64_t plane = cout * cin, blocks = (plane + kLanes - 1) / kLanes;
  parallelFor(blocks, 16, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b)
      inverseTransformKernels(du, plane, b * kLanes,
                              std::min(kLanes, plane - b * kLanes), dw);
  });
}

/// V [16, cin, ld] of tiles [t0, t0 + count): B^T d B of each channel's
/// 4 x 4 input tiles.
void transformInputs(const Conv3x3Shape &s, const TileGrid &g, const float *x,
                     int64_t t0, int64_t count, float *v, int64_t ld) {
  int64_t stride = s.cin * ld, plane = s.inH * s.inW;
  if (gathersTiles(g)) {
    // Each sample's plane of a channel, zero-padded to the tiles' reach
    // (rows and columns -pad to 2 * tiles + 2 - pad), then kLanes tiles a
    // call at their offsets in those planes (the same for every channel).
    int64_t ph = 2 * g.tilesH + 2, pw = 2 * g.tilesW + 2, padded = ph * pw;
    int64_t n0 = t0 / g.perImage, n1 = (t0 + count - 1) / g.perImage + 1;
    std::vector<int64_t> offset(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      int64_t t = t0 + i, r = t % g.perImage;
      offset[i] = (t / g.perImage - n0) * padded + 2 * (r / g.tilesW) * pw +
                  2 * (r % g.tilesW);
    }
    parallelFor(s.cin, 1, [&](int64_t first, int64_t last) {
      // scratch: the block's samples' padded planes of one channel.
      std::vector<float> planes(static_cast<size_t>((n1 - n0) * padded));
      for (int64_t c = first; c < last; ++c) {
        for (int64_t n = n0; n < n1; ++n)
          for (int64_t row = 0; row < ph; ++row)
            paddedRow(x + (n * s.cin + c) * plane, s.inH, s.inW, row - s.padTop,
                      -s.padLeft, pw,
                      planes.data() + (n - n0) * padded + row * pw);
        for (int64_t at = 0; at < count; at += kLanes)
          inputTransformGathered(planes.data(), offset.data() + at, pw,
                                 std::min(kLanes, count - at), v + c * ld + at,
                                 stride);
      }
    });
    return;
  }
  parallelFor(s.cin, 1, [&](int64_t first, int64_t last) {
    // scratch: four zero-padded input rows of one run of tiles.
    int64_t width = 2 * roundUp(g.tilesW) + 2;
    std::vector<float> rows(4 * width);
    for (int64_t c = first; c < last; ++c)
      forEachRun(
          g, t0, count,
          [&](int64_t n, int64_t ty, int64_t tx, int64_t len, int64_t at) {
            const float *src = x + (n * s.cin + c) * plane;
            int64_t cols = 2 * roundUp(len) + 2;
            for (int r = 0; r < 4; ++r)
              paddedRow(src, s.inH, s.inW, 2 * ty - s.padTop + r,
                        2 * tx - s.padLeft, cols, rows.data() + r * width);
            inputTransform(rows.data(), rows.data() + width,
                           rows.data() + 2 * width, rows.data() + 3 * width,
                           len, v + c * ld + at, stride);
          });
  });
}

/// y = A^T [U . V] A (+ bias) for the block of tiles [t0, t0 + count):
/// its inputs' transforms into v, the 16 products into m (both [16, C,
/// block]), the outputs' inverse transforms into y.
void convolveBlock(const Conv3x3Shape &s, const TileGrid &g, const float *x,
                   const float *u, const float *bias, float *y, int64_t t0,
                   int64_t count, int64_t block, float *v, float *m) {
  int64_t outPlane = s.outH * s.outW;
  transformInputs(s, g, x, t0, count, v, block);
  parallelFor(kElems, 1, [&](int64_t first, int64_t last) {
    for (int64_t e = first; e < last; ++e)
      blasGemm<float>(false, false, s.cout, count, s.cin,
                      u + e * s.cout * s.cin, s.cin, v + e * s.cin * block,
                      block, m + e * s.cout * block, block, false);
  });
  if (gathersTiles(g)) {
    // kLanes tiles a call, each tile's 2 x 2 outputs then put in place.
    std::vector<TilePlace> places = tilePlaces(s, g, s.cout, t0, count);
    parallelFor(s.cout, 1, [&](int64_t first, int64_t last) {
      float y0[2 * kLanes], y1[2 * kLanes];
      for (int64_t k = first; k < last; ++k) {
        float b = bias ? bias[k] : 0.0f;
        for (int64_t at = 0; at < count; at += kLanes) {
          int64_t len = std::min(kLanes, count - at);
          outputTransform(m + k * block + at, s.cout * block, len, y0, y1);
          for (int64_t i = 0; i < len; ++i) {
            const TilePlace &place = places[at + i];
            float *dst = y + place.outBase + k * outPlane;
            for (int r = 0; r < place.rows; ++r) {
              const float *src = (r == 0 ? y0 : y1) + 2 * i;
              for (int c = 0; c < place.cols; ++c)
                dst[r * s.outW + c] = bias ? src[c] + b : src[c];
            }
          }
        }
      }
    });
    return;
  }
  parallelFor(s.cout, 1, [&](int64_t first, int64_t last) {
    // scratch: two output rows of one run of tiles.
    std::vector<float> rows(4 * roundUp(g.tilesW));
    float *y0 = rows.data(), *y1 = rows.data() + 2 * roundUp(g.tilesW);
    for (int64_t k = first; k < last; ++k) {
      float b = bias ? bias[k] : 0.0f;
      forEachRun(
          g, t0, count,
          [&](int64_t n, int64_t ty, int64_t tx, int64_t len, int64_t at) {
            outputTransform(m + k * block + at, s.cout * block, len, y0, y1);
            float *dst = y + (n * s.cout + k) * outPlane;
            int64_t col0 = 2 * tx;
            int64_t cols = std::min(2 * len, s.outW - col0);
            for (int r = 0; r < 2; ++r) {
              int64_t row = 2 * ty + r;
              if (row >= s.outH)
                break;
              const float *src = r == 0 ? y0 : y1;
              float *out = dst + row * s.outW + col0;
              if (bias)
                for (int64_t i = 0; i < cols; ++i)
                  out[i] = src[i] + b;
              else
                std::copy(src, src + cols, out);
            }
          });
    }
  });
}

/// The forward over U [16, cout, cin] (already transformed), a block of
/// tiles at a time. With four blocks or more, the pool's threads take
/// whole blocks (each block's transforms and products stay in the L2 of
/// the core that made them; the loops inside a block then run serially);
/// with fewer, each block's loops are split over the threads. Every tile
/// is computed by the same operations either way, so the output does not
/// depend on the thread count. (CIFAR ResNet-18's first layer at 2
/// threads: 6.3 ms a call split inside the blocks, 4.5 with whole blocks
/// a thread, against 7.8 at 1.)
void convolveTransformed(const Conv3x3Shape &s, const float *x, const float *u,
                         const float *bias, float *y) {
  TileGrid g(s);
  int64_t block = tilesPerBlock(s, int64_t(512) << 10);
  int64_t blocks = (g.total + block - 1) / block;
  auto run = [&](int64_t first, int64_t last) {
    // scratch: one block's transformed inputs and products.
    std::unique_ptr<float[]> v = scratch(kElems * s.cin * block);
    std::unique_ptr<float[]> m = scratch(kElems * s.cout * block);
    for (int64_t b = first; b < last; ++b) {
      int64_t t0 = b * block;
      convolveBlock(s, g, x, u, bias, y, t0, std::min(block, g.total - t0),
                    block, v.get(), m.get());
    }
  };
  constexpr int64_t kMinBlocksAcrossThreads = 4;
  if (blocks >= kMinBlocksAcrossThreads)
    parallelFor(blocks, 1, run);
  else
    run(0, blocks);
}

} // namespace

bool winogradApplies(const window::ConvGeometry &geometry, int64_t batch,
                     bool gradWeight) {
  const window::Window &w = geometry.w;
  const char *env = std::getenv("STRATA_CONV_WINOGRAD");
  if (env && std::string(env) == "0")
    return false;
  if (w.spatial != 2 || geometry.groups != 1 || geometry.cg < 16 ||
      geometry.mg < 16)
    return false;
  for (size_t d = 0; d < 2; ++d)
    if (w.kernel[d] != 3 || w.strides[d] != 1 || w.dilations[d] != 1 ||
        w.padBegin[d] < 0 || w.padBegin[d] > 2 || w.padEnd[d] < 0 ||
        w.padEnd[d] > 2 || w.out[d] < 1)
      return false;
  int64_t tiles = batch * ((w.out[0] + 1) / 2) * ((w.out[1] + 1) / 2);
  if (gradWeight && geometry.cg >= kWideChannels &&
      geometry.mg >= kWideChannels)
    return tiles >= kMinTiles;
  return tiles >= (gradWeight ? kMinTilesGradWeight : kMinTiles);
}

Conv3x3Shape conv3x3Shape(const window::ConvGeometry &geometry, int64_t batch) {
  const window::Window &w = geometry.w;
  Conv3x3Shape s;
  s.batch = batch;
  s.cin = geometry.cg;
  s.cout = geometry.mg;
  s.inH = w.in[0];
  s.inW = w.in[1];
  s.outH = w.out[0];
  s.outW = w.out[1];
  s.padTop = w.padBegin[0];
  s.padLeft = w.padBegin[1];
  return s;
}

void winogradConv3x3(const Conv3x3Shape &s, const float *x, const float *weight,
                     const float *bias, float *y) {
  (void)kernelThreads(); // the pool, and OpenBLAS on one thread, first
  // scratch: the transformed kernels.
  std::unique_ptr<float[]> u = scratch(kElems * s.cout * s.cin);
  transformWeights(weight, s.cout, s.cin, /*flipped=*/false, u.get());
  convolveTransformed(s, x, u.get(), bias, y);
}

void winogradConv3x3GradInput(const Conv3x3Shape &s, const float *dy,
                              const float *weight, float *dx) {
  (void)kernelThreads();
  // dx is the convolution of dy with the flipped kernel, channels swapped,
  // pads 2 - p: output row u reads dy rows u + i - (2 - padTop).
  Conv3x3Shape t;
  t.batch = s.batch;
  t.cin = s.cout;
  t.cout = s.cin;
  t.inH = s.outH;
  t.inW = s.outW;
  t.outH = s.inH;
  t.outW = s.inW;
  t.padTop = 2 - s.padTop;
  t.padLeft = 2 - s.padLeft;
  std::unique_ptr<float[]> u = scratch(kElems * s.cout * s.cin);
  transformWeights(weight, s.cout, s.cin, /*flipped=*/true, u.get());
  convolveTransformed(t, dy, u.get(), nullptr, dx);
}

void winogradConv3x3GradWeight(const Conv3x3Shape &s, const float *dy,
                               const float *x, float *dw) {
  (void)kernelThreads();
  TileGrid g(s);
  if (g.total == 0) {
    std::fill(dw, dw + s.cout * s.cin * 9, 0.0f);
    return;
  }
  int64_t block = tilesPerBlock(s, int64_t(2) << 20);
  // scratch: one block's transformed inputs and output gradients, and the
  // transformed kernel gradient summed over the blocks.
  std::unique_ptr<float[]> v = scratch(kElems * s.cin * block);
  std::unique_ptr<float[]> dm = scratch(kElems * s.cout * block);
  std::unique_ptr<float[]> du = scratch(kElems * s.cout * s.cin);
  int64_t outPlane = s.outH * s.outW;
  for (int64_t t0 = 0; t0 < g.total; t0 += block) {
    int64_t count = std::min(block, g.total - t0);
    transformInputs(s, g, x, t0, count, v.get(), block);
    if (gathersTiles(g)) {
      // kLanes tiles a call: each tile's 2 x 2 of dy (zero past the
      // output's end) staged where gradOutputTransform reads tile i.
      std::vector<TilePlace> places = tilePlaces(s, g, s.cout, t0, count);
      parallelFor(s.cout, 1, [&](int64_t first, int64_t last) {
        float r0[2 * kLanes], r1[2 * kLanes];
        for (int64_t k = first; k < last; ++k)
          for (int64_t at = 0; at < count; at += kLanes) {
            int64_t len = std::min(kLanes, count - at);
            for (int64_t i = 0; i < len; ++i) {
              const TilePlace &place = places[at + i];
              const float *src = dy + place.outBase + k * outPlane;
              for (int r = 0; r < 2; ++r)
                for (int c = 0; c < 2; ++c)
                  (r == 0 ? r0 : r1)[2 * i + c] =
                      r < place.rows && c < place.cols ? src[r * s.outW + c]
                                                       : 0.0f;
            }
            gradOutputTransform(r0, r1, len, dm.get() + k * block + at,
                                s.cout * block);
          }
      });
    } else {
      parallelFor(s.cout, 1, [&](int64_t first, int64_t last) {
        // scratch: two zero-padded rows of dy for one run of tiles.
        std::vector<float> rows(4 * roundUp(g.tilesW));
        float *r0 = rows.data(), *r1 = rows.data() + 2 * roundUp(g.tilesW);
        for (int64_t k = first; k < last; ++k)
          forEachRun(
              g, t0, count,
              [&](int64_t n, int64_t ty, int64_t tx, int64_t len, int64_t at) {
                const float *src = dy + (n * s.cout + k) * outPlane;
                paddedRow(src, s.outH, s.outW, 2 * ty, 2 * tx, 2 * roundUp(len),
                          r0);
                paddedRow(src, s.outH, s.outW, 2 * ty + 1, 2 * tx,
                          2 * roundUp(len), r1);
                gradOutputTransform(r0, r1, len, dm.get() + k * block + at,
                                    s.cout * block);
              });
      });
    }
    parallelFor(kElems, 1, [&](int64_t first, int64_t last) {
      for (int64_t e = first; e < last; ++e)
        blasGemm<float>(false, true, s.cout, s.cin, count,
                        dm.get() + e * s.cout * block, block,
                        v.get() + e * s.cin * block, block,
                        du.get() + e * s.cout * s.cin, s.cin,
                        /*accumulate=*/t0 > 0);
    });
  }
  inverseTransformWeights(du.get(), s.cout, s.cin, dw);
}

} // namespace strata::runtime::cpu
