//===- CudaDevice.cpp - A GPU as the executor's device --------------------===//
//
// Memory: one cudaMalloc block per executor for device memory (the page
// pool of the memory plan), cudaHostAlloc for host memory (pinned pages, so
// copies to and from it are asynchronous DMA). Queues: one non-blocking
// cudaStream_t per schedule stream, each with its own cuBLASLt workspace;
// events without timing. Stream 0 is the main stream: the executor joins
// every stream into it at the end of a program, and the blocking copies and
// fills (load, state I/O, zeroing gradients) go through it too, so they are
// ordered with the programs without a device-wide synchronize.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "CudaStream.h"

#include "strata/Runtime/Device.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime::cuda {
namespace {

class CudaDevice final : public Device {
public:
  ~CudaDevice() override {
    cudaSetDevice(ordinal_);
    for (auto &s : streams_) {
      if (s->stream)
        cudaStreamSynchronize(s->stream);
      if (s->workspace)
        cudaFree(s->workspace);
      if (s->bounce)
        cudaFreeHost(s->bounce);
      if (s->stream)
        cudaStreamDestroy(s->stream);
    }
    for (cudaEvent_t e : events_)
      cudaEventDestroy(e);
    if (lt_)
      cublasLtDestroy(lt_);
  }

  static Status create(const CudaDeviceOptions &options,
                       std::unique_ptr<CudaDevice> &out) {
    std::unique_ptr<CudaDevice> d(new CudaDevice());
    d->ordinal_ = options.ordinal;
    d->options_ = options;
    int count = 0;
    if (Status s = cudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
        !s)
      return s;
    if (options.ordinal < 0 || options.ordinal >= count)
      return Status::error("GPU " + std::to_string(options.ordinal) +
                           " does not exist (" + std::to_string(count) +
                           " visible)");
    if (Status s = cudaStatus(cudaSetDevice(options.ordinal), "cudaSetDevice");
        !s)
      return s;
    if (Status s = cudaStatus(
            cudaGetDeviceProperties(&d->properties_, options.ordinal),
            "cudaGetDeviceProperties");
        !s)
      return s;
    if (Status s = cublasStatus(cublasLtCreate(&d->lt_), "cublasLtCreate"); !s)
      return s;
    // Stream 0 exists from the start: the blocking copies go through it.
    if (Status s = d->addStreams(1); !s)
      return s;
    out = std::move(d);
    return Status::ok();
  }

  std::string_view getName() const override { return "cuda"; }
  std::string describe() const override {
    char line[512];
    std::snprintf(line, sizeof(line), "%s (GPU %d, compute %d.%d, %.1f GiB)",
                  properties_.name, ordinal_, properties_.major,
                  properties_.minor,
                  double(properties_.totalGlobalMem) / (1u << 30));
    return line;
  }
  const KernelRegistry &getKernels() const override { return getCudaKernels(); }

  Status allocate(MemoryKind kind, size_t bytes, void **out) override {
    cudaSetDevice(ordinal_);
    size_t n = bytes ? bytes : 256;
    if (kind == MemoryKind::Host) {
      if (Status s = cudaStatus(cudaHostAlloc(out, n, cudaHostAllocPortable),
                                "cannot allocate " + std::to_string(bytes) +
                                    " bytes of pinned host memory");
          !s)
        return s;
      std::memset(*out, 0, n);
      return Status::ok();
    }
    if (Status s = cudaStatus(cudaMalloc(out, n),
                              "cannot allocate " + std::to_string(bytes) +
                                  " bytes on " + describe());
        !s)
      return s;
    return zero(*out, n);
  }

  void release(MemoryKind kind, void *block) override {
    if (!block)
      return;
    cudaSetDevice(ordinal_);
    // Nothing queued may still use it.
    cudaStreamSynchronize(main());
    if (kind == MemoryKind::Host)
      cudaFreeHost(block);
    else
      cudaFree(block);
  }

  bool isHostAddressable() const override { return false; }

  Status copyToDevice(void *dst, const void *src, size_t bytes) override {
    return blockingCopy(dst, src, bytes, cudaMemcpyHostToDevice);
  }
  Status copyToHost(void *dst, const void *src, size_t bytes) override {
    return blockingCopy(dst, src, bytes, cudaMemcpyDeviceToHost);
  }
  Status zero(void *dst, size_t bytes) override {
    cudaSetDevice(ordinal_);
    // Ordered on the main stream before the next program; no wait needed.
    return cudaStatus(cudaMemsetAsync(dst, 0, bytes, main()), "cudaMemsetAsync");
  }

  bool isAsynchronous() const override { return true; }

  Status createQueues(uint32_t streams, uint32_t events) override {
    cudaSetDevice(ordinal_);
    if (streams > streams_.size())
      if (Status s = addStreams(streams - uint32_t(streams_.size())); !s)
        return s;
    while (events_.size() < events) {
      cudaEvent_t e;
      if (Status s = cudaStatus(
              cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
              "cudaEventCreateWithFlags");
          !s)
        return s;
      events_.push_back(e);
    }
    return Status::ok();
  }

