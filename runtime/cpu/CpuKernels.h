//===- CpuKernels.h - Registration of the CPU backend's kernels -*- C++ -*-===//
//
// Private to runtime/cpu. Each file under kernels/ registers one family.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CPU_CPUKERNELS_H
#define STRATA_RUNTIME_CPU_CPUKERNELS_H

#include "strata/Runtime/Kernel.h"

namespace strata::runtime::cpu {

void registerElementwiseKernels(KernelRegistry &registry);
void registerShapeKernels(KernelRegistry &registry);
void registerReductionKernels(KernelRegistry &registry);
void registerLinearAlgebraKernels(KernelRegistry &registry);
void registerNormalizationKernels(KernelRegistry &registry);
void registerAttentionKernels(KernelRegistry &registry);
void registerLossKernels(KernelRegistry &registry);
void registerDropoutKernels(KernelRegistry &registry);
void registerConvolutionKernels(KernelRegistry &registry);
void registerElementwiseGradKernels(KernelRegistry &registry);
void registerNeuralNetGradKernels(KernelRegistry &registry);
void registerShapeGradKernels(KernelRegistry &registry);
void registerOptimizerKernels(KernelRegistry &registry);
void registerCollectiveKernels(KernelRegistry &registry);
void registerMoveKernels(KernelRegistry &registry);
void registerFusedElementwiseKernels(KernelRegistry &registry);

/// Wraps the kernels of kNarrowFloatOps (NarrowOperands.h; registered
/// first): bf16 / fp16 views are widened to f32, the f32 kernel runs, and
/// narrow results are rounded once.
void registerNarrowFloatOperands(KernelRegistry &registry);

} // namespace strata::runtime::cpu

#endif // STRATA_RUNTIME_CPU_CPUKERNELS_H
