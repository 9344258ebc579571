//===- LinearAlgebraKernels.cu - Matrix products on cuBLASLt ---------------===//
//
// graph.matmul, graph.linear and graph.linear_grad_weight (the last is
// registered by the CPU's NeuralNetGradKernels.cpp; its product lives here
// with the others'). Each op's prepare function checks the instruction as
// the CPU kernel does (LinearAlgebraCommon.cuh) and builds its cuBLASLt
// descriptors once: the three matrix layouts of the column-major product
// (with batch count and strides for a batched matmul) and a matmul
// descriptor per compute type, CUBLAS_COMPUTE_32F (IEEE f32, as the CPU's
// sgemm) and CUBLAS_COMPUTE_32F_FAST_TF32 for f32, CUBLAS_COMPUTE_64F for
// f64; bf16 and fp16 operands and results (mixed precision's narrow
// storage) compute in CUBLAS_COMPUTE_32F on the tensor cores and round the
// result once, as the CPU's widen-compute-round does.
//
// The algorithm needs a cuBLASLt handle, the stream's workspace size and the
// operands' alignment, which only a launch knows (a prepare sees no stream):
// the first launch asks cublasLtMatmulAlgoGetHeuristic and the plan keeps the
// answer for that (handle, workspace, TF32 or not, alignments) key; a later
// launch with another key asks again. Launches of one instruction are
// serialized on the host, and a mutex keeps it so.
//
// An operand or result whose leading dimension is not a multiple of 16
// bytes (and that is large) is staged through a stream-ordered copy with an
// aligned one, so that cuBLASLt can use its Hopper kernels
// (linalg::stagedLeadingDim); STRATA_CUDA_GEMM_STAGING=0 turns that off,
// =all stages every such matrix whatever its size (the conformance suite).
//
// graph.linear's bias is cuBLASLt's BIAS epilogue (the pointer set on the
// shared descriptor at each launch, before the enqueue that reads it) when
// cuBLASLt has an algorithm with it, else a small kernel after the product,
// which is also how the CPU rounds it (product, then + bias; for a narrow
// result that fallback rounds twice, product then sum). An empty
// contraction (k == 0) is a zero fill (plus the bias), an empty result is
// nothing.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtils.cuh"
#include "ElementwiseCommon.cuh"
#include "LinearAlgebraCommon.cuh"

#include "strata/Runtime/NarrowFloat.h"

#include <cublasLt.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace strata::runtime::cuda {
namespace {

using linalg::GemmProblem;

/// Adds bias[j] to out[r * n + j] for every row r.
template <typename T>
__global__ void addBiasKernel(T *out, const T *bias, int64_t total,
                              int64_t n) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step)
    out[i] += bias[i % n];
}

/// Copies the `rows` leading elements of every column of a column-major
/// matrix from leading dimension `inLd` to `outLd` (T: the element's bits).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    copyColumnsKernel(const T *in, int64_t inLd, T *out, int64_t outLd,
                      int64_t rows, int64_t total) {
  STRATA_GRID_STRIDE(i, total) {
    int64_t col = i / rows, row = i - col * rows;
    out[col * outLd + row] = in[col * inLd + row];
  }
}

/// The narrow (bf16 / fp16 storage) form: bias added in f32, rounded.
__global__ void addNarrowBiasKernel(uint16_t *out, const uint16_t *bias,
                                    int64_t total, int64_t n, bool bf16) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    float v = bf16 ? fromBf16Bits(out[i]) + fromBf16Bits(bias[i % n])
                   : fromFp16Bits(out[i]) + fromFp16Bits(bias[i % n]);
    out[i] = bf16 ? bf16Bits(v) : fp16Bits(v);
  }
}

/// cuBLASLt's name for the storage type of a product's operands.
cudaDataType_t cudaTypeOf(DType t) {
  switch (t) {
  case DType::F64: return CUDA_R_64F;
  case DType::BF16: return CUDA_R_16BF;
  case DType::F16: return CUDA_R_16F;
  default: return CUDA_R_32F;
  }
}

