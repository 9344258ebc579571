//===- RuntimeEmulationTest.cpp - The CUDA emulation against CUDA's rules -===//
//
// The emulated runtime's streams, events, graphs and grids, each against
// what CUDA does: kernels see their block's barriers and warp exchanges,
// streams run lazily in the order events allow, graphs replay the arguments
// they captured and refuse what a capture refuses, bad launches and
// deadlocks are reported instead of run or hung.
//
//===----------------------------------------------------------------------===//

#include <cuda_runtime.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using strata::cuda_emulation::launch;

__global__ void fill(int *out, int value, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += int(gridDim.x * blockDim.x))
    out[i] = value;
}

/// A block sum through shared memory: wrong without the barriers.
__global__ void blockSum(const int *in, int *out) {
  __shared__ int partial[256];
  unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half)
      partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0)
    out[blockIdx.x] = partial[0];
}

__global__ void warpSum(const int *in, int *out) {
  int v = in[threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, unsigned(offset));
  if (threadIdx.x % 32 == 0)
    out[threadIdx.x / 32] = v;
}

__global__ void dynamicSharedKernel(int *out) {
  unsigned char *shared = strata::cuda_emulation::dynamicShared();
  if (threadIdx.x == 0)
    out[blockIdx.x] = shared[0]; // unwritten: whatever the GPU left
}

/// Thread 0 waits at __syncthreads, the others at __syncwarp: a deadlock.
__global__ void mismatchedBarriers() {
  if (threadIdx.x == 0)
    __syncthreads();
  else
    __syncwarp();
}

TEST(CudaEmulation, BlockBarriersOrderSharedMemory) {
  std::vector<int> in(4 * 256), out(4, 0);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = int(i % 7);
  launch(4, 256, 0, nullptr, blockSum)(in.data(), out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int b = 0; b < 4; ++b) {
    int expected = 0;
    for (int i = 0; i < 256; ++i)
      expected += in[size_t(b * 256 + i)];
    EXPECT_EQ(out[size_t(b)], expected) << "block " << b;
  }
}

TEST(CudaEmulation, WarpShuffleDown) {
  std::vector<int> in(64), out(2, 0);
  for (int i = 0; i < 64; ++i)
    in[size_t(i)] = i;
  launch(1, 64, 0, nullptr, warpSum)(in.data(), out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(out[0], 31 * 32 / 2);
  EXPECT_EQ(out[1], (32 + 63) * 32 / 2);
}

TEST(CudaEmulation, DynamicSharedMemoryStartsAsGarbage) {
  std::vector<int> out(2, 0);
  launch(2, 32, 64, nullptr, dynamicSharedKernel)(out.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(out[0], 0xff);
  EXPECT_EQ(out[1], 0xff);
}

TEST(CudaEmulation, LaunchesRunLazilyWithTheirArgumentsCopied) {
  std::vector<int> out(100, 0);
  int value = 7;
  launch(2, 32, 0, nullptr, fill)(out.data(), value, 100);
  value = 8;
  EXPECT_EQ(out[0], 0) << "ran before a synchronizing call";
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int v : out)
    EXPECT_EQ(v, 7);
}

TEST(CudaEmulation, BadLaunchesAreRefused) {
  std::vector<int> out(1, 0);
  launch(1, 2048, 0, nullptr, fill)(out.data(), 1, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  // Over 48 KiB of dynamic shared memory needs the kernel's opt-in.
  launch(1, 32, 64 * 1024, nullptr, dynamicSharedKernel)(out.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  ASSERT_EQ(cudaFuncSetAttribute(dynamicSharedKernel,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 64 * 1024),
            cudaSuccess);
  launch(1, 32, 64 * 1024, nullptr, dynamicSharedKernel)(out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(CudaEmulation, EventsOrderStreams) {
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
            cudaSuccess);
  std::vector<int> x(64, 0), y(64, 0);
  // b copies what a writes, after waiting for it; whatever order the
  // streams are taken in, y is a's value.
  ASSERT_EQ(cudaStreamWaitEvent(b, done, 0), cudaSuccess); // nothing recorded
  launch(1, 64, 0, a, fill)(x.data(), 5, 64);
  ASSERT_EQ(cudaEventRecord(done, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, done, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y.data(), x.data(), 64 * sizeof(int),
                            cudaMemcpyDeviceToDevice, b),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(y[63], 5);
  cudaEventDestroy(done);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
}

TEST(CudaEmulation, GraphsReplayWhatTheyCaptured) {
  cudaStream_t s, fork;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&fork, cudaStreamNonBlocking),
            cudaSuccess);
  cudaEvent_t forked, joined;
  cudaEventCreateWithFlags(&forked, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&joined, cudaEventDisableTiming);
  std::vector<int> x(32, 0), y(32, 0);
  int value = 3;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  launch(1, 32, 0, s, fill)(x.data(), value, 32);
  ASSERT_EQ(cudaEventRecord(forked, s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(fork, forked, 0), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(y.data(), x.data(), 32 * sizeof(int),
                            cudaMemcpyDeviceToDevice, fork),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(joined, fork), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s, joined, 0), cudaSuccess);
  // Synchronizing during a capture is refused (and spoils it) in CUDA.
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(x[0], 0) << "captured work ran";
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  value = 4; // the graph keeps 3
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(y[31], 3);
  cudaGraphExecDestroy(exec);
  cudaEventDestroy(forked);
  cudaEventDestroy(joined);
  cudaStreamDestroy(s);
  cudaStreamDestroy(fork);
}

TEST(CudaEmulation, CaptureRefusesWhatCudaRefuses) {
  cudaStream_t s, fork;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&fork, cudaStreamNonBlocking);
  cudaEvent_t forked, outside;
  cudaEventCreateWithFlags(&forked, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&outside, cudaEventDisableTiming);
  std::vector<int> x(32, 0);
  cudaGraph_t graph = nullptr;

  // A forked stream not joined back.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  cudaEventRecord(forked, s);
  cudaStreamWaitEvent(fork, forked, 0);
  launch(1, 32, 0, fork, fill)(x.data(), 1, 32);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureUnjoined);

  // Synchronizing during the capture.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph),
            cudaErrorStreamCaptureInvalidated);

  // Waiting for an event recorded before the capture.
  cudaEventRecord(outside, fork);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, outside, 0),
            cudaErrorStreamCaptureIsolation);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph),
            cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaEventDestroy(forked);
  cudaEventDestroy(outside);
  cudaStreamDestroy(s);
  cudaStreamDestroy(fork);
}

// Last: a deadlock's error is sticky, as a GPU's launch failure is.
TEST(CudaEmulation, ZBarrierDeadlockIsALaunchFailure) {
  launch(1, 64, 0, nullptr, mismatchedBarriers)();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
}

} // namespace
