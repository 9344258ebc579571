//===- Grid.cpp - Kernel grids as fibers, for the CUDA emulation -----------===//
//
// Runs a kernel grid on the host: one block at a time, each CUDA thread of the
// block a fiber (ucontext) on the calling thread. A fiber runs until it
// finishes or reaches a barrier; when every unfinished thread of the block
// waits at __syncthreads (or every unfinished lane of a warp at __syncwarp),
// they go on. Threads that have returned count as arrived, as on the GPU. A
// block whose threads wait at barriers that can never all be reached is a
// deadlock: reported as a launch failure instead of hanging.
//
// Dynamic shared memory is filled with 0xff bytes (NaN in every float type)
// before each block, as a GPU leaves whatever the previous block wrote.
//
//===----------------------------------------------------------------------===//

#include "Emulation.h"

#include <cuda_runtime.h>

#include <sys/mman.h>
#include <ucontext.h>

#include <cstdio>
#include <string>
#include <vector>

dim3 threadIdx;
dim3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace strata::cuda_emulation {
namespace {

/// Each CUDA thread's stack: the kernels keep small arrays there (the fused
/// kernel's values, the emulated tensor-core fragments of 1 KiB each).
constexpr size_t kStackBytes = 512 * 1024;
constexpr int kMaxThreads = 1024;

enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, Done };

struct Fiber {
  ucontext_t context;
  State state = State::Done;
  int linear = 0;
  void *stack = nullptr;
};

struct BlockRunner {
  ucontext_t scheduler;
  std::vector<Fiber> fibers;
  Fiber *current = nullptr;
  const std::function<void()> *thread = nullptr;
  std::vector<unsigned char> dynamicShared;
  uint64_t exchange[kMaxThreads] = {};

  BlockRunner() : fibers(kMaxThreads) {}
  ~BlockRunner() {
    for (Fiber &f : fibers)
      if (f.stack)
        munmap(f.stack, kStackBytes);
  }

  /// Leaves the running fiber for the scheduler, in `state`.
  void yield(State state) {
    Fiber *self = current;
    self->state = state;
    swapcontext(&self->context, &scheduler);
  }

  void resume(Fiber &f, const dim3 &block) {
    threadIdx = dim3(unsigned(f.linear % block.x),
                     unsigned(f.linear / block.x % block.y),
                     unsigned(f.linear / (block.x * block.y)));
    current = &f;
    f.state = State::Runnable;
    swapcontext(&scheduler, &f.context);
    current = nullptr;
  }

  static void entry(unsigned high, unsigned low);

  /// Runs one block of `count` threads; false on a barrier deadlock.
  bool runBlock(int count, const dim3 &block, std::string &why);
};

BlockRunner &runner() {
  static BlockRunner r;
  return r;
}

void BlockRunner::entry(unsigned high, unsigned low) {
  auto *self = reinterpret_cast<BlockRunner *>((uint64_t(high) << 32) | low);
  (*self->thread)();
  self->yield(State::Done);
}

bool BlockRunner::runBlock(int count, const dim3 &block, std::string &why) {
  auto address = reinterpret_cast<uint64_t>(this);
  for (int t = 0; t < count; ++t) {
    Fiber &f = fibers[size_t(t)];
    if (!f.stack) {
      f.stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (f.stack == MAP_FAILED) {
        f.stack = nullptr;
        why = "cannot map a fiber stack";
        return false;
      }
    }
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, reinterpret_cast<void (*)()>(&BlockRunner::entry),
                2, unsigned(address >> 32), unsigned(address & 0xffffffffu));
    f.linear = t;
    f.state = State::Runnable;
  }
  int live = count;
  while (live > 0) {
    for (int t = 0; t < count; ++t) {
      Fiber &f = fibers[size_t(t)];
      if (f.state != State::Runnable)
        continue;
      resume(f, block);
      if (f.state == State::Done)
        --live;
    }
    if (live == 0)
      break;
    // Every unfinished thread waits. Warps whose every unfinished lane is at
    // __syncwarp go on; else, if every unfinished thread is at
    // __syncthreads, the block goes on.
    bool released = false;
    for (int w = 0; w * 32 < count; ++w) {
      int end = std::min(count, (w + 1) * 32), waiting = 0, done = 0;
      for (int t = w * 32; t < end; ++t) {
        State s = fibers[size_t(t)].state;
        waiting += s == State::AtWarpBarrier;
        done += s == State::Done;
      }
      if (waiting > 0 && waiting + done == end - w * 32) {
        for (int t = w * 32; t < end; ++t)
          if (fibers[size_t(t)].state == State::AtWarpBarrier)
            fibers[size_t(t)].state = State::Runnable;
        released = true;
      }
    }
    if (released)
      continue;
    int atBlock = 0;
    for (int t = 0; t < count; ++t)
      atBlock += fibers[size_t(t)].state == State::AtBlockBarrier;
    if (atBlock == live) {
      for (int t = 0; t < count; ++t)
        if (fibers[size_t(t)].state == State::AtBlockBarrier)
          fibers[size_t(t)].state = State::Runnable;
      continue;
    }
    why = std::to_string(atBlock) + " of " + std::to_string(live) +
          " unfinished threads wait at __syncthreads, the others at "
          "__syncwarp with lanes that never come";
    return false;
  }
  return true;
}

} // namespace

void syncThreads() { runner().yield(State::AtBlockBarrier); }
void syncWarp() { runner().yield(State::AtWarpBarrier); }

uint64_t shuffleDown(uint64_t bits, unsigned delta, int width) {
  BlockRunner &r = runner();
  int linear = r.current->linear;
  r.exchange[linear] = bits;
  syncWarp();
  int lane = linear % 32, base = linear - lane;
  int segment = lane - lane % width;
  int from = lane + int(delta);
  uint64_t out = from < segment + width ? r.exchange[base + from] : bits;
  syncWarp();
  return out;
}

unsigned char *dynamicShared() { return runner().dynamicShared.data(); }

/// Runs a whole grid now (the stream's turn has come).
void runGrid(const LaunchConfig &config, const std::function<void()> &thread,
             const std::string &what) {
  BlockRunner &r = runner();
  const dim3 &g = config.grid, &b = config.block;
  int count = int(b.x * b.y * b.z);
  r.thread = &thread;
  r.dynamicShared.assign(config.sharedBytes + 16, 0xff);
  blockDim = b;
  gridDim = g;
  for (unsigned z = 0; z < g.z; ++z)
    for (unsigned y = 0; y < g.y; ++y)
      for (unsigned x = 0; x < g.x; ++x) {
        blockIdx = dim3(x, y, z);
        std::fill(r.dynamicShared.begin(), r.dynamicShared.end(), 0xff);
        std::string why;
        if (!r.runBlock(count, b, why)) {
          fail(cudaErrorLaunchFailure,
               what + ": block (" + std::to_string(x) + ", " +
                   std::to_string(y) + ", " + std::to_string(z) +
                   "): barrier deadlock: " + why);
          r.thread = nullptr;
          return;
        }
      }
  r.thread = nullptr;
}

} // namespace strata::cuda_emulation
