//===- CublasLtEmulationTest.cpp - The emulated cuBLASLt vs its definition ===//
//
// cublasLtMatmul of the CUDA emulation against a naive product written from
// cuBLASLt's documented semantics: column-major layouts, transposes, leading
// dimensions larger than the rows, strided and broadcast batches, alpha and
// beta, the bias epilogue, bf16 / fp16 factors with f32 compute, f64 and
// TF32; and the statuses of inconsistent, unsupported and misaligned
// problems. Operands hold small integers (and the scalars powers of two), so
// every f32 and f64 sum is exact and the results are compared bit for bit;
// only the rounding to bf16 / fp16 results rounds.
//
// Every product destroys its descriptors and overwrites alpha and beta
// before drain() runs the stream: the emulation must have copied them.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/NarrowFloat.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using strata::runtime::bf16Bits;
using strata::runtime::fp16Bits;
using strata::runtime::fromBf16Bits;
using strata::runtime::fromFp16Bits;

/// Runs the work enqueued on the streams so far (the emulation runs it
/// lazily, at a synchronizing call).
void drain() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }

size_t bytesOf(cudaDataType type) {
  switch (type) {
  case CUDA_R_64F: return 8;
  case CUDA_R_16BF:
  case CUDA_R_16F: return 2;
  default: return 4;
  }
}

/// `v` rounded to the nearest value of `type`, as a double.
double roundTo(cudaDataType type, double v) {
  switch (type) {
  case CUDA_R_64F: return v;
  case CUDA_R_16BF: return fromBf16Bits(bf16Bits(float(v)));
  case CUDA_R_16F: return fromFp16Bits(fp16Bits(float(v)));
  default: return float(v);
  }
}

constexpr std::byte kPadding{0x5a};

/// A column-major rows x cols matrix of `type` with leading dimension `ld`,
/// or `batch` of them `stride` elements apart (0: one matrix shared by every
/// batch index), in a 256-byte aligned host buffer whose other bytes hold
/// kPadding.
class Matrix {
public:
  Matrix(cudaDataType type, int64_t rows, int64_t cols, int64_t ld = -1,
         int32_t batch = 1, int64_t stride = 0)
      : type(type), rows(rows), cols(cols), ld(ld < 0 ? rows : ld),
        batch(batch), stride(stride) {
    int64_t elements = stride * (batch - 1) + this->ld * cols;
    bytes.assign(size_t(elements) * bytesOf(type) + 256, kPadding);
  }
  Matrix(const Matrix &) = delete;
  Matrix &operator=(const Matrix &) = delete;

  std::byte *data() {
    size_t misalignment = reinterpret_cast<uintptr_t>(bytes.data()) % 256;
    return bytes.data() + (misalignment ? 256 - misalignment : 0);
  }
  const std::byte *data() const { return const_cast<Matrix *>(this)->data(); }

  double get(int64_t b, int64_t r, int64_t c) const {
    const std::byte *p = at(b, r, c);
    switch (type) {
    case CUDA_R_64F: return load<double>(p);
    case CUDA_R_16BF: return fromBf16Bits(load<uint16_t>(p));
    case CUDA_R_16F: return fromFp16Bits(load<uint16_t>(p));
    default: return load<float>(p);
    }
  }

  /// Stores `v`, which `type` must hold exactly.
  void set(int64_t b, int64_t r, int64_t c, double v) {
    ASSERT_EQ(roundTo(type, v), v);
    std::byte *p = const_cast<std::byte *>(at(b, r, c));
    switch (type) {
    case CUDA_R_64F: return store(p, v);
    case CUDA_R_16BF: return store(p, bf16Bits(float(v)));
    case CUDA_R_16F: return store(p, fp16Bits(float(v)));
    default: return store(p, float(v));
    }
  }

