//===- Conformance.cpp - CUDA kernels against the CPU's -------------------===//

#include "Conformance.h"

#include "strata/Runtime/Backend.h"
#include "strata/Runtime/NarrowFloat.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>

namespace strata::runtime::conformance {
namespace {

/// Host stand-ins of the narrow types: 16 bits, converted through f32.
struct Bf16Value {
  uint16_t bits = 0;
  Bf16Value() = default;
  explicit Bf16Value(double v) : bits(bf16Bits(float(v))) {}
  explicit operator double() const { return fromBf16Bits(bits); }
};
struct Fp16Value {
  uint16_t bits = 0;
  Fp16Value() = default;
  explicit Fp16Value(double v) : bits(fp16Bits(float(v))) {}
  explicit operator double() const { return fromFp16Bits(bits); }
};

template <typename Fn> void forEachType(DType t, Fn &&fn) {
  switch (t) {
  case DType::BF16: fn(Bf16Value{}); break;
  case DType::F16: fn(Fp16Value{}); break;
  case DType::F32: fn(float{}); break;
  case DType::F64: fn(double{}); break;
  case DType::I64: fn(int64_t{}); break;
  case DType::I32: fn(int32_t{}); break;
  case DType::I16: fn(int16_t{}); break;
  case DType::I8: fn(int8_t{}); break;
  case DType::I1: fn(uint8_t{}); break;
  default: ADD_FAILURE() << "conformance: no host type for " << name(t);
  }
}

double valueAt(const CaseTensor &t, int64_t i) {
  double v = 0;
  forEachType(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    T x;
    std::memcpy(&x, t.bytes.data() + i * sizeof(T), sizeof(T));
    v = double(x);
  });
  return v;
}

TensorView viewOf(const CaseTensor &t, void *data) {
  TensorView v;
  v.data = data;
  v.dtype = t.dtype;
  v.shape = t.shape;
  return v;
}

std::string describeCase(const Case &c) {
  std::ostringstream os;
  os << c.op << "(";
  for (size_t i = 0; i < c.inputs.size(); ++i)
    os << (i ? ", " : "") << viewOf(c.inputs[i], nullptr).describe();
  os << ") -> ";
  for (size_t i = 0; i < c.outputs.size(); ++i)
    os << (i ? ", " : "") << viewOf(c.outputs[i], nullptr).describe();
  return os.str();
}

int aliasOf(const Case &c, size_t output) {
  return output < c.aliases.size() ? c.aliases[output] : -1;
}


Status runCuda(Device &device, const Case &c,
               std::vector<std::vector<unsigned char>> &results) {
  // Every operand and result at 256-byte offsets in one block.
  auto align = [](size_t n) { return (n + 255) / 256 * 256; };
  std::vector<size_t> inOffsets, outOffsets;
  size_t total = 0;
  for (const CaseTensor &t : c.inputs) {
    inOffsets.push_back(total);
    total += align(std::max<size_t>(t.bytes.size(), 1));
  }
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    outOffsets.push_back(total);
    if (aliasOf(c, i) < 0)
      total += align(std::max<size_t>(c.outputs[i].bytes.size(), 1));
  }
  void *block = nullptr;
  if (Status s = device.allocate(MemoryKind::Device, total, &block); !s)
    return s;
  std::unique_ptr<void, std::function<void(void *)>> owner(
      block, [&](void *p) { device.release(MemoryKind::Device, p); });
  auto *base = static_cast<unsigned char *>(block);
  std::vector<TensorView> inViews, outViews;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    inViews.push_back(viewOf(c.inputs[i], base + inOffsets[i]));
    if (Status s = device.copyToDevice(base + inOffsets[i],
                                       c.inputs[i].bytes.data(),
                                       c.inputs[i].bytes.size());
        !s)
      return s;
  }
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    int alias = aliasOf(c, i);
    unsigned char *data = alias >= 0 ? base + inOffsets[alias]
                                     : base + outOffsets[i];
    outViews.push_back(viewOf(c.outputs[i], data));
    if (alias < 0)
      if (Status s = device.copyToDevice(data, c.outputs[i].bytes.data(),
                                         c.outputs[i].bytes.size());
          !s)
        return s;
  }
  const KernelRegistry &kernels = device.getKernels();
  const KernelFn *fn = kernels.lookup(c.op);
  if (!fn)
    return Status::error("the cuda backend has no kernel for " + c.op);
  KernelContext ctx{inViews, outViews, c.attrs, c.seed};
  std::shared_ptr<void> prepared;
  if (const PrepareFn *prepare = kernels.lookupPrepare(c.op)) {
    if (Status s = (*prepare)(ctx, prepared); !s)
      return s;
    ctx.prepared = prepared.get();
  }
  if (Status s = device.createQueues(1, 0); !s)
    return s;
  if (Status s = device.launch(0, *fn, ctx); !s)
    return s;
  if (Status s = device.synchronize(0); !s)
    return s;
  results.assign(c.outputs.size(), {});
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    results[i].resize(c.outputs[i].bytes.size());
    if (Status s = device.copyToHost(results[i].data(), outViews[i].data,
                                     results[i].size());
        !s)
      return s;
  }
  return Status::ok();
}

} // namespace

