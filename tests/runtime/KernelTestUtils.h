//===- KernelTestUtils.h - Helpers for kernel tests -------------*- C++ -*-===//

#ifndef STRATA_RUNTIME_TESTS_KERNELTESTUTILS_H
#define STRATA_RUNTIME_TESTS_KERNELTESTUTILS_H

#include "strata/Runtime/Kernel.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace strata::runtime::testing {

/// A tensor that owns its bytes, for tests.
class OwnedTensor {
public:
  OwnedTensor(DType dtype, std::vector<int64_t> shape) {
    view_.dtype = dtype;
    view_.shape = std::move(shape);
    storage_.assign(view_.bytes() + 8, 0);
    view_.data = storage_.data();
  }
  template <typename T>
  static OwnedTensor of(DType dtype, std::vector<int64_t> shape,
                        std::vector<T> values) {
    OwnedTensor t(dtype, std::move(shape));
    EXPECT_EQ(static_cast<int64_t>(values.size()), t.view_.numel());
    std::memcpy(t.view_.data, values.data(), values.size() * sizeof(T));
    return t;
  }
  const TensorView &view() const { return view_; }
  TensorView &view() { return view_; }
  template <typename T> std::vector<T> values() const {
    const T *p = view_.as<T>();
    return std::vector<T>(p, p + view_.numel());
  }

private:
  std::vector<unsigned char> storage_;
  TensorView view_;
};

inline OwnedTensor f32(std::vector<int64_t> shape, std::vector<float> v) {
  return OwnedTensor::of<float>(DType::F32, std::move(shape), std::move(v));
}
inline OwnedTensor f64(std::vector<int64_t> shape, std::vector<double> v) {
  return OwnedTensor::of<double>(DType::F64, std::move(shape), std::move(v));
}
inline OwnedTensor i64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  return OwnedTensor::of<int64_t>(DType::I64, std::move(shape), std::move(v));
}
inline OwnedTensor i1(std::vector<int64_t> shape, std::vector<uint8_t> v) {
  return OwnedTensor::of<uint8_t>(DType::I1, std::move(shape), std::move(v));
}

/// Elementwise |got - want| <= atol + rtol * |want|.
template <typename T>
void expectClose(const std::vector<T> &got, const std::vector<T> &want,
                 double rtol, double atol = 0) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::fabs(double(want[i])))
        << "at " << i;
}

/// The attributes of graph.slice.
inline KernelAttrs sliceAttrs(std::vector<int64_t> offsets,
                              std::vector<int64_t> sizes,
                              std::vector<int64_t> strides) {
  KernelAttrs a;
  a.set("offsets", std::move(offsets));
  a.set("sizes", std::move(sizes));
  a.set("strides", std::move(strides));
  return a;
}

/// Runs the CPU kernel `op`; returns its status.
inline Status runCpuKernel(const std::string &op,
                           const std::vector<const OwnedTensor *> &inputs,
                           const std::vector<OwnedTensor *> &outputs,
                           const KernelAttrs &attrs = {}, uint64_t seed = 0) {
  const KernelFn *fn = getCpuKernels().lookup(op);
  if (!fn)
    return Status::error("no CPU kernel for " + op);
  std::vector<TensorView> in, out;
  for (const OwnedTensor *t : inputs)
    in.push_back(t->view());
  for (OwnedTensor *t : outputs)
    out.push_back(t->view());
  KernelContext ctx{in, out, attrs, seed};
  return (*fn)(ctx);
}

} // namespace strata::runtime::testing

#endif // STRATA_RUNTIME_TESTS_KERNELTESTUTILS_H
