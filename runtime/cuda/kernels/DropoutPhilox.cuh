//===- DropoutPhilox.cuh - The dropout mask's generator on CUDA -*- CUDA -*-===//
//
// Random123's philox4x32_R(10, ctr, key), bit for bit the CPU's
// (runtime/cpu/kernels/DropoutKernels.cpp): key = (low, high 32 bits of the
// seed), counter = (low, high 32 bits of the element index, 0, 0); element
// i is kept iff word 0 of the output / 2^32 >= ratio. Host and device, so
// graph.dropout and attention draw the CPU's masks (and the tensor-core
// attention's emulation in the unit tests does too).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_CUDA_KERNELS_DROPOUTPHILOX_CUH
#define STRATA_RUNTIME_CUDA_KERNELS_DROPOUTPHILOX_CUH

#include "strata/Runtime/HostDevice.h"

#include <cstdint>

namespace strata::runtime::cuda::philox {

/// Word 0 of philox4x32_10({index, index >> 32, 0, 0}, {seed, seed >> 32}).
STRATA_HOST_DEVICE inline uint32_t philoxWord0(uint64_t seed, uint64_t index) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(index);
  uint32_t c1 = static_cast<uint32_t>(index >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed);
  uint32_t k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n1 = static_cast<uint32_t>(p1);
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  return c0;
}

/// The keep bit of element `index` of random stream `seed` (the CPU's
/// dropoutKeeps): u = word 0 * 2^-32, exact in double.
STRATA_HOST_DEVICE inline bool dropoutKeeps(uint64_t seed, uint64_t index,
                                            double ratio) {
  double u = static_cast<double>(philoxWord0(seed, index)) * 0x1p-32;
  return u >= ratio;
}

} // namespace strata::runtime::cuda::philox

#endif // STRATA_RUNTIME_CUDA_KERNELS_DROPOUTPHILOX_CUH
