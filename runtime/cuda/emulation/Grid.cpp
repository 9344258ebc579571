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
// On x86-64 a switch is a few instructions (fiberSwitch below: the callee-saved
// registers and the FP control words, no system call); elsewhere it is
// ucontext's swapcontext, which also saves the signal mask.
//
// Dynamic shared memory is filled with 0xff bytes (NaN in every float type)
// before each block, as a GPU leaves whatever the previous block wrote.
//
//===----------------------------------------------------------------------===//

#include "Emulation.h"

#include <cuda_runtime.h>

#include <sys/mman.h>
#include <ucontext.h>

#include <string>
#include <vector>

dim3 threadIdx;
dim3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace strata::cuda_emulation {
namespace {

#if defined(__x86_64__)
/// Saves the running context's stack pointer in *save and resumes the one
/// whose stack pointer is `next` (one that this function saved, or a new
/// fiber's stack prepared by startContext).
extern "C" void strataFiberSwitch(void **save, void *next);
asm(R"(
  .text
  .globl strataFiberSwitch
  .type strataFiberSwitch, @function
strataFiberSwitch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size strataFiberSwitch, .-strataFiberSwitch
)");

struct Context {
  void *sp = nullptr;
};

/// A new fiber's stack as strataFiberSwitch leaves a saved one: the control
/// words, six registers, then `entry` as the return address, entered with
/// the stack aligned as after a call.
void startContext(Context &c, void *stack, size_t bytes, void (*entry)()) {
  auto top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15);
  auto *sp = reinterpret_cast<uint64_t *>(top);
  *--sp = 0; // entry's return address: it never returns
  *--sp = reinterpret_cast<uint64_t>(entry);
  for (int r = 0; r < 6; ++r)
    *--sp = 0;
  uint32_t mxcsr;
  uint16_t fpucw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fpucw));
  *--sp = uint64_t(mxcsr) | (uint64_t(fpucw) << 32);
  c.sp = sp;
}
void switchContext(Context &from, Context &to) {
  strataFiberSwitch(&from.sp, to.sp);
}
#else
struct Context {
  ucontext_t u;
};
void startContext(Context &c, void *stack, size_t bytes, void (*entry)()) {
  getcontext(&c.u);
  c.u.uc_stack.ss_sp = stack;
  c.u.uc_stack.ss_size = bytes;
  c.u.uc_link = nullptr;
  makecontext(&c.u, entry, 0);
}
void switchContext(Context &from, Context &to) { swapcontext(&from.u, &to.u); }
#endif

/// Each CUDA thread's stack: the kernels keep small arrays there (the fused
/// kernel's values, the emulated tensor-core fragments of 1 KiB each).
constexpr size_t kStackBytes = 512 * 1024;
constexpr int kMaxThreads = 1024;

enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, Done };

struct Fiber {
  Context context;
  State state = State::Done;
  int linear = 0;
  void *stack = nullptr;
};

struct BlockRunner {
  Context scheduler;
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
    switchContext(self->context, scheduler);
  }

  void resume(Fiber &f, const dim3 &block) {
    threadIdx = dim3(unsigned(f.linear % block.x),
                     unsigned(f.linear / block.x % block.y),
                     unsigned(f.linear / (block.x * block.y)));
    current = &f;
    f.state = State::Runnable;
    switchContext(scheduler, f.context);
    current = nullptr;
  }

  static void entry();

  /// Runs one block of `count` threads; false on a barrier deadlock.
  bool runBlock(int count, const dim3 &block, std::string &why);
};

BlockRunner &runner() {
  static BlockRunner r;
  return r;
}

void BlockRunner::entry() {
  BlockRunner *self = &runner();
  (*self->thread)();
  self->yield(State::Done);
}

bool BlockRunner::runBlock(int count, const dim3 &block, std::string &why) {
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
    startContext(f.context, f.stack, kStackBytes, &BlockRunner::entry);
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
