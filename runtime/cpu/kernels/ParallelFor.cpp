//===- ParallelFor.cpp - The CPU kernels' thread pool ---------------------===//
//
// One pool per process for the kernels' loops and, split into blocks of
// rows, their GEMMs (OpenBLAS then runs on one thread). Its size is the
// thread count the user set:
// STRATA_NUM_THREADS, else OPENBLAS_NUM_THREADS, else OMP_NUM_THREADS,
// else the cores divided among the node's ranks (OMPI_COMM_WORLD_LOCAL_SIZE).
// The pool serves one loop at a time: a loop started while another runs
// (a second stream's kernel, a nested loop) runs on its caller's thread
// alone, so the cores are never oversubscribed by the pool.
//
// Every loop splits [0, n) into contiguous blocks and each block writes its
// own outputs: what a kernel computes does not depend on the thread count.
//
// A worker that finishes a loop watches for the next one for 50 us before
// it sleeps (STRATA_POOL_SPIN_US; not where the node's pools outnumber the
// cores): a step's loops come microseconds apart, and a sleeping worker
// wakes tens of microseconds after the caller has started alone. ResNet-18
// at two threads: 263.3 -> 255.0 ms a step (7 interleaved pairs,
// docs/performance.md).
//
//===----------------------------------------------------------------------===//

#include "kernels/KernelUtils.h"

#include "strata/Runtime/ScratchArena.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <new>
#include <thread>

