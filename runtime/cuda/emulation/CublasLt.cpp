//===- CublasLt.cpp - cuBLASLt's matmul as a host loop --------------------===//
//
// Part of Strata's CUDA emulation (see Emulation.h). Descriptors are heap
// structs of their attributes. cublasLtMatmul checks the problem as
// cuBLASLt documents it: column-major layouts, op(A) m x k, op(B) k x n, C
// and D m x n, equal batch counts (a stride of 0 broadcasts an operand),
// leading dimensions of at least the rows, the type combinations of the
// compute types below. It returns a violation at once and enqueues the
// product, every descriptor value and alpha / beta copied, on the stream.
//
// The product accumulates in the compute type in k order, scales by alpha
// and beta in the scale type, adds the bias epilogue and rounds once to D's
// type. CUBLAS_COMPUTE_32F_FAST_TF32 computes in f32: a GPU rounds the
// factors to TF32 first, so its results may differ from these in the last
// bits, never the other way.
//
// Two checks are stricter than the toolkit's documentation, for what a GPU
// gets wrong silently: batches of D that overlap (its threads would race)
// are invalid, and an algorithm remembers the alignments its heuristic was
// promised (the preference's minimums, the bias pointer's), so a product
// whose operands are less aligned than that is invalid.
//
//===----------------------------------------------------------------------===//

#include "Emulation.h"

#include "strata/Runtime/NarrowFloat.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

struct cublasLtContext {};

struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t computeType;
  cudaDataType_t scaleType;
  int32_t transA = CUBLAS_OP_N;
  int32_t transB = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  /// -1: D's type.
  int32_t biasType = -1;
};

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType type;
  uint64_t rows;
  uint64_t cols;
  int64_t ld;
  int32_t batchCount = 1;
  int64_t batchStride = 0;
};

struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t maxWorkspaceBytes = 0;
  /// The minimum alignments of A, B, C and D, in bytes.
  uint32_t minAlignment[4] = {256, 256, 256, 256};
};

