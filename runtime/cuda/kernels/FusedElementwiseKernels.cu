//===- FusedElementwiseKernels.cu - graph.fused_elementwise on CUDA -------===//
//
// One thread per result element runs the whole program (FusedProgram.h)
// over a per-thread array of its values (indexed by the program, so ptxas
// keeps it in local memory, which L1 caches: 272 to 448 bytes a thread):
// each input read once (bf16 / fp16 widened, broadcast by
// strides), each returned value written once, no intermediate in memory.
// The instructions are the unfused kernels' formulas (ElementwiseFormulas.h,
// UnaryGrad.h, NarrowFloat.h); against the CPU's fused kernel the results
// agree within the elementwise tolerances (CUDA's expf / erff / tanhf).
//
//===----------------------------------------------------------------------===//

#include "ElementwiseCommon.cuh"

#include "strata/Runtime/FusedProgram.h"
#include "strata/Runtime/NarrowFloat.h"

#include <algorithm>
#include <memory>

namespace strata::runtime::cuda {
namespace {

/// The program as the kernel takes it, by value.
struct DeviceProgram {
  int numInputs = 0, numCode = 0, numResults = 0;
  FusedOpcode op[kFusedMaxInstructions] = {};
  UnaryGradKind kind[kFusedMaxInstructions] = {};
  int8_t args[kFusedMaxInstructions][3] = {};
  int8_t results[kFusedMaxResults] = {};
};

/// How an input is read: at the result's index (its shape), at 0 (one
/// element), or through strides (a broadcast).
enum class Read : uint8_t { Same, Scalar, Strided };

/// Where the inputs and results are, by value.
struct DeviceIo {
  int rank = 0;
  /// Some input is read through strides: the kernel works out coordinates.
  bool strided = false;
  Read read[kFusedMaxInputs] = {};
  int64_t size[kFusedMaxRank] = {};
  const void *in[kFusedMaxInputs] = {};
  DType inType[kFusedMaxInputs] = {};
  int64_t inStride[kFusedMaxInputs][kFusedMaxRank] = {};
  void *out[kFusedMaxResults] = {};
  DType outType[kFusedMaxResults] = {};
};

template <typename T> __device__ inline T load(const void *p, DType t, int64_t i) {
  switch (t) {
  case DType::BF16: return T(fromBf16Bits(static_cast<const uint16_t *>(p)[i]));
  case DType::F16: return T(fromFp16Bits(static_cast<const uint16_t *>(p)[i]));
  case DType::F32: return T(static_cast<const float *>(p)[i]);
  case DType::I1: return T(static_cast<const uint8_t *>(p)[i]);
  default: return T(static_cast<const double *>(p)[i]);
  }
}

template <typename T> __device__ inline void store(void *p, DType t, int64_t i, T x) {
  switch (t) {
  case DType::BF16: static_cast<uint16_t *>(p)[i] = bf16Bits(float(x)); break;
  case DType::F16: static_cast<uint16_t *>(p)[i] = fp16Bits(float(x)); break;
  case DType::F32: static_cast<float *>(p)[i] = float(x); break;
  default: static_cast<double *>(p)[i] = double(x); break;
  }
}

template <typename T>
__device__ inline T evaluate(FusedOpcode op, UnaryGradKind kind, T a, T b,
                             T c) {
  UnaryParams none;
  switch (op) {
  // The ops ElementwiseOps.def marks fusible, each by its formula.
#define STRATA_FUSIBLE_BINARY(Kind, Mnemonic, OpClass, Types)                  \
  case FusedOpcode::Kind:                                                      \
    return binaryFormula<Binary::Kind>(a, b);
#define STRATA_FUSIBLE_UNARY(Kind, Mnemonic, OpClass, Types, Gradient)         \
  case FusedOpcode::Kind:                                                      \
    return unaryFormula<Unary::Kind>(a, none);
#include "strata/Runtime/ElementwiseOps.def"
  case FusedOpcode::Gelu: return geluExact(a);
  case FusedOpcode::GeluTanh: return geluTanh(a);
  case FusedOpcode::CastWide: return a;
  case FusedOpcode::CastBf16: return T(roundToBf16(float(a)));
  case FusedOpcode::CastF16: return T(roundToFp16(float(a)));
  case FusedOpcode::Where: return a != T(0) ? b : c;
  case FusedOpcode::Grad: {
    UnaryGradParams p;
    p.kind = kind;
    // grad dy x y: the derivative at (x, y) times dy, in double.
    return T(unaryDerivative(p, double(b), double(c), double(a)));
  }
  }
  return a;
}

template <typename T>
__global__ void __launch_bounds__(kBlock)
    fusedKernel(DeviceProgram p, DeviceIo io, int64_t n) {
  STRATA_GRID_STRIDE(i, n) {
    T v[kFusedMaxInputs + kFusedMaxInstructions];
    int64_t offset[kFusedMaxInputs] = {};
    if (io.strided) {
      int64_t rest = i;
      for (int d = io.rank - 1; d >= 0; --d) {
        int64_t coord = rest % io.size[d];
        rest /= io.size[d];
        for (int k = 0; k < p.numInputs; ++k)
          offset[k] += coord * io.inStride[k][d];
      }
    }
    for (int k = 0; k < p.numInputs; ++k) {
      int64_t at = io.read[k] == Read::Same     ? i
                   : io.read[k] == Read::Scalar ? 0
                                                : offset[k];
      v[k] = load<T>(io.in[k], io.inType[k], at);
    }
    for (int c = 0; c < p.numCode; ++c) {
      const int8_t *a = p.args[c];
      v[p.numInputs + c] = evaluate<T>(p.op[c], p.kind[c], v[a[0]],
                                       a[1] >= 0 ? v[a[1]] : T(0),
                                       a[2] >= 0 ? v[a[2]] : T(0));
    }
    for (int r = 0; r < p.numResults; ++r)
      store<T>(io.out[r], io.outType[r], i, v[p.results[r]]);
  }
}

struct Prepared {
  DeviceProgram program;
  DeviceIo io; // shapes and strides; the pointers at each launch
  DType wide = DType::F32;
};

Status prepareFused(KernelContext &ctx, std::shared_ptr<void> &out) {
  FusedProgram program;
  auto plan = std::make_shared<Prepared>();
  if (Status s = planFusedElementwise(ctx, program, plan->wide); !s)
    return s;
  DeviceProgram &p = plan->program;
  // planFusedElementwise holds the program to these limits; the mins say
  // so to the compiler.
  p.numInputs = std::min(program.numInputs, kFusedMaxInputs);
  p.numCode = std::min(int(program.code.size()), kFusedMaxInstructions);
  p.numResults = std::min(int(program.results.size()), kFusedMaxResults);
  for (int c = 0; c < p.numCode; ++c) {
    p.op[c] = program.code[c].op;
    p.kind[c] = program.code[c].kind;
    for (int k = 0; k < 3; ++k)
      p.args[c][k] = int8_t(program.code[c].args[k]);
  }
  for (int r = 0; r < p.numResults; ++r)
    p.results[r] = int8_t(program.results[r]);
  DeviceIo &io = plan->io;
  const std::vector<int64_t> &shape = ctx.outputs[0].shape;
  io.rank = std::min(int(shape.size()), kFusedMaxRank);
  for (int d = 0; d < io.rank; ++d)
    io.size[d] = shape[d];
  for (int k = 0; k < p.numInputs; ++k) {
    const TensorView &in = ctx.inputs[k];
    io.read[k] = in.numel() == 1        ? Read::Scalar
                 : in.numel() == ctx.outputs[0].numel() ? Read::Same
                                                        : Read::Strided;
    io.strided |= io.read[k] == Read::Strided;
    io.inType[k] = in.dtype;
    std::vector<int64_t> strides = broadcastStrides(ctx.inputs[k].shape, shape);
    for (int d = 0; d < io.rank; ++d)
      io.inStride[k][d] = strides[d];
  }
  for (int r = 0; r < p.numResults; ++r)
    io.outType[r] = ctx.outputs[r].dtype;
  out = std::move(plan);
  return Status::ok();
}

Status fusedKernelFn(KernelContext &ctx) {
  std::shared_ptr<void> owned;
  const Prepared *plan = nullptr;
  if (Status s = preparedPlan(ctx, prepareFused, owned, plan); !s)
    return s;
  DeviceIo io = plan->io;
  for (int k = 0; k < plan->program.numInputs; ++k)
    io.in[k] = ctx.inputs[k].data;
  for (int r = 0; r < plan->program.numResults; ++r)
    io.out[r] = ctx.outputs[r].data;
  int64_t n = ctx.outputs[0].numel();
  if (n == 0)
    return Status::ok();
  const CudaStream &cs = streamOf(ctx);
  if (plan->wide == DType::F64)
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, fusedKernel<double>)
    (plan->program, io, n);
  else
    STRATA_LAUNCH(gridFor(cs, n), kBlock, 0, cs.stream, fusedKernel<float>)
    (plan->program, io, n);
  return launchStatus("graph.fused_elementwise");
}

} // namespace

void registerFusedElementwiseKernels(KernelRegistry &registry) {
  registry.add("graph.fused_elementwise", fusedKernelFn, prepareFused);
}

} // namespace strata::runtime::cuda
