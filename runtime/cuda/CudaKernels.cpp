//===- CudaKernels.cpp - The CUDA backend's kernel registry ---------------===//

#include "CudaKernels.h"

#include <cstring>
#include <string>

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
    registerFusedElementwiseKernels(r);
    registerNarrowFloatOperands(r);
    return r;
  }();
  return registry;
}

} // namespace strata::runtime::cuda

extern "C" {

/// The ops the CUDA backend has kernels for, one per line, into `out` (of
/// `size` bytes); the bytes needed. Needs no GPU: strata-run's tests check
/// that every op the CPU backend runs has a CUDA kernel too.
__attribute__((visibility("default"))) size_t
strata_cuda_kernel_names(char *out, size_t size) {
  std::string names;
  for (const std::string &name : strata::runtime::cuda::getCudaKernels().names())
    names += name + "\n";
  if (out && size > names.size())
    std::memcpy(out, names.c_str(), names.size() + 1);
  return names.size() + 1;
}

} // extern "C"
