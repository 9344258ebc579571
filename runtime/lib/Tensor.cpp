//===- Tensor.cpp - Non-owning views of runtime tensors -------------------===//

#include "strata/Runtime/Tensor.h"

#include <unistd.h>

#include <cstring>

namespace strata::runtime {

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += 'x';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string TensorView::describe() const {
  return std::string(name(dtype)) + shapeString(shape);
}

bool readViewBytes(const TensorView &v, int ssdFile, void *out) {
  if (!v.onSsd) {
    std::memcpy(out, v.data, v.bytes());
    return true;
  }
  for (size_t done = 0; done < v.bytes();) {
    ssize_t n = ::pread(ssdFile, static_cast<char *>(out) + done,
                        v.bytes() - done, off_t(v.fileOffset + done));
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

bool writeViewBytes(const TensorView &v, int ssdFile, const void *in) {
  if (!v.onSsd) {
    std::memcpy(v.data, in, v.bytes());
    return true;
  }
  for (size_t done = 0; done < v.bytes();) {
    ssize_t n = ::pwrite(ssdFile, static_cast<const char *>(in) + done,
                         v.bytes() - done, off_t(v.fileOffset + done));
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

} // namespace strata::runtime