/// What a launch asked cuBLASLt, and its answer.
struct AlgoChoice {
  bool valid = false;
  cublasLtHandle_t lt = nullptr;
  size_t workspaceBytes = 0;
  uint32_t alignA = 0, alignB = 0, alignD = 0, alignBias = 0;
  bool epilogue = false; // the bias rides the BIAS epilogue
  cublasLtMatmulAlgo_t algo{};
};

/// One instruction's cuBLASLt objects (the prepared object of the three
/// ops).
struct GemmPlan {
  GemmProblem problem;
  /// The layouts cuBLASLt reads and writes: with the staged leading
  /// dimensions where a matrix is staged.
  cublasLtMatrixLayout_t layoutA = nullptr, layoutB = nullptr,
                         layoutD = nullptr;
  /// The leading dimensions of the staged copies of A, B and D; each the
  /// problem's own where that matrix is not staged.
  int64_t stagedLda = 0, stagedLdb = 0, stagedLdd = 0;
  /// [0]: the exact compute type, [1]: TF32 (f32 only).
  cublasLtMatmulDesc_t desc[2] = {nullptr, nullptr};
  mutable std::mutex mutex;
  mutable AlgoChoice choice[2];

  GemmPlan() = default;
  GemmPlan(const GemmPlan &) = delete;
  GemmPlan &operator=(const GemmPlan &) = delete;
  ~GemmPlan() {
    for (cublasLtMatmulDesc_t d : desc)
      if (d)
        cublasLtMatmulDescDestroy(d);
    for (cublasLtMatrixLayout_t l : {layoutA, layoutB, layoutD})
      if (l)
        cublasLtMatrixLayoutDestroy(l);
  }
};

Status createLayout(const GemmProblem &p, cublasLtMatrixLayout_t &layout,
                    cudaDataType_t type, int64_t rows, int64_t cols,
                    int64_t ld, int64_t stride) {
  const std::string what = p.op + ": cublasLtMatrixLayout";
  if (Status s = cublasStatus(
          cublasLtMatrixLayoutCreate(&layout, type, uint64_t(rows),
                                     uint64_t(cols), ld),
          what + "Create");
      !s)
    return s;
  if (p.batch > 1) {
    int32_t count = int32_t(p.batch);
    if (Status s = cublasStatus(
            cublasLtMatrixLayoutSetAttribute(
                layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                sizeof(count)),
            what + "SetAttribute(BATCH_COUNT)");
        !s)
      return s;
    if (Status s = cublasStatus(
            cublasLtMatrixLayoutSetAttribute(
                layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                sizeof(stride)),
            what + "SetAttribute(STRIDED_BATCH_OFFSET)");
        !s)
      return s;
  }
  return Status::ok();
}

Status createDesc(const GemmProblem &p, cublasLtMatmulDesc_t &desc,
                  cublasComputeType_t compute, cudaDataType_t scaleType) {
  const std::string what = p.op + ": cublasLtMatmulDesc";
  if (Status s = cublasStatus(cublasLtMatmulDescCreate(&desc, compute,
                                                       scaleType),
                              what + "Create");
      !s)
    return s;
  int32_t transA = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  int32_t transB = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (Status s = cublasStatus(
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                         &transA, sizeof(transA)),
          what + "SetAttribute(TRANSA)");
      !s)
    return s;
  return cublasStatus(cublasLtMatmulDescSetAttribute(
                          desc, CUBLASLT_MATMUL_DESC_TRANSB, &transB,
                          sizeof(transB)),
                      what + "SetAttribute(TRANSB)");
}

/// The smallest matrix (elements) staged for its leading dimension:
/// STRATA_CUDA_GEMM_STAGING=0 stages none (-1), =all every one (0); by
/// default 2^20 elements.
int64_t stagingMinElements() {
  static const int64_t value = [] {
    const char *env = std::getenv("STRATA_CUDA_GEMM_STAGING");
    std::string v = env ? env : "";
    if (v == "0" || v == "off")
      return int64_t(-1);
    if (v == "all")
      return int64_t(0);
    return int64_t(1) << 20;
  }();
  return value;
}