  /// Every element of every batch matrix: an integer in [-8, 8].
  void fill(std::mt19937 &rng) {
    std::uniform_int_distribution<int> value(-8, 8);
    for (int32_t b = 0; b < batch; ++b)
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r)
          set(b, r, c, value(rng));
  }

  /// Whether the bytes outside the matrices still hold kPadding.
  bool paddingUntouched() const {
    std::vector<bool> inside(bytes.size(), false);
    size_t offset = size_t(data() - bytes.data());
    for (int32_t b = 0; b < batch; ++b)
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < rows; ++r)
          for (size_t i = 0; i < bytesOf(type); ++i)
            inside[size_t(at(b, r, c) - data()) + offset + i] = true;
    for (size_t i = 0; i < bytes.size(); ++i)
      if (!inside[i] && bytes[i] != kPadding)
        return false;
    return true;
  }

  /// The largest power of two, at most 256, dividing the address of every
  /// batch matrix (what the preference tells the heuristic).
  uint32_t alignment() const {
    uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(data())) | 256;
    if (batch != 1)
      bits |= uint64_t(stride) * bytesOf(type);
    return uint32_t(bits & (~bits + 1));
  }

  /// A new layout of this matrix (the caller destroys it).
  cublasLtMatrixLayout_t layout() const {
    cublasLtMatrixLayout_t l = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows),
                                         uint64_t(cols), ld),
              CUBLAS_STATUS_SUCCESS);
    if (batch != 1) {
      EXPECT_EQ(
          cublasLtMatrixLayoutSetAttribute(
              l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
          CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(
                    l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                    sizeof(stride)),
                CUBLAS_STATUS_SUCCESS);
    }
    return l;
  }

  const cudaDataType type;
  const int64_t rows, cols, ld;
  const int32_t batch;
  const int64_t stride;

private:
  const std::byte *at(int64_t b, int64_t r, int64_t c) const {
    return data() + (b * stride + r + c * ld) * int64_t(bytesOf(type));
  }
  template <typename T> static T load(const std::byte *p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
  template <typename T> static void store(std::byte *p, T v) {
    std::memcpy(p, &v, sizeof(T));
  }

  std::vector<std::byte> bytes;
};

/// The operation, apart from its matrices.
struct Gemm {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scaleType = CUDA_R_32F;
  bool transA = false, transB = false;
  double alpha = 1, beta = 0;
  /// The BIAS epilogue's vector (rows x 1), if any.
  const Matrix *bias = nullptr;
  /// CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, when set.
  bool setBiasType = false;
};

/// alpha or beta, in both scale types.
struct Scalar {
  explicit Scalar(double v) : f32(float(v)), f64(v) {}
  const void *as(cudaDataType_t scaleType) const {
    return scaleType == CUDA_R_64F ? static_cast<const void *>(&f64)
                                   : static_cast<const void *>(&f32);
  }
  /// Gives both copies a value no product should see.
  void scribble() {
    f32 = std::numeric_limits<float>::quiet_NaN();
    f64 = std::numeric_limits<double>::quiet_NaN();
  }
  float f32;
  double f64;
};

/// The descriptors of a product, destroyed with this object; the
/// preference holds the matrices' alignments.
struct Descriptors {
  Descriptors(const Gemm &g, const Matrix &a, const Matrix &b, const Matrix &c,
              const Matrix &d)
      : layoutA(a.layout()), layoutB(b.layout()), layoutC(c.layout()),
        layoutD(d.layout()) {
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, g.compute, g.scaleType),
              CUBLAS_STATUS_SUCCESS);
    int32_t transA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    int32_t transB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                             &transA, sizeof(transA)),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                             &transB, sizeof(transB)),
              CUBLAS_STATUS_SUCCESS);
    if (g.bias) {
      uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const void *pointer = g.bias->data();
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc,
                                               CUBLASLT_MATMUL_DESC_EPILOGUE,
                                               &epilogue, sizeof(epilogue)),
                CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(
                    desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer,
                    sizeof(pointer)),
                CUBLAS_STATUS_SUCCESS);
      if (g.setBiasType) {
        int32_t type = g.bias->type;
        EXPECT_EQ(
            cublasLtMatmulDescSetAttribute(
                desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type, sizeof(type)),
            CUBLAS_STATUS_SUCCESS);
      }
    }
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t>
        alignments[] = {
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a.alignment()},
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b.alignment()},
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, c.alignment()},
            {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, d.alignment()}};
    for (const auto &[attr, value] : alignments)
      EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value,
                                                     sizeof(value)),
                CUBLAS_STATUS_SUCCESS);
  }
  Descriptors(const Descriptors &) = delete;
  Descriptors &operator=(const Descriptors &) = delete;
  ~Descriptors() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {layoutA, layoutB, layoutC, layoutD})
      cublasLtMatrixLayoutDestroy(l);
  }

  /// cublasLtMatmulAlgoGetHeuristic for these descriptors.
  cublasStatus_t heuristic(cublasLtHandle_t handle,
                           cublasLtMatmulHeuristicResult_t &result,
                           int &returned) const {
    return cublasLtMatmulAlgoGetHeuristic(handle, desc, layoutA, layoutB,
                                          layoutC, layoutD, pref, 1, &result,
                                          &returned);
  }

  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layoutA, layoutB, layoutC, layoutD;
  cublasLtMatmulPreference_t pref = nullptr;
};