  Status launch(uint32_t stream, const KernelFn &kernel,
                KernelContext &ctx) override {
    if (stream >= streams_.size())
      return Status::error("cuda: no stream " + std::to_string(stream));
    ctx.stream = streams_[stream].get();
    return kernel(ctx);
  }

  Status copyAsync(uint32_t stream, void *dst, const void *src, size_t bytes,
                   CopyKind kind) override {
    if (stream >= streams_.size())
      return Status::error("cuda: no stream " + std::to_string(stream));
    cudaMemcpyKind k = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                       : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                        : cudaMemcpyDeviceToDevice;
    return cudaStatus(
        cudaMemcpyAsync(dst, src, bytes, k, streams_[stream]->stream),
        "cudaMemcpyAsync");
  }

  Status record(uint32_t stream, uint32_t event) override {
    if (stream >= streams_.size() || event >= events_.size())
      return Status::error("cuda: no stream " + std::to_string(stream) +
                           " or event " + std::to_string(event));
    return cudaStatus(cudaEventRecord(events_[event], streams_[stream]->stream),
                      "cudaEventRecord");
  }

  Status wait(uint32_t stream, uint32_t event) override {
    if (stream >= streams_.size() || event >= events_.size())
      return Status::error("cuda: no stream " + std::to_string(stream) +
                           " or event " + std::to_string(event));
    return cudaStatus(
        cudaStreamWaitEvent(streams_[stream]->stream, events_[event], 0),
        "cudaStreamWaitEvent");
  }

  Status synchronize(uint32_t stream) override {
    if (stream >= streams_.size())
      return Status::error("cuda: no stream " + std::to_string(stream));
    if (Status s = cudaStatus(cudaStreamSynchronize(streams_[stream]->stream),
                              "a kernel on " + describe() + " failed");
        !s)
      return s;
    std::lock_guard<std::mutex> lock(hostErrors_.mutex);
    if (!hostErrors_.first.empty()) {
      std::string message = std::move(hostErrors_.first);
      hostErrors_.first.clear();
      return Status::error(message);
    }
    return Status::ok();
  }

private:
  CudaDevice() = default;

  cudaStream_t main() const { return streams_[0]->stream; }

  Status addStreams(uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) {
      auto s = std::make_unique<CudaStream>();
      s->lt = lt_;
      s->ordinal = ordinal_;
      s->multiProcessors = properties_.multiProcessorCount;
      s->tf32 = options_.tf32;
      if (Status st = cudaStatus(
              cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
          !st)
        return st;
      s->workspaceBytes = options_.workspaceBytes;
      if (s->workspaceBytes)
        if (Status st = cudaStatus(cudaMalloc(&s->workspace, s->workspaceBytes),
                                   "cannot allocate the cuBLASLt workspace");
            !st)
          return st;
      s->bounceBytes = kBounceBytes;
      if (Status st = cudaStatus(
              cudaHostAlloc(&s->bounce, s->bounceBytes, cudaHostAllocPortable),
              "cannot allocate the SSD tier's pinned bounce buffer");
          !st)
        return st;
      s->hostErrors = &hostErrors_;
      streams_.push_back(std::move(s));
    }
    return Status::ok();
  }

  Status blockingCopy(void *dst, const void *src, size_t bytes,
                      cudaMemcpyKind kind) {
    cudaSetDevice(ordinal_);
    if (Status s = cudaStatus(cudaMemcpyAsync(dst, src, bytes, kind, main()),
                              "cudaMemcpyAsync");
        !s)
      return s;
    return cudaStatus(cudaStreamSynchronize(main()), "a copy on " + describe());
  }

  /// Per stream: pinned memory for the SSD tier's chunks.
  static constexpr size_t kBounceBytes = size_t(8) << 20;

  int ordinal_ = 0;
  HostWorkErrors hostErrors_;
  CudaDeviceOptions options_;
  cudaDeviceProp properties_{};
  cublasLtHandle_t lt_ = nullptr;
  std::vector<std::unique_ptr<CudaStream>> streams_;
  std::vector<cudaEvent_t> events_;
};

} // namespace
} // namespace strata::runtime::cuda

extern "C" {

/// Device.h's CreateCudaDeviceFn.
__attribute__((visibility("default"))) int
strata_cuda_create_device(const strata::runtime::CudaDeviceOptions *options,
                          strata::runtime::Device **out, char *message,
                          size_t size) {
  using namespace strata::runtime;
  std::unique_ptr<cuda::CudaDevice> device;
  Status s = cuda::CudaDevice::create(*options, device);
  if (!s) {
    std::snprintf(message, size, "%s", s.message().c_str());
    return 1;
  }
  *out = device.release();
  return 0;
}

} // extern "C"
