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

#if STRATA_HAVE_NCCL
#include <nccl.h>
#endif

#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <array>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime::cuda {
namespace {

class CudaDevice final : public Device
#if STRATA_HAVE_NCCL
    , public DeviceCollectives
#endif
{
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
    for (auto &[peer, sends] : peerSends_) {
      if (sends.stream)
        cudaStreamSynchronize(sends.stream);
      for (SendBuffer &b : sends.buffers) {
        cudaFree(b.data);
        for (cudaEvent_t e : {b.copied, b.sent})
          if (e)
            cudaEventDestroy(e);
      }
      if (sends.stream)
        cudaStreamDestroy(sends.stream);
    }
    for (PendingReceive &r : receives_)
      cudaEventDestroy(r.done);
    for (cudaEvent_t e : events_)
      cudaEventDestroy(e);
    for (cudaEvent_t e : timers_)
      cudaEventDestroy(e);
#if STRATA_HAVE_NCCL
    for (void *c : collectives_)
      if (c)
        ncclCommDestroy(static_cast<ncclComm_t>(c));
#endif
    if (lt_)
      cublasLtDestroy(lt_);
  }

  static Status create(const CudaDeviceOptions &options,
                       std::unique_ptr<CudaDevice> &out) {
    std::unique_ptr<CudaDevice> d(new CudaDevice());
    int count = 0;
    if (Status s = cudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
        !s)
      return s;
    // The ordinal is the rank on its node; a launcher that gives each rank
    // its own GPU (srun --gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank)
    // leaves one visible, which is this rank's.
    int ordinal = count == 1 ? 0 : options.ordinal;
    if (ordinal < 0 || ordinal >= count)
      return Status::error("GPU " + std::to_string(ordinal) +
                           " does not exist (" + std::to_string(count) +
                           " visible; one GPU per rank on a node)");
    d->ordinal_ = ordinal;
    d->options_ = options;
    d->options_.ordinal = ordinal;
    if (Status s = cudaStatus(cudaSetDevice(ordinal), "cudaSetDevice"); !s)
      return s;
    if (Status s = cudaStatus(cudaGetDeviceProperties(&d->properties_, ordinal),
                              "cudaGetDeviceProperties");
        !s)
      return s;
    // Kernels without a narrow form widen bf16 / fp16 operands into
    // stream-ordered buffers (NarrowFloatKernels.cu): the pool keeps what
    // it has grown to rather than return it at every synchronize.
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, ordinal) == cudaSuccess) {
      uint64_t keep = UINT64_MAX;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
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
    // Zeroed for every stream, not only after the main stream's queue: the
    // block is zero when allocate returns (the device conformance suite
    // caught a copy on another stream racing an asynchronous memset here).
    if (Status s = zero(*out, n); !s)
      return s;
    return cudaStatus(cudaStreamSynchronize(main()), "zeroing a new block");
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
    // Nsight Systems shows each instruction's kernels under its name.
    if (ctx.description)
      nvtxRangePushA(ctx.description->c_str());
    Status s = kernel(ctx);
    if (ctx.description)
      nvtxRangePop();
    return s;
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
    if (Status s = waitFor(streams_[stream]->stream); !s)
      return s;
    std::lock_guard<std::mutex> lock(hostErrors_.mutex);
    if (!hostErrors_.first.empty()) {
      std::string message = std::move(hostErrors_.first);
      hostErrors_.first.clear();
      return Status::error(message);
    }
    return Status::ok();
  }

  Status createTimers(uint32_t markers) override {
    cudaSetDevice(ordinal_);
    while (timers_.size() < markers) {
      cudaEvent_t e;
      if (Status s = cudaStatus(cudaEventCreate(&e), "cudaEventCreate"); !s)
        return s;
      timers_.push_back(e);
    }
    return Status::ok();
  }
  Status markTime(uint32_t stream, uint32_t marker) override {
    if (stream >= streams_.size() || marker >= timers_.size())
      return Status::error("cuda: no stream " + std::to_string(stream) +
                           " or marker " + std::to_string(marker));
    return cudaStatus(cudaEventRecord(timers_[marker], streams_[stream]->stream),
                      "cudaEventRecord");
  }
  Status readTimes(uint32_t markers, std::vector<int64_t> &ns) override {
    if (markers > timers_.size())
      return Status::error("cuda: " + std::to_string(markers) + " markers, " +
                           std::to_string(timers_.size()) + " made");
    ns.assign(markers, 0);
    for (uint32_t m = 1; m < markers; ++m) {
      float ms = 0;
      if (Status s = cudaStatus(cudaEventElapsedTime(&ms, timers_[0], timers_[m]),
                                "cudaEventElapsedTime");
          !s)
        return s;
      ns[m] = int64_t(double(ms) * 1e6);
    }
    return Status::ok();
  }

  bool canCapture() const override { return true; }
  Status beginCapture(uint32_t stream) override {
    if (stream >= streams_.size())
      return Status::error("cuda: no stream " + std::to_string(stream));
    return cudaStatus(cudaStreamBeginCapture(streams_[stream]->stream,
                                             cudaStreamCaptureModeThreadLocal),
                      "cudaStreamBeginCapture");
  }
  Status endCapture(uint32_t stream, std::shared_ptr<void> &graph) override {
    if (stream >= streams_.size())
      return Status::error("cuda: no stream " + std::to_string(stream));
    cudaGraph_t captured = nullptr;
    if (Status s = cudaStatus(
            cudaStreamEndCapture(streams_[stream]->stream, &captured),
            "cudaStreamEndCapture");
        !s)
      return s;
    cudaGraphExec_t exec = nullptr;
    cudaError_t e = cudaGraphInstantiate(&exec, captured, 0);
    cudaGraphDestroy(captured);
    if (Status s = cudaStatus(e, "cudaGraphInstantiate"); !s)
      return s;
    graph = std::shared_ptr<void>(exec, [](void *p) {
      cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(p));
    });
    return Status::ok();
  }
  Status launchGraph(uint32_t stream, const void *graph) override {
    if (stream >= streams_.size())
      return Status::error("cuda: no stream " + std::to_string(stream));
    return cudaStatus(
        cudaGraphLaunch(static_cast<cudaGraphExec_t>(const_cast<void *>(graph)),
                        streams_[stream]->stream),
        "cudaGraphLaunch");
  }