/// What the heuristic and the product returned.
struct Statuses {
  cublasStatus_t heuristic;
  cublasStatus_t matmul;
};

class CublasLtEmulationTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override { cublasLtDestroy(handle); }

  /// Asks the heuristic for an algorithm and runs D = alpha op(A) op(B) +
  /// beta C (+ bias) with it (with none when the heuristic fails), then
  /// destroys the descriptors, scribbles over alpha and beta, and drains.
  Statuses run(const Gemm &g, const Matrix &a, const Matrix &b, const Matrix &c,
               Matrix &d) {
    Statuses statuses;
    Scalar alpha(g.alpha), beta(g.beta);
    {
      Descriptors descs(g, a, b, c, d);
      cublasLtMatmulHeuristicResult_t result{};
      int returned = 0;
      statuses.heuristic = descs.heuristic(handle, result, returned);
      bool found = statuses.heuristic == CUBLAS_STATUS_SUCCESS;
      statuses.matmul = cublasLtMatmul(
          handle, descs.desc, alpha.as(g.scaleType), a.data(), descs.layoutA,
          b.data(), descs.layoutB, beta.as(g.scaleType), c.data(),
          descs.layoutC, d.data(), descs.layoutD,
          found ? &result.algo : nullptr, nullptr, 0, nullptr);
    }
    alpha.scribble();
    beta.scribble();
    drain();
    return statuses;
  }

  /// Runs the product and checks D against the naive one, element for
  /// element, with D's padding untouched. `c` may be `d` (in place).
  void expectProduct(const Gemm &g, const Matrix &a, const Matrix &b,
                     const Matrix &c, Matrix &d) {
    std::vector<double> expected = reference(g, a, b, c, d);
    Statuses statuses = run(g, a, b, c, d);
    ASSERT_EQ(statuses.heuristic, CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(statuses.matmul, CUBLAS_STATUS_SUCCESS);
    size_t index = 0;
    for (int32_t batch = 0; batch < d.batch; ++batch)
      for (int64_t j = 0; j < d.cols; ++j)
        for (int64_t i = 0; i < d.rows; ++i)
          EXPECT_EQ(d.get(batch, i, j), expected[index++])
              << "batch " << batch << ", row " << i << ", column " << j;
    EXPECT_TRUE(d.paddingUntouched());
  }

  /// The product from its definition, batch by batch, column by column:
  /// op(A)(i, l) = A(l, i) when transposed, a sum in k order in the compute
  /// type, then scaled, C and the bias added, and rounded once to D's type.
  static std::vector<double> reference(const Gemm &g, const Matrix &a,
                                       const Matrix &b, const Matrix &c,
                                       const Matrix &d) {
    if (g.compute == CUBLAS_COMPUTE_64F)
      return referenceIn<double>(g, a, b, c, d);
    return referenceIn<float>(g, a, b, c, d);
  }

  template <typename Acc>
  static std::vector<double> referenceIn(const Gemm &g, const Matrix &a,
                                         const Matrix &b, const Matrix &c,
                                         const Matrix &d) {
    std::vector<double> out;
    int64_t k = g.transA ? a.rows : a.cols;
    for (int32_t batch = 0; batch < d.batch; ++batch)
      for (int64_t j = 0; j < d.cols; ++j)
        for (int64_t i = 0; i < d.rows; ++i) {
          Acc sum = 0;
          for (int64_t l = 0; l < k; ++l) {
            Acc x = Acc(g.transA ? a.get(batch, l, i) : a.get(batch, i, l));
            Acc y = Acc(g.transB ? b.get(batch, j, l) : b.get(batch, l, j));
            sum += x * y;
          }
          Acc v = Acc(g.alpha) * sum;
          if (g.beta != 0)
            v += Acc(g.beta) * Acc(c.get(batch, i, j));
          if (g.bias)
            v += Acc(g.bias->get(0, i, 0));
          out.push_back(roundTo(d.type, v));
        }
    return out;
  }

  cublasLtHandle_t handle = nullptr;
  std::mt19937 rng{20240611};
};

