//===- ArrayDataTest.cpp - Dataset folders of .npy arrays -----------------===//
//
// The sampling rule of docs/data.md pinned by numbers computed independently
// (Python, integers masked to 64 bits), the exact conversions and the
// refusals of lossy ones, and the file name of an input.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"
#include "TestArtifacts.h"

#include "strata/Runtime/DataLoader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace strata;
using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

/// Writes a version 1 .npy file of dtype `descr` holding `values`.
template <typename T>
void writeNpy(const std::string &path, const std::string &descr,
              const std::vector<int64_t> &shape, const std::vector<T> &values) {
  std::string dims;
  for (int64_t d : shape)
    dims += std::to_string(d) + ", ";
  std::string header = "{'descr': '" + descr +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64)
    header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  uint16_t length = uint16_t(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char *>(&length), 2);
  out << header;
  out.write(reinterpret_cast<const char *>(values.data()),
            std::streamsize(values.size() * sizeof(T)));
}

std::string openError(const std::string &dir, std::vector<LoaderInput> inputs) {
  std::unique_ptr<DataLoader> loader;
  Status s = DataLoader::arrays(dir, std::move(inputs), -100, 0, loader);
  return s.isOk() ? "" : s.message();
}

} // namespace

TEST(ArrayDataTest, FileNamesEscapeOddCharacters) {
  EXPECT_EQ(datasetFileName("input_ids"), "input_ids.npy");
  EXPECT_EQ(datasetFileName("x:0"), "x%3A0.npy");
  EXPECT_EQ(datasetFileName("a/b c"), "a%2Fb%20c.npy");
  EXPECT_EQ(datasetFileName("pixel-values.1"), "pixel-values.1.npy");
  EXPECT_EQ(datasetFileName("\xC3\xBC~"), "%C3%BC%7E.npy");
}

// N = 100 rows, seed 7: row_k = splitmix64(splitmix64(7) ^ k) mod 100 is
// 21, 15, 81, 93, 34, 30, 93, 4, 84, 82, 33, 31 for k = 0..11.
TEST(ArrayDataTest, RowsFollowTheSamplingRule) {
  TempDir dir;
  const int64_t rows[] = {21, 15, 81, 93, 34, 30, 93, 4, 84, 82, 33, 31};
  // Sample i: x = (i, i + 0.5) as uint16 and float64, the label i % 10.
  std::vector<uint16_t> ids;
  std::vector<double> x;
  std::vector<int32_t> labels;
  for (int i = 0; i < 100; ++i) {
    ids.push_back(uint16_t(i));
    ids.push_back(uint16_t(i + 1000));
    x.push_back(i);
    x.push_back(i + 0.5);
    labels.push_back(i % 10);
  }
  writeNpy(dir / "ids.npy", "<u2", {100, 2}, ids);
  writeNpy(dir / "x.npy", "<f8", {100, 2}, x);
  writeNpy(dir / "labels.npy", "<i4", {100}, labels);
  // Rank 1 of 2 at B = 2: k = ((s * A + m) * 2 + 1) * 2 + b.
  OwnedTensor tIds(DType::I64, {2, 2}), tX(DType::F32, {2, 2}),
      tLabels(DType::I64, {2});
  std::unique_ptr<DataLoader> loader;
  Status s = DataLoader::arrays(dir.path(),
                                {{"ids", &tIds.view(), 2000},
                                 {"x", &tX.view(), 2},
                                 {"labels", &tLabels.view(), 10}},
                                -100, 7, loader, /*rank=*/1, /*world=*/2);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_FALSE(loader->countsTokens());
  EXPECT_EQ(loader->itemsPerMicroStep(), 2);
  // (step 0, micro 0, accum 1): k = 2, 3; (step 1, micro 0, accum 2): k = 10,
  // 11; (step 0, micro 1, accum 2): k = 6, 7.
  struct Case {
    uint64_t step;
    uint32_t micro, accum;
    int firstK;
  } cases[] = {{0, 0, 1, 2}, {1, 0, 2, 10}, {0, 1, 2, 6}};
  for (const Case &c : cases) {
    ASSERT_TRUE(loader->fill(c.step, c.micro, c.accum).isOk());
    for (int b = 0; b < 2; ++b) {
      int64_t row = rows[c.firstK + b];
      EXPECT_EQ(tIds.view().as<int64_t>()[2 * b], row);
      EXPECT_EQ(tIds.view().as<int64_t>()[2 * b + 1], row + 1000);
      EXPECT_EQ(tX.view().as<float>()[2 * b], float(row));
      EXPECT_EQ(tX.view().as<float>()[2 * b + 1], float(row) + 0.5f);
      EXPECT_EQ(tLabels.view().as<int64_t>()[b], row % 10);
    }
  }
}

