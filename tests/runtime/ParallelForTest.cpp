//===- ParallelForTest.cpp - The CPU kernels' thread pool -----------------===//

#include "kernels/KernelUtils.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
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

// A split product's blocks: about 1024 rows, at least 4 while each keeps
// 128, multiples of 16, and together exactly the extent.
TEST(GemmBlocks, BlockExtents) {
  EXPECT_EQ(gemmBlockExtent(2048), 512);
  EXPECT_EQ(gemmBlockExtent(8192), 1024);
  EXPECT_EQ(gemmBlockExtent(256), 128);
  EXPECT_EQ(gemmBlockExtent(1040), 272);
  for (int64_t extent = 256; extent <= 20000; extent += 37) {
    int64_t block = gemmBlockExtent(extent);
    int64_t blocks = (extent + block - 1) / block;
    EXPECT_EQ(block % 16, 0) << extent;
    EXPECT_LE(block, 1024 + 15) << extent;
    EXPECT_GE(blocks, std::min<int64_t>(4, extent / 128)) << extent;
    EXPECT_GT(extent - (blocks - 1) * block, 0) << extent; // no empty block
  }
}

// gemmEx over row blocks and over column blocks, every transposition,
// with a short last block, against the product written out.
TEST(GemmBlocks, SplitProductsEqualTheFormula) {
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape s : {Shape{1040, 48, 96}, Shape{40, 1300, 100}}) {
    for (bool transA : {false, true})
      for (bool transB : {false, true}) {
        std::vector<double> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n, 1.0);
        for (size_t i = 0; i < a.size(); ++i)
          a[i] = double(i % 13) - 6;
        for (size_t i = 0; i < b.size(); ++i)
          b[i] = double(i % 7) - 3;
        int64_t lda = transA ? s.m : s.k, ldb = transB ? s.k : s.n;
        gemmEx<double>(transA, transB, s.m, s.n, s.k, a.data(), lda, b.data(),
                       ldb, c.data(), s.n, /*accumulate=*/true);
        for (int64_t i = 0; i < s.m; ++i)
          for (int64_t j = 0; j < s.n; ++j) {
            double want = 1.0;
            for (int64_t p = 0; p < s.k; ++p)
              want += (transA ? a[p * lda + i] : a[i * lda + p]) *
                      (transB ? b[j * ldb + p] : b[p * ldb + j]);
            ASSERT_EQ(c[i * s.n + j], want)
                << s.m << "x" << s.n << "x" << s.k << " " << transA << transB
                << " at " << i << "," << j;
          }
      }
  }
}

} // namespace