/// Copies a (rows x cols) column-major matrix of `dtype` between leading
/// dimensions.
Status copyColumns(const CudaStream &stream, const std::string &op,
                   DType dtype, const char *in, int64_t inLd, char *out,
                   int64_t outLd, int64_t rows, int64_t cols) {
  int64_t total = rows * cols;
  if (total == 0)
    return Status::ok();
  return dispatchWidth(dtype, [&](auto tag) -> Status {
    using W = decltype(tag);
    STRATA_LAUNCH(gridFor(stream, total), kBlock, 0, stream.stream,
                  copyColumnsKernel<W>)
    (reinterpret_cast<const W *>(in), inLd, reinterpret_cast<W *>(out), outLd,
     rows, total);
    return launchStatus(op);
  });
}

using BuildFn = Status (*)(const KernelContext &, GemmProblem &);

/// The prepare function of an op whose problem `build` makes.
Status prepareGemm(BuildFn build, KernelContext &ctx,
                   std::shared_ptr<GemmPlan> &out) {
  auto plan = std::make_shared<GemmPlan>();
  GemmProblem &p = plan->problem;
  if (Status s = build(ctx, p); !s)
    return s;
  if (p.outElems == 0 || p.kk == 0) { // nothing, or a fill: no cuBLASLt
    out = std::move(plan);
    return Status::ok();
  }
  bool f32 = p.dtype == DType::F32;
  bool f64 = p.dtype == DType::F64;
  cudaDataType_t type = cudaTypeOf(p.dtype);
  size_t elementBytes = byteWidth(p.dtype);
  int64_t minElements = stagingMinElements();
  plan->stagedLda = linalg::stagedLeadingDim(p, p.aRows, p.aCols, p.lda,
                                             elementBytes, minElements);
  plan->stagedLdb = linalg::stagedLeadingDim(p, p.bRows, p.bCols, p.ldb,
                                             elementBytes, minElements);
  plan->stagedLdd = linalg::stagedLeadingDim(p, p.mm, p.nn, p.ldd,
                                             elementBytes, minElements);
  if (Status s = createLayout(p, plan->layoutA, type, p.aRows, p.aCols,
                              plan->stagedLda, p.strideA);
      !s)
    return s;
  if (Status s = createLayout(p, plan->layoutB, type, p.bRows, p.bCols,
                              plan->stagedLdb, p.strideB);
      !s)
    return s;
  if (Status s = createLayout(p, plan->layoutD, type, p.mm, p.nn,
                              plan->stagedLdd, p.strideD);
      !s)
    return s;
  // Narrow operands: f32 accumulation and f32 alpha / beta.
  if (Status s = createDesc(p, plan->desc[0],
                            f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                            f64 ? CUDA_R_64F : CUDA_R_32F);
      !s)
    return s;
  // A narrow product's bias is stored narrow too: say so rather than rely
  // on the epilogue's default bias type.
  if (isNarrowFloat(p.dtype) && p.biasInput >= 0) {
    int32_t biasType = int32_t(type);
    if (Status s = cublasStatus(
            cublasLtMatmulDescSetAttribute(plan->desc[0],
                                           CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                           &biasType, sizeof(biasType)),
            p.op + ": cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
        !s)
      return s;
  }
  if (f32)
    if (Status s = createDesc(p, plan->desc[1], CUBLAS_COMPUTE_32F_FAST_TF32,
                              CUDA_R_32F);
        !s)
      return s;
  out = std::move(plan);
  return Status::ok();
}

/// The largest power of two (at most 256) dividing `address` and every
/// byte offset the calls add to it.
uint32_t alignmentOf(const void *address, int64_t strideBytes,
                     const GemmProblem &p, int64_t GemmProblem::Call::*field,
                     size_t elementBytes) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(address)) | 256;
  if (p.batch > 1)
    bits |= uint64_t(strideBytes);
  for (const GemmProblem::Call &c : p.calls)
    bits |= uint64_t(c.*field) * elementBytes;
  return uint32_t(bits & (~bits + 1));
}