#if STRATA_HAVE_NCCL
  DeviceCollectives *collectives() override { return this; }
  Status makeCollectiveId(std::string &id) override {
    ncclUniqueId unique;
    if (ncclResult_t r = ncclGetUniqueId(&unique); r != ncclSuccess)
      return Status::error(std::string("ncclGetUniqueId: ") +
                           ncclGetErrorString(r));
    id.assign(unique.internal, sizeof(unique.internal));
    return Status::ok();
  }
  Status joinCollectiveGroup(int group, int channel, const std::string &id,
                             int members, int index) override {
    if (group < 0 || group >= kGroups)
      return Status::error("cuda: no group kind " + std::to_string(group));
    if (channel < 0 || channel >= kCollectiveChannels)
      return Status::error("cuda: no channel " + std::to_string(channel));
    ncclUniqueId unique;
    if (id.size() != sizeof(unique.internal))
      return Status::error("cuda: a communicator id of " +
                           std::to_string(id.size()) + " bytes, not " +
                           std::to_string(sizeof(unique.internal)));
    std::memcpy(unique.internal, id.data(), id.size());
    cudaSetDevice(ordinal_);
    ncclComm_t comm;
    if (ncclResult_t r = ncclCommInitRank(&comm, members, unique, index);
        r != ncclSuccess)
      return Status::error(std::string("ncclCommInitRank (") +
                           std::to_string(members) + " ranks): " +
                           ncclGetErrorString(r));
    collectives_[size_t(channel * kGroups + group)] = comm;
    return Status::ok();
  }

  /// The communicator of every rank, for a transfer on `stream`.
  Status worldComm(uint32_t stream, const std::string &what,
                   ncclComm_t &world) {
    world = static_cast<ncclComm_t>(collectives_[size_t(Group::World)]);
    if (!world || stream >= streams_.size())
      return Status::error(what + ": no communicator over every rank");
    cudaSetDevice(ordinal_);
    return Status::ok();
  }

  Status sendToRank(uint32_t stream, const void *data, size_t bytes, int peer,
                    const std::string &what) override {
    ncclComm_t world;
    if (Status s = worldComm(stream, what, world); !s)
      return s;
    PeerSends &to = peerSends_[peer];
    if (!to.stream)
      if (Status s = cudaStatus(cudaStreamCreateWithFlags(
                                    &to.stream, cudaStreamNonBlocking),
                                "cudaStreamCreateWithFlags");
          !s)
        return s;
    // A copy the program may overwrite the tensor behind: the first
    // buffer whose last send has gone out, or a new one.
    SendBuffer *buffer = nullptr;
    for (SendBuffer &b : to.buffers)
      if (b.bytes >= bytes && cudaEventQuery(b.sent) == cudaSuccess) {
        buffer = &b;
        break;
      }
    if (!buffer) {
      SendBuffer &b = to.buffers.emplace_back();
      if (Status s = cudaStatus(cudaMalloc(&b.data, std::max<size_t>(bytes, 1)),
                                "cannot allocate a send buffer of " +
                                    std::to_string(bytes) + " bytes");
          !s)
        return s;
      b.bytes = bytes;
      for (cudaEvent_t *e : {&b.copied, &b.sent})
        if (Status s = cudaStatus(
                cudaEventCreateWithFlags(e, cudaEventDisableTiming),
                "cudaEventCreateWithFlags");
            !s)
          return s;
      buffer = &b;
    }
    cudaStream_t from = streams_[stream]->stream;
    if (Status s = cudaStatus(cudaMemcpyAsync(buffer->data, data, bytes,
                                              cudaMemcpyDeviceToDevice, from),
                              what + ": cudaMemcpyAsync");
        !s)
      return s;
    if (Status s = cudaStatus(cudaEventRecord(buffer->copied, from),
                              "cudaEventRecord");
        !s)
      return s;
    if (Status s = cudaStatus(cudaStreamWaitEvent(to.stream, buffer->copied, 0),
                              "cudaStreamWaitEvent");
        !s)
      return s;
    if (ncclResult_t r = ncclSend(buffer->data, bytes, ncclUint8, peer, world,
                                  to.stream);
        r != ncclSuccess)
      return Status::error(what + ": ncclSend: " + ncclGetErrorString(r));
    if (Status s = cudaStatus(cudaEventRecord(buffer->sent, to.stream),
                              "cudaEventRecord");
        !s)
      return s;
    // Start it now: a send never waits for this rank's later work. (On a
    // GPU the query only asks; the emulation runs queued work at a query.)
    cudaError_t e = cudaStreamQuery(to.stream);
    if (e != cudaSuccess && e != cudaErrorNotReady)
      return cudaStatus(e, what);
    return Status::ok();
  }

  Status recvFromRank(uint32_t stream, void *data, size_t bytes, int peer,
                      const std::string &what) override {
    ncclComm_t world;
    if (Status s = worldComm(stream, what, world); !s)
      return s;
    if (ncclResult_t r = ncclRecv(data, bytes, ncclUint8, peer, world,
                                  streams_[stream]->stream);
        r != ncclSuccess)
      return Status::error(what + ": ncclRecv: " + ncclGetErrorString(r));
    // Which receive a timed-out wait was stuck in.
    PendingReceive pending{nullptr, what};
    if (Status s = cudaStatus(
            cudaEventCreateWithFlags(&pending.done, cudaEventDisableTiming),
            "cudaEventCreateWithFlags");
        !s)
      return s;
    receives_.push_back(pending);
    return cudaStatus(cudaEventRecord(pending.done, streams_[stream]->stream),
                      "cudaEventRecord");
  }
