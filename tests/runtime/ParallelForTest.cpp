//===- ParallelForTest.cpp - The CPU kernels' thread pool -----------------===//

#include "kernels/KernelUtils.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

using namespace strata::runtime::cpu;

namespace {

// Every index of [0, n) is visited exactly once, in at most 4 contiguous
// blocks a thread, whatever n and grain are.
TEST(ParallelFor, CoversEveryIndexOnce) {
  for (int64_t n : {0, 1, 2, 3, 7, 100, 4097}) {
    for (int64_t grain : {1, 2, 16, 5000}) {
      std::vector<std::atomic<int>> seen(n);
      std::atomic<int> blocks{0};
      parallelFor(n, grain, [&](int64_t begin, int64_t end) {
        EXPECT_LT(begin, end);
        blocks.fetch_add(1);
        for (int64_t i = begin; i < end; ++i)
          seen[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(seen[i].load(), 1) << "n " << n << " grain " << grain;
      EXPECT_LE(blocks.load(), 4 * std::max<int64_t>(1, kernelThreads()));
    }
  }
}

// A loop inside a loop runs on its caller's thread (no oversubscription,
// no deadlock on the pool).
TEST(ParallelFor, NestedLoopsRunInline) {
  std::atomic<int64_t> sum{0};
  parallelFor(4, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      std::thread::id outer = std::this_thread::get_id();
      parallelFor(100, 1, [&](int64_t b, int64_t e) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        sum.fetch_add(e - b);
      });
    }
  });
  EXPECT_EQ(sum.load(), 400);
}

// Loops started at once from several threads (streams) all complete: one
// gets the pool, the others run on their own threads.
TEST(ParallelFor, ConcurrentCallersComplete) {
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r)
        parallelFor(1000, 10, [&](int64_t b, int64_t e) {
          total.fetch_add(e - b);
        });
    });
  for (std::thread &t : callers)
    t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 1000);
}

} // namespace