namespace {

using Desc = cublasLtMatmulDescOpaque_t;
using Layout = cublasLtMatrixLayoutOpaque_t;

/// cublasLtMatmulAlgo_t::data[0] of an algorithm the heuristic returned;
/// data[1..4] hold the alignments of A, B, C and D it assumes, data[5] the
/// bias pointer's.
constexpr uint64_t kAlgoMagic = 0x5354524154414c47; // "STRATALG"

/// A product's shape and the types it runs in, once the descriptors are
/// found consistent.
struct Problem {
  Desc desc;
  Layout a, b, c, d;
  int64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  cudaDataType biasType = CUDA_R_32F;
};

/// A checked problem with its operands: what the stream runs.
struct Product {
  Problem problem;
  double alpha = 0, beta = 0;
  const std::byte *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr;
  std::byte *d = nullptr;
};

/// Copies `buf` into `field` when it is exactly the attribute's size.
template <typename T>
cublasStatus_t setField(T &field, const void *buf, size_t sizeInBytes) {
  if (!buf || sizeInBytes != sizeof(T))
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

size_t elementBytes(cudaDataType type) {
  switch (type) {
  case CUDA_R_64F: return 8;
  case CUDA_R_16BF:
  case CUDA_R_16F: return 2;
  default: return 4;
  }
}

bool isNarrow(cudaDataType type) {
  return type == CUDA_R_16BF || type == CUDA_R_16F;
}

/// The element types cuBLASLt runs each compute type on: everything f64;
/// everything f32 (TF32 too); or, for CUBLAS_COMPUTE_32F, bf16 / fp16
/// factors with a result of their type or f32. C and D, and a bias epilogue's
/// vector and D, always agree.
bool supportedTypes(const Problem &p) {
  if (p.a.type != p.b.type || p.c.type != p.d.type ||
      (p.desc.epilogue == CUBLASLT_EPILOGUE_BIAS && p.biasType != p.d.type))
    return false;
  switch (p.desc.computeType) {
  case CUBLAS_COMPUTE_64F:
    return p.desc.scaleType == CUDA_R_64F && p.a.type == CUDA_R_64F &&
           p.d.type == CUDA_R_64F;
  case CUBLAS_COMPUTE_32F_FAST_TF32:
    return p.desc.scaleType == CUDA_R_32F && p.a.type == CUDA_R_32F &&
           p.d.type == CUDA_R_32F;
  case CUBLAS_COMPUTE_32F:
    return p.desc.scaleType == CUDA_R_32F &&
           (p.a.type == CUDA_R_32F || isNarrow(p.a.type)) &&
           (p.d.type == p.a.type || p.d.type == CUDA_R_32F);
  default: return false;
  }
}

bool validLayout(const Layout &l) {
  return l.rows <= uint64_t(INT64_MAX) && l.cols <= uint64_t(INT64_MAX) &&
         l.ld >= std::max<int64_t>(int64_t(l.rows), 1) && l.batchCount >= 1;
}

/// Elements from a matrix's first to its last, plus one.
int64_t span(const Layout &l) {
  if (l.rows == 0 || l.cols == 0)
    return 0;
  return l.ld * (int64_t(l.cols) - 1) + int64_t(l.rows);
}

/// Checks the descriptors against each other, as both the heuristic and the
/// product do: INVALID_VALUE for an inconsistent problem, NOT_SUPPORTED for
/// one cuBLASLt has no algorithm for.
cublasStatus_t checkProblem(const Desc &desc, const Layout &a, const Layout &b,
                            const Layout &c, const Layout &d, Problem &p) {
  p = Problem{desc, a, b, c, d};
  if (!validLayout(a) || !validLayout(b) || !validLayout(c) || !validLayout(d))
    return CUBLAS_STATUS_INVALID_VALUE;
  for (int32_t trans : {desc.transA, desc.transB})
    if (trans != CUBLAS_OP_N && trans != CUBLAS_OP_T)
      return CUBLAS_STATUS_INVALID_VALUE;
  bool transA = desc.transA == CUBLAS_OP_T;
  bool transB = desc.transB == CUBLAS_OP_T;
  p.m = int64_t(d.rows);
  p.n = int64_t(d.cols);
  p.k = int64_t(transA ? a.rows : a.cols);
  if (int64_t(transA ? a.cols : a.rows) != p.m ||
      int64_t(transB ? b.cols : b.rows) != p.k ||
      int64_t(transB ? b.rows : b.cols) != p.n || c.rows != d.rows ||
      c.cols != d.cols)
    return CUBLAS_STATUS_INVALID_VALUE;
  p.batch = d.batchCount;
  if (a.batchCount != p.batch || b.batchCount != p.batch ||
      c.batchCount != p.batch)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (p.batch > 1 && std::abs(d.batchStride) < span(d))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
      desc.epilogue != CUBLASLT_EPILOGUE_BIAS)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  p.biasType = desc.biasType == -1 ? d.type : cudaDataType(desc.biasType);
  if (!supportedTypes(p))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

/// The largest power of two, at most 256, dividing `pointer` and
/// `strideBytes`.
uint32_t alignmentOf(const void *pointer, uint64_t strideBytes = 0) {
  uint64_t bits =
      uint64_t(reinterpret_cast<uintptr_t>(pointer)) | strideBytes | 256;
  return uint32_t(bits & (~bits + 1));
}

/// The alignment of every batch matrix of `l` at `pointer`.
uint32_t alignmentOf(const void *pointer, const Layout &l) {
  if (l.batchCount == 1)
    return alignmentOf(pointer);
  return alignmentOf(pointer, uint64_t(l.batchStride) * elementBytes(l.type));
}

double loadElement(const std::byte *p, cudaDataType type) {
  switch (type) {
  case CUDA_R_64F: {
    double v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  case CUDA_R_16BF:
  case CUDA_R_16F: {
    uint16_t bits;
    std::memcpy(&bits, p, sizeof(bits));
    return type == CUDA_R_16BF ? strata::runtime::fromBf16Bits(bits)
                               : strata::runtime::fromFp16Bits(bits);
  }
  default: {
    float v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  }
}

/// Stores `v` rounded (to nearest even) to `type`; a double `v` is only
/// ever stored as f64.
template <typename Acc>
void storeElement(std::byte *p, cudaDataType type, Acc v) {
  if constexpr (std::is_same_v<Acc, double>) {
    std::memcpy(p, &v, sizeof(v));
  } else if (isNarrow(type)) {
    uint16_t bits = type == CUDA_R_16BF ? strata::runtime::bf16Bits(v)
                                        : strata::runtime::fp16Bits(v);
    std::memcpy(p, &bits, sizeof(bits));
  } else {
    std::memcpy(p, &v, sizeof(v));
  }
}

/// The element (row, col) of batch matrix `batch` of `l` at `base`.
template <typename Byte>
Byte *elementAt(Byte *base, const Layout &l, int64_t batch, int64_t row,
                int64_t col) {
  return base + (batch * l.batchStride + row + col * l.ld) *
                    int64_t(elementBytes(l.type));
}

/// Runs `product` with accumulator and scale type `Acc`: op(A) is gathered
/// row by row and op(B) column by column, so that each dot product walks
/// k in order over contiguous memory.
template <typename Acc> void runProduct(const Product &product) {
  const Problem &p = product.problem;
  const int64_t m = p.m, n = p.n, k = p.k;
  const bool transA = p.desc.transA == CUBLAS_OP_T;
  const bool transB = p.desc.transB == CUBLAS_OP_T;
  const Acc alpha = Acc(product.alpha), beta = Acc(product.beta);
  const bool bias = p.desc.epilogue == CUBLASLT_EPILOGUE_BIAS;
  std::vector<Acc> rowsOfA(size_t(m * k)), colsOfB(size_t(n * k));
  std::vector<Acc> biasValues(bias ? size_t(m) : 0);
  for (int64_t i = 0; i < int64_t(biasValues.size()); ++i)
    biasValues[i] = Acc(loadElement(
        product.bias + i * int64_t(elementBytes(p.biasType)), p.biasType));
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t l = 0; l < k; ++l)
        rowsOfA[i * k + l] =
            Acc(loadElement(transA ? elementAt(product.a, p.a, batch, l, i)
                                   : elementAt(product.a, p.a, batch, i, l),
                            p.a.type));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t l = 0; l < k; ++l)
        colsOfB[j * k + l] =
            Acc(loadElement(transB ? elementAt(product.b, p.b, batch, j, l)
                                   : elementAt(product.b, p.b, batch, l, j),
                            p.b.type));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        const Acc *row = rowsOfA.data() + i * k;
        const Acc *col = colsOfB.data() + j * k;
        Acc sum = 0;
        for (int64_t l = 0; l < k; ++l)
          sum += row[l] * col[l];
        Acc v = alpha * sum;
        if (beta != Acc(0))
          v += beta * Acc(loadElement(elementAt(product.c, p.c, batch, i, j),
                                      p.c.type));
        if (bias)
          v += biasValues[i];
        storeElement(elementAt(product.d, p.d, batch, i, j), p.d.type, v);
      }
    }
  }
}

} // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
  if (!lightHandle)
    return CUBLAS_STATUS_INVALID_VALUE;
  *lightHandle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!lightHandle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "an invalid value or an inconsistent configuration was given";
  case CUBLAS_STATUS_ARCH_MISMATCH:
    return "the device lacks an architectural feature the operation needs";
  case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory failed";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "the GPU program failed to execute";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "the requested configuration is not supported";
  case CUBLAS_STATUS_LICENSE_ERROR: return "the license check failed";
  }
  return "an unknown cuBLAS status";
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  if (!matmulDesc)
    return CUBLAS_STATUS_INVALID_VALUE;
  *matmulDesc = new Desc{computeType, scaleType};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  delete matmulDesc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                               cublasLtMatmulDescAttributes_t attr,
                               const void *buf, size_t sizeInBytes) {
  if (!matmulDesc)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return setField(matmulDesc->transA, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return setField(matmulDesc->transB, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    return setField(matmulDesc->epilogue, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return setField(matmulDesc->bias, buf, sizeInBytes);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return setField(matmulDesc->biasType, buf, sizeInBytes);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!matLayout)
    return CUBLAS_STATUS_INVALID_VALUE;
  *matLayout = new Layout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  delete matLayout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                 cublasLtMatrixLayoutAttribute_t attr,
                                 const void *buf, size_t sizeInBytes) {
  if (!matLayout)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
    return setField(matLayout->batchCount, buf, sizeInBytes);
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
    return setField(matLayout->batchStride, buf, sizeInBytes);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  if (!pref)
    return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                     cublasLtMatmulPreferenceAttributes_t attr,
                                     const void *buf, size_t sizeInBytes) {
  if (!pref)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return setField(pref->maxWorkspaceBytes, buf, sizeInBytes);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    return setField(pref->minAlignment[0], buf, sizeInBytes);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    return setField(pref->minAlignment[1], buf, sizeInBytes);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    return setField(pref->minAlignment[2], buf, sizeInBytes);
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
    return setField(pref->minAlignment[3], buf, sizeInBytes);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
    cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
    int *returnAlgoCount) {
  if (!lightHandle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!operationDesc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !preference ||
      requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount)
    return CUBLAS_STATUS_INVALID_VALUE;
  Problem problem;
  if (cublasStatus_t status =
          checkProblem(*operationDesc, *Adesc, *Bdesc, *Cdesc, *Ddesc, problem);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  cublasLtMatmulHeuristicResult_t result{};
  result.algo.data[0] = kAlgoMagic;
  for (int i = 0; i < 4; ++i)
    result.algo.data[1 + i] = preference->minAlignment[i];
  if (operationDesc->epilogue == CUBLASLT_EPILOGUE_BIAS)
    result.algo.data[5] = alignmentOf(operationDesc->bias);
  result.workspaceSize = 0;
  result.state = CUBLAS_STATUS_SUCCESS;
  result.wavesCount = 1.0f;
  heuristicResultsArray[0] = result;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
               const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
               const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
               const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
               cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
               void * /*workspace*/, size_t /*workspaceSizeInBytes*/,
               cudaStream_t stream) {
  if (!lightHandle)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!computeDesc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  Product product;
  Problem &p = product.problem;
  if (cublasStatus_t status =
          checkProblem(*computeDesc, *Adesc, *Bdesc, *Cdesc, *Ddesc, p);
      status != CUBLAS_STATUS_SUCCESS)
    return status;
  bool f64 = p.desc.scaleType == CUDA_R_64F;
  product.alpha = f64 ? *static_cast<const double *>(alpha)
                      : *static_cast<const float *>(alpha);
  product.beta = f64 ? *static_cast<const double *>(beta)
                     : *static_cast<const float *>(beta);
  product.a = static_cast<const std::byte *>(A);
  product.b = static_cast<const std::byte *>(B);
  product.c = static_cast<const std::byte *>(C);
  product.d = static_cast<std::byte *>(D);
  bool bias = p.desc.epilogue == CUBLASLT_EPILOGUE_BIAS;
  product.bias = static_cast<const std::byte *>(bias ? p.desc.bias : nullptr);

  // Only the operands a non-empty product reads must exist.
  bool output = p.m > 0 && p.n > 0;
  if (output && ((p.k > 0 && (!A || !B)) || !D || (product.beta != 0 && !C) ||
                 (bias && !product.bias)))
    return CUBLAS_STATUS_INVALID_VALUE;
  // In place, C and D must be one layout.
  if (C == D && (p.c.ld != p.d.ld || p.c.batchStride != p.d.batchStride))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (algo) {
    if (algo->data[0] != kAlgoMagic)
      return CUBLAS_STATUS_INVALID_VALUE;
    if (alignmentOf(A, p.a) < algo->data[1] ||
        alignmentOf(B, p.b) < algo->data[2] ||
        alignmentOf(C, p.c) < algo->data[3] ||
        alignmentOf(D, p.d) < algo->data[4] ||
        (bias && alignmentOf(product.bias) < algo->data[5]))
      return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!output)
    return CUBLAS_STATUS_SUCCESS;

  auto work = [product] {
    if (product.problem.desc.computeType == CUBLAS_COMPUTE_64F)
      runProduct<double>(product);
    else
      runProduct<float>(product);
  };
  if (strata::cuda_emulation::enqueue(stream, std::move(work),
                                      "cublasLtMatmul") != cudaSuccess)
    return CUBLAS_STATUS_EXECUTION_FAILED;
  return CUBLAS_STATUS_SUCCESS;
}
