//===- CpuKernels.cpp - The CPU backend's kernel registry -----------------===//

#include "CpuKernels.h"

namespace strata::runtime {

const KernelRegistry &getCpuKernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    cpu::registerElementwiseKernels(r);
    cpu::registerShapeKernels(r);
    cpu::registerReductionKernels(r);
    cpu::registerLinearAlgebraKernels(r);
    cpu::registerNormalizationKernels(r);
    cpu::registerAttentionKernels(r);
    cpu::registerLossKernels(r);
    cpu::registerDropoutKernels(r);
    cpu::registerConvolutionKernels(r);
    cpu::registerElementwiseGradKernels(r);
    cpu::registerNeuralNetGradKernels(r);
    cpu::registerShapeGradKernels(r);
    cpu::registerOptimizerKernels(r);
    cpu::registerCollectiveKernels(r);
    cpu::registerMoveKernels(r);
    cpu::registerFusedElementwiseKernels(r);
    cpu::registerNarrowFloatOperands(r);
    return r;
  }();
  return registry;
}

} // namespace strata::runtime
