//===- BackendTest.cpp - What the CUDA backend library offers -------------===//
//
// Needs no GPU: the library's kernel registry is static, so where it is
// built this checks that every op the CPU backend runs has a CUDA kernel
// too (an artifact the CPU trains must load on a GPU).
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Backend.h"

#include <gtest/gtest.h>

#include <set>

using namespace strata::runtime;

TEST(BackendTest, EveryCpuKernelHasACudaKernel) {
  std::vector<std::string> cuda;
  Status s = listCudaKernels(cuda);
  if (!s && s.message().find("is not built") != std::string::npos)
    GTEST_SKIP() << s.message();
  ASSERT_TRUE(s.isOk()) << s.message();
  std::set<std::string> have(cuda.begin(), cuda.end());
  std::vector<std::string> missing;
  for (const std::string &op : getCpuKernels().names())
    if (!have.count(op))
      missing.push_back(op);
  EXPECT_TRUE(missing.empty())
      << "no CUDA kernel for " << ::testing::PrintToString(missing);
  EXPECT_GE(cuda.size(), getCpuKernels().names().size());
}

TEST(BackendTest, TheProbeSaysWhyThereIsNoCudaDevice) {
  std::string devices;
  Status s = probeCudaBackend(devices);
  if (s.isOk())
    GTEST_SKIP() << "a GPU is here: " << devices;
  EXPECT_EQ(s.message().rfind("cuda backend unavailable: ", 0), 0u)
      << s.message();
}