TEST_F(CublasLtEmulationTest, NoTranspose) {
  Matrix a(CUDA_R_32F, 3, 5), b(CUDA_R_32F, 5, 4), d(CUDA_R_32F, 3, 4);
  a.fill(rng);
  b.fill(rng);
  expectProduct(Gemm{}, a, b, d, d);
}

TEST_F(CublasLtEmulationTest, EachTranspose) {
  const int64_t m = 3, n = 4, k = 5;
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      SCOPED_TRACE(std::string("transA ") + (transA ? "T" : "N") + ", transB " +
                   (transB ? "T" : "N"));
      Matrix a(CUDA_R_32F, transA ? k : m, transA ? m : k);
      Matrix b(CUDA_R_32F, transB ? n : k, transB ? k : n);
      Matrix d(CUDA_R_32F, m, n);
      a.fill(rng);
      b.fill(rng);
      Gemm g;
      g.transA = transA;
      g.transB = transB;
      expectProduct(g, a, b, d, d);
    }
}

TEST_F(CublasLtEmulationTest, LeadingDimensionsLargerThanRows) {
  // op(A) = A^T (4 x 6), op(B) = B (6 x 3); C and D apart, with alpha and
  // beta.
  Matrix a(CUDA_R_32F, 6, 4, /*ld=*/9), b(CUDA_R_32F, 6, 3, /*ld=*/7);
  Matrix c(CUDA_R_32F, 4, 3, /*ld=*/5), d(CUDA_R_32F, 4, 3, /*ld=*/6);
  a.fill(rng);
  b.fill(rng);
  c.fill(rng);
  Gemm g;
  g.transA = true;
  g.alpha = 0.5;
  g.beta = -2;
  expectProduct(g, a, b, c, d);
}

TEST_F(CublasLtEmulationTest, StridedBatches) {
  // Three batch matrices: A's apart by more than one matrix, one B shared
  // by all (stride 0), C and D apart.
  const int32_t batch = 3;
  Matrix a(CUDA_R_32F, 4, 5, /*ld=*/5, batch, /*stride=*/5 * 5 + 3);
  Matrix b(CUDA_R_32F, 2, 5, /*ld=*/2, batch, /*stride=*/0);
  Matrix c(CUDA_R_32F, 4, 2, /*ld=*/4, batch, /*stride=*/8);
  Matrix d(CUDA_R_32F, 4, 2, /*ld=*/6, batch, /*stride=*/6 * 2 + 1);
  a.fill(rng);
  b.fill(rng);
  c.fill(rng);
  Gemm g;
  g.transB = true;
  g.beta = 1;
  expectProduct(g, a, b, c, d);
}

TEST_F(CublasLtEmulationTest, BiasEpilogue) {
  // The bias has D's type unless said otherwise, one element per row of D.
  Matrix a(CUDA_R_32F, 4, 2), b(CUDA_R_32F, 2, 3), c(CUDA_R_32F, 4, 3);
  Matrix d(CUDA_R_32F, 4, 3), bias(CUDA_R_32F, 4, 1);
  a.fill(rng);
  b.fill(rng);
  c.fill(rng);
  bias.fill(rng);
  Gemm g;
  g.alpha = 2;
  g.beta = 0.25;
  g.bias = &bias;
  expectProduct(g, a, b, c, d);
}

