//===- ShapeGradKernels.cu - ShapeGrad kernels on CUDA -------------------------------===//
//
// Not written yet: the family registers no kernel, so an artifact using one
// of its ops is refused at load ("no kernel for ... in this backend").
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

namespace strata::runtime::cuda {

void registerShapeGradKernels(KernelRegistry &registry) {}

} // namespace strata::runtime::cuda
