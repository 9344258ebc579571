//===- HostBlock.h - The CPU devices' memory blocks -------------*- C++ -*-===//
//
// Private to runtime/cpu: the zeroed, 256-byte aligned heap blocks both CPU
// devices (CpuDevice, QueueModelDevice) hand out as device and host memory.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CPU_HOSTBLOCK_H
#define STRATA_RUNTIME_CPU_HOSTBLOCK_H

#include "strata/Runtime/Device.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace strata::runtime::cpu {

inline Status allocateHostBlock(MemoryKind kind, size_t bytes, void **out) {
  constexpr size_t kAlignment = 256;
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0)
    rounded = kAlignment;
  *out = std::aligned_alloc(kAlignment, rounded);
  if (!*out)
    return Status::error("cannot allocate " + std::to_string(bytes) +
                         " bytes of " +
                         (kind == MemoryKind::Host ? "host" : "device") +
                         " memory");
  std::memset(*out, 0, rounded);
  return Status::ok();
}

} // namespace strata::runtime::cpu

#endif // STRATA_RUNTIME_CPU_HOSTBLOCK_H