TEST_F(CublasLtEmulationTest, Bf16FactorsF32ComputeBf16Result) {
  // Sums of 64 products of [-8, 8] are mostly beyond 256, where bf16's 8
  // significant bits no longer hold every integer: many round.
  Matrix a(CUDA_R_16BF, 6, 64), b(CUDA_R_16BF, 5, 64, /*ld=*/7);
  Matrix d(CUDA_R_16BF, 6, 5), bias(CUDA_R_16BF, 6, 1);
  a.fill(rng);
  b.fill(rng);
  bias.fill(rng);
  Gemm g;
  g.transB = true;
  g.bias = &bias;
  g.setBiasType = true;
  expectProduct(g, a, b, d, d);
}

TEST_F(CublasLtEmulationTest, BiasIsAddedBeforeTheOneRounding) {
  // 16 * 16 + 1 * 1 = 257 is a tie between the bf16 values 256 and 258:
  // with the bias 1 the sum is 258 exactly, where rounding the product
  // first (256) and then the sum (257, a tie again) gives 256.
  Matrix a(CUDA_R_16BF, 1, 2), b(CUDA_R_16BF, 2, 1), d(CUDA_R_16BF, 1, 1);
  Matrix bias(CUDA_R_16BF, 1, 1);
  a.set(0, 0, 0, 16);
  a.set(0, 0, 1, 1);
  b.set(0, 0, 0, 16);
  b.set(0, 1, 0, 1);
  bias.set(0, 0, 0, 1);
  Gemm g;
  g.bias = &bias;
  ASSERT_EQ(run(g, a, b, d, d).matmul, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.get(0, 0, 0), 258.0);
}

TEST_F(CublasLtEmulationTest, Fp16FactorsF32Result) {
  Matrix a(CUDA_R_16F, 7, 3), b(CUDA_R_16F, 7, 2), d(CUDA_R_32F, 3, 2);
  a.fill(rng);
  b.fill(rng);
  Gemm g;
  g.transA = true;
  expectProduct(g, a, b, d, d);
}

TEST_F(CublasLtEmulationTest, F64) {
  Matrix a(CUDA_R_64F, 4, 6, /*ld=*/5), b(CUDA_R_64F, 6, 3);
  Matrix c(CUDA_R_64F, 4, 3), d(CUDA_R_64F, 4, 3), bias(CUDA_R_64F, 4, 1);
  a.fill(rng);
  b.fill(rng);
  c.fill(rng);
  bias.fill(rng);
  Gemm g;
  g.compute = CUBLAS_COMPUTE_64F;
  g.scaleType = CUDA_R_64F;
  g.alpha = 0.25;
  g.beta = -1.5;
  g.bias = &bias;
  expectProduct(g, a, b, c, d);
}

TEST_F(CublasLtEmulationTest, F64AccumulatesInDouble) {
  // 2^30 + 1 - 2^30: 1 in f64, 0 in f32 (2^30 + 1 rounds to 2^30).
  Matrix a(CUDA_R_64F, 1, 3), b(CUDA_R_64F, 3, 1), d(CUDA_R_64F, 1, 1);
  a.set(0, 0, 0, std::ldexp(1.0, 30));
  a.set(0, 0, 1, 1);
  a.set(0, 0, 2, -std::ldexp(1.0, 30));
  for (int64_t l = 0; l < 3; ++l)
    b.set(0, l, 0, 1);
  Gemm g;
  g.compute = CUBLAS_COMPUTE_64F;
  g.scaleType = CUDA_R_64F;
  ASSERT_EQ(run(g, a, b, d, d).matmul, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.get(0, 0, 0), 1.0);
}