Status setEpilogue(const GemmProblem &p, cublasLtMatmulDesc_t desc,
                   bool bias, const void *biasPointer) {
  uint32_t epilogue = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  cublasStatus_t status = cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
  if (status != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(status,
                        p.op + ": cublasLtMatmulDescSetAttribute(EPILOGUE)");
  if (!bias)
    return Status::ok();
  status = cublasLtMatmulDescSetAttribute(
      desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &biasPointer,
      sizeof(biasPointer));
  if (status != CUBLAS_STATUS_SUCCESS)
    return cublasStatus(
        status, p.op + ": cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  return Status::ok();
}

/// Asks cuBLASLt for the best algorithm for `key` (with the BIAS epilogue
/// first when `key.epilogue`, then without).
Status pickAlgorithm(const GemmPlan &plan, cublasLtMatmulDesc_t desc,
                     AlgoChoice &key, const void *biasPointer) {
  const GemmProblem &p = plan.problem;
  cublasLtMatmulPreference_t pref = nullptr;
  if (Status s = cublasStatus(cublasLtMatmulPreferenceCreate(&pref),
                              p.op + ": cublasLtMatmulPreferenceCreate");
      !s)
    return s;
  struct PrefOwner {
    cublasLtMatmulPreference_t pref;
    ~PrefOwner() { cublasLtMatmulPreferenceDestroy(pref); }
  } prefOwner{pref};
  uint64_t workspace = key.workspaceBytes;
  const std::string setPref = p.op + ": cublasLtMatmulPreferenceSetAttribute";
  if (Status s = cublasStatus(
          cublasLtMatmulPreferenceSetAttribute(
              pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
              sizeof(workspace)),
          setPref);
      !s)
    return s;
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.alignA},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.alignB},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.alignD},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.alignD}};
  for (const auto &[attr, value] : aligns)
    if (Status s = cublasStatus(cublasLtMatmulPreferenceSetAttribute(
                                    pref, attr, &value, sizeof(value)),
                                setPref);
        !s)
      return s;
  bool tryEpilogue = key.epilogue;
  cublasStatus_t last = CUBLAS_STATUS_SUCCESS;
  for (bool epilogue : {true, false}) {
    if (epilogue && !tryEpilogue)
      continue;
    if (Status s = setEpilogue(p, desc, epilogue, biasPointer); !s)
      return s;
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    last = cublasLtMatmulAlgoGetHeuristic(key.lt, desc, plan.layoutA,
                                          plan.layoutB, plan.layoutD,
                                          plan.layoutD, pref, 1, &result,
                                          &returned);
    if (last == CUBLAS_STATUS_SUCCESS && returned > 0 &&
        result.state == CUBLAS_STATUS_SUCCESS &&
        result.workspaceSize <= key.workspaceBytes) {
      key.algo = result.algo;
      key.epilogue = epilogue;
      key.valid = true;
      return Status::ok();
    }
  }
  return Status::error(p.op + ": cuBLASLt has no algorithm for " + p.operands +
                       " (column-major " + std::to_string(p.mm) + "x" +
                       std::to_string(p.nn) + "x" + std::to_string(p.kk) +
                       ", batch " + std::to_string(p.batch) +
                       ", cuBLASLt status " + std::to_string(int(last)) + ")");
}