#endif

private:
  CudaDevice() = default;

  /// Waits for a stream; with communicators, polls instead of blocking so
  /// a collective some rank never joins (or an NCCL error) ends the wait
  /// after the timeout, aborting the communicators, rather than hanging.
  Status waitFor(cudaStream_t stream) {
    bool anyCollectives = false;
    for (void *c : collectives_)
      anyCollectives |= c != nullptr;
    if (!anyCollectives)
      return cudaStatus(cudaStreamSynchronize(stream),
                        "a kernel on " + describe() + " failed");
    auto start = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) {
        // Stream 0 ends a program, after every stream joined it: its
        // receives are all done.
        if (stream == main()) {
          for (PendingReceive &r : receives_)
            cudaEventDestroy(r.done);
          receives_.clear();
        }
        return Status::ok();
      }
      if (e != cudaErrorNotReady)
        return cudaStatus(e, "a kernel on " + describe() + " failed");
#if STRATA_HAVE_NCCL
      for (void *c : collectives_) {
        if (!c)
          continue;
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(static_cast<ncclComm_t>(c), &async);
        if (async != ncclSuccess && async != ncclInProgress) {
          abortCollectives();
          return Status::error(std::string("NCCL: ") +
                               ncclGetErrorString(async) +
                               "; aborted this rank's communicators");
        }
      }