// OpenBLAS's, where the BLAS is OpenBLAS (weak: another BLAS links too).
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace strata::runtime::cpu {
namespace {

/// The integer in environment variable `name` when it is one in [lo, hi];
/// `otherwise` when it is unset, empty, not a number or out of range.
long envInteger(const char *name, long lo, long hi, long otherwise) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return otherwise;
  char *end = nullptr;
  long n = std::strtol(v, &end, 10);
  return end && *end == '\0' && n >= lo && n <= hi ? n : otherwise;
}

int positiveEnv(const char *name) { return int(envInteger(name, 1, 4095, 0)); }

int chooseThreads() {
  for (const char *name :
       {"STRATA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"})
    if (int n = positiveEnv(name))
      return n;
  int cores = int(std::thread::hardware_concurrency());
  int ranks = positiveEnv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (ranks > 1)
    cores /= ranks;
  return cores > 0 ? cores : 1;
}

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// How long a worker of a pool of `threads` watches for the next loop
/// before it sleeps: STRATA_POOL_SPIN_US microseconds (0: sleep at once);
/// by default 50, or 0 where the node's ranks' pools together outnumber
/// the cores (a watching worker would take a core another thread needs).
std::chrono::nanoseconds spinTime(int threads) {
  if (long us = envInteger("STRATA_POOL_SPIN_US", 0, 100000, -1); us >= 0)
    return std::chrono::microseconds(us);
  int cores = int(std::thread::hardware_concurrency());
  int ranks = std::max(1, positiveEnv("OMPI_COMM_WORLD_LOCAL_SIZE"));
  return std::chrono::microseconds(threads * ranks <= cores ? 50 : 0);
}

class Pool {
public:
  // The pool lives until the process ends (pool() never destroys it): its
  // workers sleep on `wake_` between loops and exit with the process. It
  // may be made inside an instruction, while the executor's ScratchArena
  // serves operator new on this thread, so nothing of it comes from
  // operator new: the workers start with pthread_create, their arguments
  // from malloc.
  Pool() : size_(chooseThreads()), spin_(spinTime(size_)) {
    // The pool splits the GEMMs itself (gemmEx): OpenBLAS on one thread,
    // so that its own threads do not spin against the pool's, and so that
    // a product's rounding does not depend on how OpenBLAS would split it.
    if (openblas_set_num_threads)
      openblas_set_num_threads(1);
    auto *args = static_cast<Worker *>(std::malloc(sizeof(Worker) * size_));
    for (int i = 1; i < size_ && args; ++i) {
      args[i] = Worker{this, i};
      pthread_t thread;
      if (pthread_create(&thread, nullptr, &Pool::start, &args[i]) != 0) {
        size_ = i; // as many as started
        break;
      }
      pthread_detach(thread);
    }
    if (!args)
      size_ = 1;
  }

  int size() const { return size_; }

  /// Runs task(0) ... task(parts - 1) on the calling thread and whichever
  /// workers join; false (nothing run) if the pool is busy with another
  /// loop. Parts are claimed one at a time, so a worker the OS has not
  /// scheduled yet (a loaded machine) delays nothing: the caller takes
  /// the parts left, then waits only for parts a worker has started.
  bool run(int parts, const std::function<void(int)> &task) {
    bool expected = false;
    if (!busy_.compare_exchange_strong(expected, true,
                                       std::memory_order_acquire))
      return false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      parts_ = parts;
      next_.store(0, std::memory_order_relaxed);
      open_ = true;
      published_.store(++generation_, std::memory_order_release);
    }
    wake_.notify_all();
    inLoop() = true;
    for (int i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < parts;)
      runPart(callerArena(), task, i);
    inLoop() = false;
    {
      // Workers join under the mutex while the loop is open; after this
      // none does, and `active_` counts those inside.
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = false;
    }
    while (active_.load(std::memory_order_acquire) != 0)
      std::this_thread::yield();
    // A part that needed more scratch than any before: every arena grows
    // to it now, so a thread that took no part of this loop (a worker the
    // OS had not scheduled) does not grow in a later step.
    size_t demand = partDemand().load(std::memory_order_relaxed);
    if (demand > grownTo_)
      growAll(demand);
    busy_.store(false, std::memory_order_release);
    return true;
  }

  /// The arena a calling thread's parts take their scratch from.
  static ScratchArena &callerArena() {
    static thread_local ScratchArena arena;
    return arena;
  }

  /// The most scratch one part has needed, over every thread.
  static std::atomic<size_t> &partDemand() {
    static std::atomic<size_t> demand{0};
    return demand;
  }

  /// Runs part i with its scratch from `arena`, rewound after it: what an
  /// arena must hold is one part's need, whichever thread takes how many
  /// parts (the pool hands them out as threads come).
  static void runPart(ScratchArena &arena, const std::function<void(int)> &task,
                      int i) {
    arena.reserve(partDemand().load(std::memory_order_relaxed));
    {
      ScratchArena::Scope scope(arena);
      task(i);
    }
    size_t need = arena.highWater(),
           known = partDemand().load(std::memory_order_relaxed);
    while (need > known && !partDemand().compare_exchange_weak(
                               known, need, std::memory_order_relaxed))
      ;
  }

  /// Runs the parts one after another on this thread (the pool is busy).
  static void runSerially(int parts, const std::function<void(int)> &task) {
    for (int i = 0; i < parts; ++i)
      runPart(callerArena(), task, i);
  }

  static bool &inLoop() {
    static thread_local bool flag = false;
    return flag;
  }

private:
  /// Grows the caller's arena and every worker's to `demand`, waiting for
  /// each worker to have done so.
  void growAll(size_t demand) {
    ScratchArena &mine = callerArena();
    mine.reserve(demand);
    { ScratchArena::Scope grow(mine); }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      grown_ = 0;
      // A round with no loop: the workers grow and sleep.
      published_.store(++generation_, std::memory_order_release);
    }
    wake_.notify_all();
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (grown_ >= size_ - 1)
          break;
      }
      std::this_thread::yield();
    }
    grownTo_ = demand;
  }

  struct Worker {
    Pool *pool;
    int index;
  };

  static void *start(void *arg) {
    auto *w = static_cast<Worker *>(arg);
    w->pool->work(w->index);
    return nullptr;
  }

  void work(int) {
    inLoop() = true;
    // Each worker's own scratch arena: kernels' containers on this thread
    // cost no allocator calls after the first steps (ScratchArena.h).
    ScratchArena arena;
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)> *task;
      int parts;
      // A kernel's loops come back to back (a few microseconds apart, the
      // executor's next instruction or the kernel's next stage): watch for
      // the next one a while before sleeping, so the caller does not start
      // each loop alone while this thread wakes (a futex wake takes tens of
      // microseconds).
      if (spin_.count() > 0) {
        auto until = std::chrono::steady_clock::now() + spin_;
        for (int i = 0; published_.load(std::memory_order_acquire) == seen;
             ++i) {
          if ((i & 63) == 0 && std::chrono::steady_clock::now() > until)
            break;
          cpuRelax();
        }
      }
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        // Grow to what any part has needed, now rather than inside a later
        // step (ScratchArena.h: steps after the first allocate nothing).
        arena.reserve(partDemand().load(std::memory_order_relaxed));
        { ScratchArena::Scope grow(arena); }
        ++grown_;
        if (!open_)
          continue; // woke after the loop ended
        task = task_;
        parts = parts_;
        active_.fetch_add(1, std::memory_order_relaxed);
      }
      for (int i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < parts;)
        runPart(arena, *task, i);
      active_.fetch_sub(1, std::memory_order_release);
    }
  }

  int size_;
  /// How long a worker watches for the next loop before it sleeps (set
  /// before any worker starts).
  const std::chrono::nanoseconds spin_;
  std::mutex mutex_;
  std::condition_variable wake_;
  uint64_t generation_ = 0;
  /// generation_, readable without the mutex (workers watch it before
  /// sleeping).
  std::atomic<uint64_t> published_{0};
  const std::function<void(int)> *task_ = nullptr;
  int parts_ = 0;
  bool open_ = false;
  std::atomic<int> next_{0}, active_{0};
  /// Workers woken (and grown) since growAll's round began; under mutex_.
  int grown_ = 0;
  /// The part demand every worker's arena has grown to (growAll); read and
  /// written only by the thread holding busy_.
  size_t grownTo_ = 0;
  std::atomic<bool> busy_{false};
};

Pool &pool() {
  // Static storage, never destroyed (see Pool()).
  alignas(Pool) static unsigned char storage[sizeof(Pool)];
  static Pool *instance = ::new (storage) Pool;
  return *instance;
}

} // namespace

int kernelThreads() { return pool().size(); }

void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &body) {
  if (n <= 0)
    return;
  int64_t parts = grain > 0 ? (n + grain - 1) / grain : n;
  if (Pool::inLoop() || parts < 2) {
    body(0, n);
    return;
  }
  Pool &p = pool();
  if (p.size() < 2) {
    body(0, n);
    return;
  }
  // A few parts a thread: whoever is scheduled takes the next one.
  parts = std::min<int64_t>(parts, 4 * int64_t(p.size()));
  if (parts < 2) {
    body(0, n);
    return;
  }
  std::function<void(int)> task = [&](int part) {
    int64_t begin = n * part / parts, end = n * (part + 1) / parts;
    if (begin < end)
      body(begin, end);
  };
  if (!p.run(int(parts), task))
    Pool::runSerially(int(parts), task);
}

} // namespace strata::runtime::cpu