Status runOnCpu(const Case &c,
                std::vector<std::vector<unsigned char>> &results) {
  std::vector<std::vector<unsigned char>> in;
  for (const CaseTensor &t : c.inputs)
    in.push_back(t.bytes);
  results.clear();
  for (const CaseTensor &t : c.outputs)
    results.push_back(t.bytes);
  std::vector<TensorView> inViews, outViews;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    inViews.push_back(viewOf(c.inputs[i], in[i].data()));
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    int alias = aliasOf(c, i);
    outViews.push_back(viewOf(c.outputs[i], alias >= 0 ? in[alias].data()
                                                       : results[i].data()));
  }
  const KernelFn *fn = getCpuKernels().lookup(c.op);
  if (!fn)
    return Status::error("the cpu backend has no kernel for " + c.op);
  KernelContext ctx{inViews, outViews, c.attrs, c.seed};
  Status s = (*fn)(ctx);
  for (size_t i = 0; i < c.outputs.size(); ++i)
    if (int alias = aliasOf(c, i); alias >= 0)
      results[i] = in[alias];
  return s;
}

int64_t CaseTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

CaseTensor zeros(DType dtype, std::vector<int64_t> shape) {
  CaseTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.assign(size_t(t.numel()) * byteWidth(dtype), 0);
  return t;
}

CaseTensor fromValues(DType dtype, std::vector<int64_t> shape,
                      const std::vector<double> &values) {
  CaseTensor t = zeros(dtype, std::move(shape));
  EXPECT_EQ(int64_t(values.size()), t.numel()) << "conformance: fromValues";
  forEachType(dtype, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < values.size() && int64_t(i) < t.numel(); ++i) {
      T x = T(values[i]);
      std::memcpy(t.bytes.data() + i * sizeof(T), &x, sizeof(T));
    }
  });
  return t;
}

CaseTensor randomTensor(DType dtype, std::vector<int64_t> shape,
                        std::mt19937_64 &rng, double lo, double hi) {
  CaseTensor t = zeros(dtype, std::move(shape));
  std::vector<double> values(size_t(t.numel()));
  if (isFloat(dtype)) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (double &v : values)
      v = d(rng);
  } else if (dtype == DType::I1) {
    std::uniform_int_distribution<int> d(0, 1);
    for (double &v : values)
      v = d(rng);
  } else {
    std::uniform_int_distribution<int64_t> d(int64_t(lo),
                                             std::max(int64_t(lo),
                                                      int64_t(hi) - 1));
    for (double &v : values)
      v = double(d(rng));
  }
  return fromValues(dtype, t.shape, values);
}

Device *getCudaDevice(std::string &why) {
  static std::string failure;
  static std::unique_ptr<Device> device = [] {
    std::unique_ptr<Device> d;
    // A check of the cases themselves where there is no GPU: the CPU's
    // kernels through the queued device must agree with themselves, and
    // STRATA_CONFORMANCE_REJECTS lists the cases the CPU rejects (each
    // should be an error test).
    if (std::getenv("STRATA_CONFORMANCE_QUEUED"))
      return createQueueModelDevice(getCpuKernels());
    if (Status s = createCudaDevice(CudaDeviceOptions(), d); !s)
      failure = s.message();
    return d;
  }();
  why = failure;
  return device.get();
}

Status runOnCuda(const Case &c,
                 std::vector<std::vector<unsigned char>> &results) {
  std::string why;
  Device *device = getCudaDevice(why);
  if (!device)
    return Status::error(why);
  return runCuda(*device, c, results);
}

void expectConformance(const Case &c) {
  std::string why;
  Device *device = getCudaDevice(why);
  ASSERT_NE(device, nullptr) << why;
  std::string what = describeCase(c);
  std::vector<std::vector<unsigned char>> cpu, gpu;
  Status cpuStatus = runOnCpu(c, cpu);
  Status gpuStatus = runCuda(*device, c, gpu);
  if (!cpuStatus) {
    if (std::getenv("STRATA_CONFORMANCE_REJECTS"))
      std::printf("conformance: the cpu rejects %s: %s\n", what.c_str(),
                  cpuStatus.message().c_str());
    EXPECT_FALSE(gpuStatus.isOk())
        << what << ": the cpu kernel rejects it (" << cpuStatus.message()
        << ") but the cuda kernel ran";
    if (!gpuStatus)
      EXPECT_EQ(gpuStatus.message(), cpuStatus.message()) << what;
    return;
  }
  ASSERT_TRUE(gpuStatus.isOk()) << what << ": " << gpuStatus.message();
  for (size_t r = 0; r < c.outputs.size(); ++r) {
    CaseTensor expected = c.outputs[r], actual = c.outputs[r];
    expected.bytes = cpu[r];
    actual.bytes = gpu[r];
    int64_t bad = 0, firstBad = -1;
    double worst = 0;
    for (int64_t i = 0, n = expected.numel(); i < n; ++i) {
      double e = valueAt(expected, i), a = valueAt(actual, i);
      bool ok;
      if (std::isnan(e))
        ok = std::isnan(a);
      else if (!isFloat(expected.dtype))
        ok = a == e;
      else if (std::isinf(e))
        ok = a == e;
      else
        ok = std::fabs(a - e) <= c.atol + c.rtol * std::fabs(e);
      if (!ok) {
        if (firstBad < 0)
          firstBad = i;
        ++bad;
      }
      if (std::isfinite(e) && std::isfinite(a))
        worst = std::max(worst, std::fabs(a - e) / (c.atol + c.rtol * std::fabs(e)));
    }
    EXPECT_EQ(bad, 0) << what << ": result " << r << " differs at " << bad
                      << " of " << expected.numel() << " elements; first at "
                      << firstBad << ": cuda "
                      << (firstBad >= 0 ? valueAt(actual, firstBad) : 0.0)
                      << ", cpu "
                      << (firstBad >= 0 ? valueAt(expected, firstBad) : 0.0)
                      << " (worst error " << worst << " of the tolerance)";
  }
}

} // namespace strata::runtime::conformance
