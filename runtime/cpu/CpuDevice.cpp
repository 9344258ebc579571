//===- CpuDevice.cpp - The CPU as a device --------------------------------===//
//
// Heap memory the host addresses directly, so nothing is staged, and kernels
// that run when called: the executor gives each schedule stream a thread.
//
//===----------------------------------------------------------------------===//

#include "HostBlock.h"

#include "strata/Runtime/Device.h"

#include <cstdlib>
#include <cstring>

namespace strata::runtime {
namespace {

class CpuDevice final : public Device {
public:
  explicit CpuDevice(const KernelRegistry &kernels) : kernels_(kernels) {}

  std::string_view getName() const override { return "cpu"; }
  std::string describe() const override { return "the CPU"; }
  const KernelRegistry &getKernels() const override { return kernels_; }

  Status allocate(MemoryKind kind, size_t bytes, void **out) override {
    return cpu::allocateHostBlock(kind, bytes, out);
  }
  void release(MemoryKind, void *block) override { std::free(block); }
  bool isHostAddressable() const override { return true; }
  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return Status::ok();
  }
  Status zero(void *dst, size_t bytes) override {
    std::memset(dst, 0, bytes);
    return Status::ok();
  }

private:
  const KernelRegistry &kernels_;
};

} // namespace

std::unique_ptr<Device> createCpuDevice(const KernelRegistry &kernels) {
  return std::make_unique<CpuDevice>(kernels);
}

std::unique_ptr<Device> createCpuDevice() {
  return createCpuDevice(getCpuKernels());
}

} // namespace strata::runtime
