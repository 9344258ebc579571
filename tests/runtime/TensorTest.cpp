//===- TensorTest.cpp - Copies in and out of a view, whichever tier -------===//
//
// readViewBytes/writeViewBytes serve sched.reload, sched.offload, parameter
// loading and checkpoints alike: a view in memory is a memcpy, a view on the
// SSD tier a range of the SSD file at its own offset.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Tensor.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>
#include <unistd.h>

using namespace strata::runtime;

namespace {

TEST(TensorTest, MemoryViewIsAPlainCopy) {
  std::vector<float> storage(6, 0.0f), in(6), out(6, -1.0f);
  std::iota(in.begin(), in.end(), 1.0f);
  TensorView v;
  v.data = storage.data();
  v.shape = {2, 3};
  ASSERT_TRUE(writeViewBytes(v, /*ssdFile=*/-1, in.data()));
  EXPECT_EQ(storage, in);
  ASSERT_TRUE(readViewBytes(v, /*ssdFile=*/-1, out.data()));
  EXPECT_EQ(out, in);
}

TEST(TensorTest, SsdViewIsItsRangeOfTheFile) {
  FILE *file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  int fd = fileno(file);
  TensorView a, b;
  a.onSsd = b.onSsd = true;
  a.shape = {3};
  b.shape = {2, 2};
  a.fileOffset = 0;
  b.fileOffset = 64;
  std::vector<float> inA = {1, 2, 3}, inB = {4, 5, 6, 7};
  ASSERT_TRUE(writeViewBytes(b, fd, inB.data()));
  ASSERT_TRUE(writeViewBytes(a, fd, inA.data()));
  std::vector<float> outA(3), outB(4);
  ASSERT_TRUE(readViewBytes(b, fd, outB.data()));
  ASSERT_TRUE(readViewBytes(a, fd, outA.data()));
  EXPECT_EQ(outA, inA);
  EXPECT_EQ(outB, inB);
  // b's bytes are where its offset says.
  float third;
  ASSERT_EQ(::pread(fd, &third, sizeof third, 64 + 2 * sizeof(float)),
            ssize_t(sizeof third));
  EXPECT_EQ(third, 6.0f);
  std::fclose(file);
}

TEST(TensorTest, SsdFailuresAreReported) {
  TensorView v;
  v.onSsd = true;
  v.shape = {4};
  std::vector<float> buffer(4, 0.0f);
  EXPECT_FALSE(writeViewBytes(v, /*ssdFile=*/-1, buffer.data()));
  EXPECT_FALSE(readViewBytes(v, /*ssdFile=*/-1, buffer.data()));
  // Reading past the end of the file is a failure, not a short tensor.
  FILE *file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  v.fileOffset = 1 << 20;
  EXPECT_FALSE(readViewBytes(v, fileno(file), buffer.data()));
  std::fclose(file);
}

} // namespace
