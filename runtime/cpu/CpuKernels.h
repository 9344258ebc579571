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

} // namespace strata::runtime::cpu

#endif // STRATA_RUNTIME_CPU_CPUKERNELS_H