TEST(ArrayDataTest, LossyConversionsAreRefused) {
  TempDir dir;
  OwnedTensor x(DType::F32, {1, 1}), n(DType::I32, {1, 1});
  // A float64 that float32 rounds.
  writeNpy(dir / "x.npy", "<f8", {2, 1}, std::vector<double>{1.0, 0.1});
  EXPECT_EQ(openError(dir.path(), {{"x", &x.view()}}),
            "'" + dir / "x.npy" +
                "' (<f8) holds 0.10000000000000001 at sample 1, which input 'x' "
                "(float32) cannot hold exactly");
  // An int64 past float32's 24-bit mantissa; 2^25 itself is exact.
  writeNpy(dir / "x.npy", "<i8", {2, 1},
           std::vector<int64_t>{1 << 25, (1 << 24) + 1});
  EXPECT_EQ(openError(dir.path(), {{"x", &x.view()}}),
            "'" + dir / "x.npy" +
                "' (<i8) holds 16777217 at sample 1, which input 'x' "
                "(float32) cannot hold exactly");
  // Into float64: 2^60 is exact, INT64_MAX rounds (to 2^63, no int64).
  OwnedTensor wide(DType::F64, {1, 1});
  writeNpy(dir / "x.npy", "<i8", {2, 1},
           std::vector<int64_t>{1ll << 60, INT64_MAX});
  EXPECT_EQ(openError(dir.path(), {{"x", &wide.view()}}),
            "'" + dir / "x.npy" +
                "' (<i8) holds 9223372036854775807 at sample 1, which input "
                "'x' (float64) cannot hold exactly");
  // An int64 outside int32; floats into an integer input (x.npy, which
  // would feed nothing, out of the way).
  std::filesystem::remove(dir / "x.npy");
  writeNpy(dir / "n.npy", "<i8", {1, 1}, std::vector<int64_t>{1ll << 40});
  EXPECT_EQ(openError(dir.path(), {{"n", &n.view()}}),
            "'" + dir / "n.npy" +
                "' (<i8) holds 1099511627776 at sample 0, which input 'n' "
                "(int32) cannot hold exactly");
  writeNpy(dir / "n.npy", "<f4", {1, 1}, std::vector<float>{1.0f});
  EXPECT_EQ(openError(dir.path(), {{"n", &n.view()}}),
            "'" + dir / "n.npy" +
                "' (<f4) holds floats; input 'n' (int32) takes integers: "
                "convert it with astype");
  // Exact ones pass: float16 and int64 within range.
  writeNpy(dir / "x.npy", "<f2", {1, 1}, std::vector<uint16_t>{0x3C00});
  writeNpy(dir / "n.npy", "<i8", {1, 1}, std::vector<int64_t>{-7});
  std::unique_ptr<DataLoader> loader;
  ASSERT_TRUE(DataLoader::arrays(dir.path(), {{"x", &x.view()}, {"n", &n.view()}},
                                 -100, 0, loader)
                  .isOk());
  ASSERT_TRUE(loader->fill(0, 0, 1).isOk());
  EXPECT_EQ(x.view().as<float>()[0], 1.0f);
  EXPECT_EQ(n.view().as<int32_t>()[0], -7);
}

TEST(ArrayDataTest, LabelsOutsideTheClassesAreRefusedButIgnoredOnesPass) {
  TempDir dir;
  OwnedTensor labels(DType::I64, {2});
  writeNpy(dir / "labels.npy", "<i8", {3}, std::vector<int64_t>{0, -100, 9});
  EXPECT_EQ(openError(dir.path(), {{"labels", &labels.view(), 10}}), "");
  writeNpy(dir / "labels.npy", "<i8", {3}, std::vector<int64_t>{0, 10, 9});
  EXPECT_EQ(openError(dir.path(), {{"labels", &labels.view(), 10}}),
            "'" + dir / "labels.npy" +
                "' holds the label 10 at sample 1, outside the model's 10 "
                "classes [0, 10) (ignored: -100)");
}