#endif
      double waited = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
      if (waited > options_.timeoutSeconds) {
        std::string stuck = oldestPendingReceive();
        abortCollectives();
        char line[512];
        std::snprintf(line, sizeof(line),
                      "the step did not complete within %g s on %s (%s); "
                      "aborted this rank's communicators",
                      options_.timeoutSeconds, properties_.name,
                      stuck.empty()
                          ? "a collective some rank never joined?"
                          : ("waiting for the " + stuck).c_str());
        return Status::error(line);
      }
      if (spins > 100)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  /// The first receive not yet complete ("" when none); forgets the
  /// complete ones.
  std::string oldestPendingReceive() {
    std::string stuck;
    while (!receives_.empty()) {
      PendingReceive &r = receives_.front();
      if (cudaEventQuery(r.done) != cudaSuccess) {
        stuck = r.what;
        break;
      }
      cudaEventDestroy(r.done);
      receives_.erase(receives_.begin());
    }
    return stuck;
  }

  void abortCollectives() {
#if STRATA_HAVE_NCCL
    for (void *&c : collectives_)
      if (c) {
        ncclCommAbort(static_cast<ncclComm_t>(c));
        c = nullptr;
      }
#endif
  }

  cudaStream_t main() const { return streams_[0]->stream; }

  Status addStreams(uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) {
      auto s = std::make_unique<CudaStream>();
      s->lt = lt_;
      s->ordinal = ordinal_;
      s->multiProcessors = properties_.multiProcessorCount;
      s->sharedPerBlockOptin = properties_.sharedMemPerBlockOptin;
      s->tf32 = options_.tf32;
      s->hostErrors = &hostErrors_;
      s->collectives = collectives_.data();
      if (Status st = cudaStatus(
              cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
          !st)
        return st;
      // Owned from here: a failed allocation below leaves it to the
      // destructor, with what was allocated.
      CudaStream &stream = *streams_.emplace_back(std::move(s));
      if (options_.workspaceBytes) {
        if (Status st =
                cudaStatus(cudaMalloc(&stream.workspace, options_.workspaceBytes),
                           "cannot allocate the cuBLASLt workspace");
            !st)
          return st;
        stream.workspaceBytes = options_.workspaceBytes;
      }
      if (Status st = cudaStatus(
              cudaHostAlloc(&stream.bounce, kBounceBytes, cudaHostAllocPortable),
              "cannot allocate the SSD tier's pinned bounce buffer");
          !st)
        return st;
      stream.bounceBytes = kBounceBytes;

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
  /// Timing events (--trace), one per marker.
  std::vector<cudaEvent_t> timers_;
  /// ncclComm_t by group kind (Topology.h's five).
  std::array<void *, kCollectiveChannels * kGroups> collectives_{};
  /// Pipeline stages: per peer rank, the stream its sends go out on and
  /// the copies they send (reused once sent).
  struct SendBuffer {
    void *data = nullptr;
    size_t bytes = 0;
    cudaEvent_t copied = nullptr, sent = nullptr;
  };
  struct PeerSends {
    cudaStream_t stream = nullptr;
    std::vector<SendBuffer> buffers;
  };
  std::map<int, PeerSends> peerSends_;
  /// Receives enqueued and not yet seen complete, oldest first.
  struct PendingReceive {
    cudaEvent_t done = nullptr;
    std::string what;
  };
  std::vector<PendingReceive> receives_;
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
  // No exception may cross the C boundary (std::bad_alloc from a vector,
  // say): it becomes the one-line message strata-run prints.
  try {
    std::unique_ptr<cuda::CudaDevice> device;
    Status s = cuda::CudaDevice::create(*options, device);
    if (!s) {
      std::snprintf(message, size, "%s", s.message().c_str());
      return 1;
    }
    *out = device.release();
    return 0;
  } catch (const std::exception &e) {
    std::snprintf(message, size, "creating the CUDA device: %s", e.what());
  } catch (...) {
    std::snprintf(message, size, "creating the CUDA device: unknown error");
  }
  return 1;
}

} // extern "C"
