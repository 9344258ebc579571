//===- CudaKernels.h - Registration of the CUDA backend's kernels -*- C++ -*-===//
//
// Private to runtime/cuda. Each file under kernels/ registers one family,
// mirroring runtime/cpu/kernels/ file for file; the CPU kernel of an op is
// its specification (same checks, same messages, same numbers within the
// tolerances of docs/cuda.md).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_CUDAKERNELS_H
#define STRATA_RUNTIME_CUDA_CUDAKERNELS_H

#include "strata/Runtime/Kernel.h"

namespace strata::runtime::cuda {

void registerElementwiseKernels(KernelRegistry &registry);
void registerElementwiseGradKernels(KernelRegistry &registry);
void registerShapeKernels(KernelRegistry &registry);
void registerShapeGradKernels(KernelRegistry &registry);
void registerReductionKernels(KernelRegistry &registry);
void registerLinearAlgebraKernels(KernelRegistry &registry);
void registerNormalizationKernels(KernelRegistry &registry);
void registerAttentionKernels(KernelRegistry &registry);
void registerLossKernels(KernelRegistry &registry);
void registerDropoutKernels(KernelRegistry &registry);
void registerConvolutionKernels(KernelRegistry &registry);
void registerNeuralNetGradKernels(KernelRegistry &registry);
void registerOptimizerKernels(KernelRegistry &registry);
void registerMoveKernels(KernelRegistry &registry);
void registerCollectiveKernels(KernelRegistry &registry);
void registerFusedElementwiseKernels(KernelRegistry &registry);
/// bf16 / fp16 operands of the ops without a narrow kernel (registered
/// last: it wraps their f32 kernels).
void registerNarrowFloatOperands(KernelRegistry &registry);
/// bf16 / fp16 attention and its gradient on tensor cores
/// (kernels/AttentionMma.cu): `handled` says whether they took the
/// instruction (else it is the widened f32 kernels').
Status runMmaAttention(KernelContext &ctx, bool &handled);
Status runMmaAttentionGrad(KernelContext &ctx, bool &handled);
/// A bf16 / fp16 reduce_sum with a result of its type, read narrow
/// (kernels/ReductionKernels.cu).
Status runNarrowReduceSum(KernelContext &ctx, bool &handled);
/// bf16 / fp16 convolutions, loaded narrow and summed in f32
/// (kernels/ConvolutionKernels.cu).
Status runNarrowConv(KernelContext &ctx, bool &handled);
Status runNarrowConvGradInput(KernelContext &ctx, bool &handled);
Status runNarrowConvGradWeight(KernelContext &ctx, bool &handled);

/// Every family above, built once.
const KernelRegistry &getCudaKernels();

} // namespace strata::runtime::cuda

#endif // STRATA_RUNTIME_CUDA_CUDAKERNELS_H