TEST_F(CublasLtEmulationTest, Tf32ComputesInF32) {
  // 1 + 2^-20 is not a TF32 value (10 fraction bits): the emulation keeps it.
  Matrix a(CUDA_R_32F, 1, 1), b(CUDA_R_32F, 1, 1), d(CUDA_R_32F, 1, 1);
  a.set(0, 0, 0, 1 + std::ldexp(1.0, -20));
  b.set(0, 0, 0, 1);
  Gemm g;
  g.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  ASSERT_EQ(run(g, a, b, d, d).matmul, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.get(0, 0, 0), 1 + std::ldexp(1.0, -20));
}

TEST_F(CublasLtEmulationTest, InconsistentShapesAreInvalid) {
  auto expectInvalid = [&](const char *what, const Gemm &g, const Matrix &a,
                           const Matrix &b, const Matrix &c, Matrix &d) {
    SCOPED_TRACE(what);
    Statuses statuses = run(g, a, b, c, d);
    EXPECT_EQ(statuses.heuristic, CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(statuses.matmul, CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_TRUE(d.paddingUntouched());
  };
  Gemm plain, transA;
  transA.transA = true;
  Matrix a34(CUDA_R_32F, 3, 4), b42(CUDA_R_32F, 4, 2), b52(CUDA_R_32F, 5, 2);
  Matrix d32(CUDA_R_32F, 3, 2), d42(CUDA_R_32F, 4, 2), d33(CUDA_R_32F, 3, 3);
  Matrix c22(CUDA_R_32F, 2, 2);
  expectInvalid("op(A) 3 x 4, op(B) 5 x 2", plain, a34, b52, d32, d32);
  expectInvalid("op(A) 3 x 4, D 4 x 2", plain, a34, b42, d42, d42);
  expectInvalid("op(B) 4 x 2, D 3 x 3", plain, a34, b42, d33, d33);
  expectInvalid("op(A) = A^T 4 x 3, op(B) 4 x 2", transA, a34, b42, d42, d42);
  expectInvalid("C 2 x 2, D 3 x 2", plain, a34, b42, c22, d32);

  Matrix aLd(CUDA_R_32F, 3, 4, /*ld=*/2);
  expectInvalid("lda 2 < 3 rows", plain, aLd, b42, d32, d32);

  Matrix aBatch(CUDA_R_32F, 3, 4, 3, /*batch=*/2, /*stride=*/12);
  Matrix dBatch(CUDA_R_32F, 3, 2, 3, /*batch=*/2, /*stride=*/6);
  expectInvalid("A batch 2, B and D batch 1", plain, aBatch, b42, d32, d32);
  Matrix bBatch(CUDA_R_32F, 4, 2, 4, /*batch=*/2, /*stride=*/0);
  Matrix dShared(CUDA_R_32F, 3, 2, 3, /*batch=*/2, /*stride=*/0);
  expectInvalid("D's batch matrices overlap", plain, aBatch, bBatch, dShared,
                dShared);

  // In place, C must be D's layout.
  Matrix dWide(CUDA_R_32F, 3, 2, /*ld=*/4);
  Descriptors descs(plain, a34, b42, d32, dWide);
  float one = 1, zero = 0;
  EXPECT_EQ(cublasLtMatmul(handle, descs.desc, &one, a34.data(), descs.layoutA,
                           b42.data(), descs.layoutB, &zero, dWide.data(),
                           descs.layoutC, dWide.data(), descs.layoutD, nullptr,
                           nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
}

TEST_F(CublasLtEmulationTest, UnsupportedTypesAreNotSupported) {
  auto expectNotSupported = [&](const char *what, const Gemm &g,
                                const Matrix &a, const Matrix &b, Matrix &d) {
    SCOPED_TRACE(what);
    Statuses statuses = run(g, a, b, d, d);
    EXPECT_EQ(statuses.heuristic, CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(statuses.matmul, CUBLAS_STATUS_NOT_SUPPORTED);
  };
  Matrix a64(CUDA_R_64F, 2, 2), b64(CUDA_R_64F, 2, 2), d64(CUDA_R_64F, 2, 2);
  Matrix a16(CUDA_R_16BF, 2, 2), b32(CUDA_R_32F, 2, 2), d32(CUDA_R_32F, 2, 2);
  Matrix b16(CUDA_R_16BF, 2, 2), d16(CUDA_R_16BF, 2, 2), dh(CUDA_R_16F, 2, 2);
  Gemm f32;
  expectNotSupported("f64 with CUBLAS_COMPUTE_32F", f32, a64, b64, d64);
  expectNotSupported("bf16 times f32", f32, a16, b32, d32);
  expectNotSupported("bf16 factors, fp16 result", f32, a16, b16, dh);
  Gemm tf32;
  tf32.compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  expectNotSupported("bf16 with TF32", tf32, a16, b16, d16);
  Gemm mixedScale;
  mixedScale.compute = CUBLAS_COMPUTE_64F;
  expectNotSupported("CUBLAS_COMPUTE_64F, f32 scale", mixedScale, a64, b64,
                     d64);
  Matrix bias32(CUDA_R_32F, 2, 1);
  Gemm f32Bias;
  f32Bias.bias = &bias32;
  f32Bias.setBiasType = true;
  expectNotSupported("f32 bias, bf16 result", f32Bias, a16, b16, d16);
}

TEST_F(CublasLtEmulationTest, MissingOperandsAreInvalid) {
  Matrix a(CUDA_R_32F, 2, 3), b(CUDA_R_32F, 3, 2), d(CUDA_R_32F, 2, 2);
  Matrix bias(CUDA_R_32F, 2, 1);
  Gemm g;
  g.bias = &bias;
  Descriptors descs(g, a, b, d, d);
  float one = 1, zero = 0;
  auto matmul = [&](cublasLtHandle_t h, const void *pa, const void *pb,
                    const void *beta, const void *pc) {
    return cublasLtMatmul(h, descs.desc, &one, pa, descs.layoutA, pb,
                          descs.layoutB, beta, pc, descs.layoutC, d.data(),
                          descs.layoutD, nullptr, nullptr, 0, nullptr);
  };
  EXPECT_EQ(matmul(nullptr, a.data(), b.data(), &zero, d.data()),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(matmul(handle, a.data(), nullptr, &zero, d.data()),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(matmul(handle, a.data(), b.data(), nullptr, d.data()),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(matmul(handle, a.data(), b.data(), &one, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  // beta == 0: C is not read.
  EXPECT_EQ(matmul(handle, a.data(), b.data(), &zero, nullptr),
            CUBLAS_STATUS_SUCCESS);
  const void *noBias = nullptr;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(descs.desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                           &noBias, sizeof(noBias)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(handle, a.data(), b.data(), &zero, d.data()),
            CUBLAS_STATUS_INVALID_VALUE);
  drain();
}

TEST_F(CublasLtEmulationTest, AttributesTakeTheirExactSize) {
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  int64_t wide = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &wide, sizeof(wide)),
            CUBLAS_STATUS_INVALID_VALUE);
  int32_t trans = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                           nullptr, sizeof(trans)),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(
                desc, cublasLtMatmulDescAttributes_t(1), &trans, sizeof(trans)),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulDescDestroy(desc);

  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 2, 2, 2),
            CUBLAS_STATUS_SUCCESS);
  int32_t narrowStride = 4;
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(
                layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                &narrowStride, sizeof(narrowStride)),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(
                layout, cublasLtMatrixLayoutAttribute_t(1), &narrowStride,
                sizeof(narrowStride)),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatrixLayoutDestroy(layout);

  cublasLtMatmulPreference_t pref = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
  uint64_t workspace = 1 << 20;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                sizeof(workspace)),
            CUBLAS_STATUS_SUCCESS);
  uint64_t wideAlignment = 16;
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                &wideAlignment, sizeof(wideAlignment)),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulPreferenceDestroy(pref);
}

TEST_F(CublasLtEmulationTest, HeuristicReturnsOneAlgorithm) {
  Matrix a(CUDA_R_16BF, 8, 8), b(CUDA_R_16BF, 8, 8), d(CUDA_R_32F, 8, 8);
  Descriptors descs(Gemm{}, a, b, d, d);
  cublasLtMatmulHeuristicResult_t results[4] = {};
  int returned = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(
                handle, descs.desc, descs.layoutA, descs.layoutB, descs.layoutC,
                descs.layoutD, descs.pref, 4, results, &returned),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(returned, 1);
  EXPECT_EQ(results[0].state, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(results[0].workspaceSize, 0u);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(
                handle, descs.desc, descs.layoutA, descs.layoutB, descs.layoutC,
                descs.layoutD, descs.pref, 0, results, &returned),
            CUBLAS_STATUS_INVALID_VALUE);
}

TEST_F(CublasLtEmulationTest, OperandsLessAlignedThanTheAlgorithmAreInvalid) {
  // The heuristic was promised 256-byte aligned operands and bias: A 4
  // bytes further, or the bias, breaks that promise; without an algorithm
  // any alignment runs.
  Matrix a(CUDA_R_32F, 2, 3, /*ld=*/3), b(CUDA_R_32F, 3, 2);
  Matrix d(CUDA_R_32F, 2, 2), bias(CUDA_R_32F, 2, 1);
  Gemm g;
  g.bias = &bias;
  Descriptors descs(g, a, b, d, d);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  ASSERT_EQ(descs.heuristic(handle, result, returned), CUBLAS_STATUS_SUCCESS);
  float one = 1, zero = 0;
  auto matmul = [&](const std::byte *pa, const cublasLtMatmulAlgo_t *algo) {
    return cublasLtMatmul(handle, descs.desc, &one, pa, descs.layoutA, b.data(),
                          descs.layoutB, &zero, d.data(), descs.layoutD,
                          d.data(), descs.layoutD, algo, nullptr, 0, nullptr);
  };
  EXPECT_EQ(matmul(a.data(), &result.algo), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(a.data() + 4, &result.algo), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(matmul(a.data() + 4, nullptr), CUBLAS_STATUS_SUCCESS);
  const void *shifted = bias.data() + 4;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(descs.desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                           &shifted, sizeof(shifted)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(a.data(), &result.algo), CUBLAS_STATUS_INVALID_VALUE);
  cublasLtMatmulAlgo_t unknown{};
  EXPECT_EQ(matmul(a.data(), &unknown), CUBLAS_STATUS_INVALID_VALUE);
  drain();
}

TEST_F(CublasLtEmulationTest, DescriptorsAreReadAtTheCall) {
  // One descriptor, its bias pointer changed between two products that have
  // not run yet: each adds the bias it was called with.
  Matrix a(CUDA_R_32F, 2, 1), b(CUDA_R_32F, 1, 1), d1(CUDA_R_32F, 2, 1);
  Matrix d2(CUDA_R_32F, 2, 1), bias1(CUDA_R_32F, 2, 1), bias2(CUDA_R_32F, 2, 1);
  a.fill(rng);
  b.fill(rng);
  bias1.fill(rng);
  bias2.fill(rng);
  Gemm g;
  g.bias = &bias1;
  Descriptors descs(g, a, b, d1, d1);
  float one = 1, zero = 0;
  auto matmul = [&](Matrix &d) {
    return cublasLtMatmul(handle, descs.desc, &one, a.data(), descs.layoutA,
                          b.data(), descs.layoutB, &zero, d.data(),
                          descs.layoutC, d.data(), descs.layoutD, nullptr,
                          nullptr, 0, nullptr);
  };
  ASSERT_EQ(matmul(d1), CUBLAS_STATUS_SUCCESS);
  const void *second = bias2.data();
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(descs.desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                           &second, sizeof(second)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(matmul(d2), CUBLAS_STATUS_SUCCESS);
  drain();
  for (int64_t i = 0; i < 2; ++i) {
    double product = float(a.get(0, i, 0)) * float(b.get(0, 0, 0));
    EXPECT_EQ(d1.get(0, i, 0), product + bias1.get(0, i, 0));
    EXPECT_EQ(d2.get(0, i, 0), product + bias2.get(0, i, 0));
  }
}

TEST_F(CublasLtEmulationTest, StatusNames) {
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_SUCCESS),
               "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_INVALID_VALUE),
               "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED),
               "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_STRNE(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED), "");
}

} // namespace
