//===- device_radix_sort.cuh - CUB's radix sort, emulated -------*- C++ -*-===//
//
// Part of Strata's CUDA emulation (see ../../../Emulation.h): the one CUB call
// the cuda backend makes, DeviceRadixSort::SortPairs, as a stable sort of the
// keys' bits [beginBit, endBit) enqueued on the stream. Like CUB, a null
// temporary buffer asks for its size (here 1 byte; CUB's is larger, which is
// why callers ask).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_CUDA_EMULATION_CUB_DEVICE_RADIX_SORT_CUH
#define STRATA_CUDA_EMULATION_CUB_DEVICE_RADIX_SORT_CUH

#include "../../../Emulation.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  template <typename Key, typename Value>
  static cudaError_t SortPairs(void *temp, size_t &tempBytes,
                               const Key *keysIn, Key *keysOut,
                               const Value *valuesIn, Value *valuesOut,
                               int count, int beginBit = 0,
                               int endBit = int(sizeof(Key) * 8),
                               cudaStream_t stream = 0) {
    static_assert(std::is_unsigned_v<Key>, "emulated for unsigned keys");
    if (!temp) {
      tempBytes = 1;
      return cudaSuccess;
    }
    if (count < 0 || beginBit < 0 || endBit > int(sizeof(Key) * 8) ||
        beginBit > endBit)
      return cudaErrorInvalidValue;
    return strata::cuda_emulation::enqueue(
        stream,
        [=] {
          uint64_t width = uint64_t(endBit - beginBit);
          uint64_t mask = width >= 64 ? ~uint64_t(0) : (uint64_t(1) << width) - 1;
          auto bits = [&](Key k) { return (uint64_t(k) >> beginBit) & mask; };
          std::vector<int> order(static_cast<size_t>(count));
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
            return bits(keysIn[a]) < bits(keysIn[b]);
          });
          std::vector<Key> keys(static_cast<size_t>(count));
          std::vector<Value> values(static_cast<size_t>(count));
          for (int i = 0; i < count; ++i) {
            keys[size_t(i)] = keysIn[order[size_t(i)]];
            values[size_t(i)] = valuesIn[order[size_t(i)]];
          }
          std::copy(keys.begin(), keys.end(), keysOut);
          std::copy(values.begin(), values.end(), valuesOut);
        },
        "cub::DeviceRadixSort::SortPairs");
  }
};

} // namespace cub

#endif // STRATA_CUDA_EMULATION_CUB_DEVICE_RADIX_SORT_CUH
