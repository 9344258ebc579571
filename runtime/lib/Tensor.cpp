//===- Tensor.cpp - Non-owning views of runtime tensors -------------------===//

#include "strata/Runtime/Tensor.h"

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

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

} // namespace strata::runtime