Status addBias(const CudaStream &stream, const GemmProblem &p,
               KernelContext &ctx) {
  const TensorView &bias = ctx.inputs[p.biasInput];
  TensorView &out = ctx.outputs[0];
  int64_t total = out.numel(), n = bias.numel();
  unsigned grid = gridFor(stream, total);
  if (p.dtype == DType::F32)
    STRATA_LAUNCH(grid, kBlock, 0, stream.stream, addBiasKernel<float>)
    (out.as<float>(), bias.as<float>(), total, n);
  else if (isNarrowFloat(p.dtype))
    STRATA_LAUNCH(grid, kBlock, 0, stream.stream, addNarrowBiasKernel)
    (out.as<uint16_t>(), bias.as<uint16_t>(), total, n, p.dtype == DType::BF16);
  else
    STRATA_LAUNCH(grid, kBlock, 0, stream.stream, addBiasKernel<double>)
    (out.as<double>(), bias.as<double>(), total, n);
  return launchStatus(p.op);
}

Status runGemm(const GemmPlan &plan, KernelContext &ctx) {
  const GemmProblem &p = plan.problem;
  const CudaStream &stream = streamOf(ctx);
  TensorView &out = ctx.outputs[0];
  if (p.outElems == 0)
    return Status::ok();
  if (p.kk == 0) {
    if (Status s = cudaStatus(
            cudaMemsetAsync(out.data, 0, out.bytes(), stream.stream),
            p.op + ": cudaMemsetAsync");
        !s)
      return s;
    return p.biasInput >= 0 ? addBias(stream, p, ctx) : Status::ok();
  }
  bool f32 = p.dtype == DType::F32;
  bool f64 = p.dtype == DType::F64;
  size_t elementBytes = byteWidth(p.dtype);
  // TF32 when the run allows it, or when both factors hold bf16 / fp16
  // values (the executor says so): TF32's 10 mantissa bits hold those
  // exactly, so every product is the f32 product.
  bool exactInTf32 = ctx.attrs.has("operands_rounded_to");
  int variant = f32 && (stream.tf32 || exactInTf32) ? 1 : 0;
  cublasLtMatmulDesc_t desc = plan.desc[variant];
  const char *a = static_cast<const char *>(ctx.inputs[p.aInput].data);
  const char *b = static_cast<const char *>(ctx.inputs[p.bInput].data);
  char *d = static_cast<char *>(out.data);
  const void *biasPointer =
      p.biasInput >= 0 ? ctx.inputs[p.biasInput].data : nullptr;

  // Operands with a misaligned leading dimension are read from aligned
  // copies, and a misaligned result written to one and copied back after.
  StreamBuffers staged(stream.stream);
  auto allocate = [&](int64_t ld, int64_t cols, char *&out) {
    void *buffer = nullptr;
    Status s = staged.allocate(size_t(ld * cols) * elementBytes,
                               p.op + ": an aligned copy of an operand",
                               buffer);
    out = static_cast<char *>(buffer);
    return s;
  };
  char *stagedD = nullptr;
  for (auto [matrix, ld, stagedLd, rows, cols] :
       {std::tuple{&a, p.lda, plan.stagedLda, p.aRows, p.aCols},
        std::tuple{&b, p.ldb, plan.stagedLdb, p.bRows, p.bCols}}) {
    if (stagedLd == ld)
      continue;
    char *copy = nullptr;
    if (Status s = allocate(stagedLd, cols, copy); !s)
      return s;
    if (Status s = copyColumns(stream, p.op, p.dtype, *matrix, ld, copy,
                               stagedLd, rows, cols);
        !s)
      return s;
    *matrix = copy;
  }
  if (plan.stagedLdd != p.ldd) {
    if (Status s = allocate(plan.stagedLdd, p.nn, stagedD); !s)
      return s;
    d = stagedD;
  }

  AlgoChoice key;
  key.lt = stream.lt;
  key.workspaceBytes = stream.workspace ? stream.workspaceBytes : 0;
  key.alignA = alignmentOf(a, p.strideA * int64_t(elementBytes), p,
                           &GemmProblem::Call::a, elementBytes);
  key.alignB = alignmentOf(b, p.strideB * int64_t(elementBytes), p,
                           &GemmProblem::Call::b, elementBytes);
  key.alignD = alignmentOf(d, p.strideD * int64_t(elementBytes), p,
                           &GemmProblem::Call::d, elementBytes);
  // The epilogue reads the bias as a vector: only an aligned one (else the
  // kernel below adds it).
  if (biasPointer) {
    uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(biasPointer)) | 256;
    key.alignBias = uint32_t(bits & (~bits + 1));
  }
  key.epilogue = biasPointer && key.alignBias >= 16;

  bool epilogue = false;
  {
    std::lock_guard<std::mutex> lock(plan.mutex);
    AlgoChoice &choice = plan.choice[variant];
    if (!choice.valid || choice.lt != key.lt ||
        choice.workspaceBytes != key.workspaceBytes ||
        choice.alignA != key.alignA || choice.alignB != key.alignB ||
        choice.alignD != key.alignD || choice.alignBias != key.alignBias) {
      choice.valid = false;
      if (Status s = pickAlgorithm(plan, desc, key, biasPointer); !s)
        return s;
      choice = key;
    }
    epilogue = choice.epilogue;
    if (Status s = setEpilogue(p, desc, epilogue, biasPointer); !s)
      return s;
    const float alpha32 = 1.0f, beta32 = 0.0f;
    const double alpha64 = 1.0, beta64 = 0.0;
    const void *alpha = f64 ? static_cast<const void *>(&alpha64)
                            : static_cast<const void *>(&alpha32);
    const void *beta = f64 ? static_cast<const void *>(&beta64)
                           : static_cast<const void *>(&beta32);
    for (const GemmProblem::Call &call : p.calls) {
      char *dCall = d + call.d * int64_t(elementBytes);
      cublasStatus_t status = cublasLtMatmul(
          stream.lt, desc, alpha, a + call.a * int64_t(elementBytes),
          plan.layoutA, b + call.b * int64_t(elementBytes), plan.layoutB,
          beta, dCall, plan.layoutD, dCall, plan.layoutD, &choice.algo,
          stream.workspace, choice.workspaceBytes, stream.stream);
      if (status != CUBLAS_STATUS_SUCCESS)
        return cublasStatus(status,
                            p.op + ": cublasLtMatmul on " + p.operands);
    }
  }
  if (stagedD)
    if (Status s = copyColumns(stream, p.op, p.dtype, stagedD,
                               plan.stagedLdd, static_cast<char *>(out.data),
                               p.ldd, p.mm, p.nn);
        !s)
      return s;
  if (p.biasInput >= 0 && !epilogue)
    return addBias(stream, p, ctx);
  return Status::ok();
}

