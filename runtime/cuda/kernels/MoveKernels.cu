//===- MoveKernels.cu - sched.reload / sched.offload on CUDA --------------===//
//
// Moves between the memory tiers, in stream order. A HOST tensor is pinned
// host memory: one cudaMemcpyAsync. An SSD tensor is a range of the
// executor's SSD file: the move goes through the stream's pinned bounce
// buffer a chunk at a time, the file read or write done by a host function
// enqueued on the same stream (cudaLaunchHostFunc), so it happens after
// the copies before it and before the ones after it without the host
// waiting. A failed read or write is reported by the next synchronize.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtils.cuh"

#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <memory>
#include <vector>

namespace strata::runtime::cuda {
namespace {

/// Bytes per SSD chunk: at most the bounce buffer every stream has.
constexpr size_t kChunk = size_t(8) << 20;

/// One chunk's file I/O, run by the stream on the host.
struct ChunkIo {
  int fd = -1;
  uint64_t fileOffset = 0;
  void *bounce = nullptr;
  size_t bytes = 0;
  bool write = false;
  HostWorkErrors *errors = nullptr;
};

void CUDART_CB runChunkIo(void *data) {
  auto *io = static_cast<ChunkIo *>(data);
  auto *p = static_cast<unsigned char *>(io->bounce);
  size_t done = 0;
  while (done < io->bytes) {
    ssize_t n = io->write ? ::pwrite(io->fd, p + done, io->bytes - done,
                                     off_t(io->fileOffset + done))
                          : ::pread(io->fd, p + done, io->bytes - done,
                                    off_t(io->fileOffset + done));
    if (n < 0 && errno == EINTR)
      continue; // a signal before any byte moved: try again
    if (n <= 0) {
      io->errors->add(std::string(io->write ? "sched.offload: writing"
                                            : "sched.reload: reading") +
                      " the SSD tier failed at byte " +
                      std::to_string(io->fileOffset + done));
      return;
    }
    done += size_t(n);
  }
}

Status checkMove(KernelContext &ctx, const std::string &op) {
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &in = ctx.inputs[0];
  const TensorView &out = ctx.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape)
    return Status::error(op + ": " + in.describe() + " and " +
                         out.describe() + " differ");
  if ((in.onSsd || out.onSsd) && ctx.ssdFile < 0)
    return Status::error(op + ": the tensor is on the SSD tier but the run "
                              "has no SSD file");
  return Status::ok();
}

/// The chunks of an SSD move, made at load.
Status prepareMove(KernelContext &ctx, std::shared_ptr<void> &prepared,
                   const std::string &op) {
  if (Status s = checkMove(ctx, op); !s)
    return s;
  const TensorView &ssd = ctx.inputs[0].onSsd ? ctx.inputs[0] : ctx.outputs[0];
  if (!ssd.onSsd)
    return Status::ok();
  auto chunks = std::make_shared<std::vector<ChunkIo>>();
  for (size_t at = 0, n = ssd.bytes(); at < n; at += kChunk) {
    ChunkIo io;
    io.fd = ctx.ssdFile;
    io.fileOffset = ssd.fileOffset + at;
    io.bytes = std::min(kChunk, n - at);
    io.write = ctx.outputs[0].onSsd;
    chunks->push_back(io);
  }
  prepared = chunks;
  return Status::ok();
}

Status move(KernelContext &ctx, const std::string &op, bool reload) {
  if (Status s = checkMove(ctx, op); !s)
    return s;
  const CudaStream &s = streamOf(ctx);
  const TensorView &in = ctx.inputs[0];
  TensorView &out = ctx.outputs[0];
  size_t bytes = in.bytes();
  if (bytes == 0)
    return Status::ok();
  if (!in.onSsd && !out.onSsd) {
    cudaMemcpyKind kind = in.onHost    ? cudaMemcpyHostToDevice
                          : out.onHost ? cudaMemcpyDeviceToHost
                                       : cudaMemcpyDeviceToDevice;
    return cudaStatus(cudaMemcpyAsync(out.data, in.data, bytes, kind, s.stream),
                      op);
  }
  auto *chunks = static_cast<std::vector<ChunkIo> *>(
      const_cast<void *>(ctx.prepared));
  if (!chunks)
    return Status::error(op + ": the SSD move was not prepared at load");
  if (s.bounceBytes < kChunk)
    return Status::error(op + ": the stream's bounce buffer is too small");
  auto *device = static_cast<unsigned char *>(reload ? out.data : in.data);
  size_t at = 0;
  for (ChunkIo &io : *chunks) {
    // The previous run of this instruction is done (a run ends with a
    // synchronize), so its chunks may be rewritten.
    io.bounce = s.bounce;
    io.errors = s.hostErrors;
    if (reload) {
      if (Status st = cudaStatus(cudaLaunchHostFunc(s.stream, runChunkIo, &io),
                                 op + ": cudaLaunchHostFunc");
          !st)
        return st;
      if (Status st = cudaStatus(cudaMemcpyAsync(device + at, s.bounce,
                                                 io.bytes,
                                                 cudaMemcpyHostToDevice,
                                                 s.stream),
                                 op);
          !st)
        return st;
    } else {
      if (Status st = cudaStatus(cudaMemcpyAsync(s.bounce, device + at,
                                                 io.bytes,
                                                 cudaMemcpyDeviceToHost,
                                                 s.stream),
                                 op);
          !st)
        return st;
      if (Status st = cudaStatus(cudaLaunchHostFunc(s.stream, runChunkIo, &io),
                                 op + ": cudaLaunchHostFunc");
          !st)
        return st;
    }
    at += io.bytes;
  }
  return Status::ok();
}

} // namespace

void registerMoveKernels(KernelRegistry &registry) {
  registry.add(
      "sched.reload",
      [](KernelContext &ctx) { return move(ctx, "sched.reload", true); },
      [](KernelContext &ctx, std::shared_ptr<void> &prepared) {
        return prepareMove(ctx, prepared, "sched.reload");
      });
  registry.add(
      "sched.offload",
      [](KernelContext &ctx) { return move(ctx, "sched.offload", false); },
      [](KernelContext &ctx, std::shared_ptr<void> &prepared) {
        return prepareMove(ctx, prepared, "sched.offload");
      });
}

} // namespace strata::runtime::cuda
