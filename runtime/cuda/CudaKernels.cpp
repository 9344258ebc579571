//===- CudaKernels.cpp - The CUDA backend's kernel registry ---------------===//

#include "CudaKernels.h"

namespace strata::runtime::cuda {

const KernelRegistry &getCudaKernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    registerElementwiseKernels(r);
    registerElementwiseGradKernels(r);
    registerShapeKernels(r);
    registerShapeGradKernels(r);
    registerReductionKernels(r);
    registerLinearAlgebraKernels(r);
    registerNormalizationKernels(r);
    registerAttentionKernels(r);
    registerLossKernels(r);
    registerDropoutKernels(r);
    registerConvolutionKernels(r);
    registerNeuralNetGradKernels(r);
    registerOptimizerKernels(r);
    registerMoveKernels(r);
    registerCollectiveKernels(r);
    return r;
  }();
  return registry;
}

} // namespace strata::runtime::cuda