/// The KernelFn and PrepareFn of an op whose problem `build` makes. A launch
/// without a prepared plan (a caller that skips prepare) makes one for
/// itself: the descriptors are host objects cublasLtMatmul has read by the
/// time it returns.
template <BuildFn build> Status gemmKernel(KernelContext &ctx) {
  if (ctx.prepared)
    return runGemm(*static_cast<const GemmPlan *>(ctx.prepared), ctx);
  std::shared_ptr<GemmPlan> plan;
  if (Status s = prepareGemm(build, ctx, plan); !s)
    return s;
  return runGemm(*plan, ctx);
}

template <BuildFn build>
Status gemmPrepare(KernelContext &ctx, std::shared_ptr<void> &prepared) {
  std::shared_ptr<GemmPlan> plan;
  if (Status s = prepareGemm(build, ctx, plan); !s)
    return s;
  prepared = std::move(plan);
  return Status::ok();
}

} // namespace

void registerLinearAlgebraKernels(KernelRegistry &registry) {
  registry.add("graph.matmul", gemmKernel<linalg::buildMatmul>,
               gemmPrepare<linalg::buildMatmul>);
  registry.add("graph.linear", gemmKernel<linalg::buildLinear>,
               gemmPrepare<linalg::buildLinear>);
  registry.add("graph.linear_grad_weight",
               gemmKernel<linalg::buildLinearGradWeight>,
               gemmPrepare<linalg::buildLinearGradWeight>);
}

} // namespace strata::runtime::cuda
