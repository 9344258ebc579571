//===- CpuKernels.cpp - The CPU backend's kernel registry -----------------===//

#include "CpuKernels.h"

namespace strata::runtime {

const KernelRegistry &getCpuKernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    cpu::registerElementwiseKernels(r);
    return r;
  }();
  return registry;
}

} // namespace strata::runtime
