//===- Tensor.h - Non-owning views of runtime tensors -----------*- C++ -*-===//

#ifndef STRATA_RUNTIME_TENSOR_H
#define STRATA_RUNTIME_TENSOR_H

#include "strata/Runtime/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata::runtime {

/// A dense, row-major tensor somewhere in memory the runtime owns. Kernels
/// read inputs and write outputs through views; they never allocate.
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// A tensor on the SSD tier has no memory (`data` is null): it lives at
  /// `fileOffset` in the executor's SSD file, and only sched.reload and
  /// sched.offload touch it.
  bool onSsd = false;
  uint64_t fileOffset = 0;
  /// A tensor on the HOST tier: `data` is host memory (pinned on CUDA) even
  /// where the device's memory is not host memory.
  bool onHost = false;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  size_t bytes() const { return static_cast<size_t>(numel()) * byteWidth(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
  /// "f32[8x64]"
  std::string describe() const;
};

/// Copies `v`'s bytes into `out`: from its memory, or on the SSD tier from
/// its range of `ssdFile` (positioned reads until every byte is in). False
/// when the file could not be read.
bool readViewBytes(const TensorView &v, int ssdFile, void *out);

/// Copies `in` into `v`'s bytes: its memory, or on the SSD tier its range of
/// `ssdFile`. False when the file could not be written.
bool writeViewBytes(const TensorView &v, int ssdFile, const void *in);

/// "[8x64]"
std::string shapeString(const std::vector<int64_t> &shape);

/// Row-major strides (in elements) of `shape`.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_TENSOR_H
