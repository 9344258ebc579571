//===- DataLoaderTest.cpp - The sampling rule of docs/training.md ---------===//
//
// Every expected number here was computed independently from the rule as
// docs/training.md writes it (Python, arbitrary-precision integers masked to
// 64 bits), so any drift of splitmix64, fnv1a64, the sample index or the
// value mapping breaks a test, and with it reproducibility of old runs.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtils.h"
#include "TestArtifacts.h"

#include "strata/Runtime/DataLoader.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace strata;
using namespace strata::runtime;
using namespace strata::runtime::testing;

namespace {

template <typename T>
std::string writeTokens(const std::string &path, const std::vector<T> &tokens) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * sizeof(T)));
  return path;
}

/// N tokens, token i = i % 251.
template <typename T> std::vector<T> countingTokens(size_t n) {
  std::vector<T> tokens(n);
  for (size_t i = 0; i < n; ++i)
    tokens[i] = static_cast<T>(i % 251);
  return tokens;
}

std::string tokenError(const std::string &path, const std::string &dtype,
                       std::vector<LoaderInput> inputs) {
  std::unique_ptr<DataLoader> loader;
  Status s = DataLoader::tokens(path, dtype, std::move(inputs), 0, loader);
  return s.isOk() ? "" : s.message();
}

} // namespace

TEST(DataLoaderTest, HashesArePinned) {
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(1), 0x910a2dec89025cc1ull);
  EXPECT_EQ(splitmix64(~0ull), 0xe4d971771b652c20ull);
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("labels", 6), 0x4bc513f856980a8aull);
  uint64_t five = 5;
  EXPECT_EQ(fnv1a64(&five, 8, 42), 0xb00a8aa901ee9c0full);
}

// x f32[2, 4] and labels i64[2, 3] (5 classes), seed 3, micro-step 1 of
// optimizer step 1 with accumulation 2: samples k = (1*2 + 1)*2 + b = 6, 7.
TEST(DataLoaderTest, SyntheticValuesArePinned) {
  OwnedTensor x(DType::F32, {2, 4}), labels(DType::I64, {2, 3});
  auto loader = DataLoader::synthetic(
      {{"x", &x.view(), 2}, {"labels", &labels.view(), 5}}, 3);
  ASSERT_TRUE(loader->fill(1, 1, 2).isOk());
  const double expectedX[] = {0.04487323760986328, -0.8688139915466309,
                              -0.6449041366577148, 0.5655767917633057,
                              0.24062001705169678, 0.03807485103607178,
                              -0.8554458618164062, 0.0007013082504272461};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(x.view().as<float>()[i], float(expectedX[i])) << i;
  const int64_t expectedLabels[] = {0, 0, 4, 4, 2, 2};
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(labels.view().as<int64_t>()[i], expectedLabels[i]) << i;
  EXPECT_FALSE(loader->countsTokens());
  EXPECT_EQ(loader->itemsPerMicroStep(), 2);
}

TEST(DataLoaderTest, SyntheticDTypesAndAccumulationSplit) {
  // f64 holds the exact value; i32 the same integers as i64.
  OwnedTensor x64(DType::F64, {2, 4}), labels32(DType::I32, {2, 3});
  auto loader = DataLoader::synthetic(
      {{"x", &x64.view(), 2}, {"labels", &labels32.view(), 5}}, 3);
  ASSERT_TRUE(loader->fill(1, 1, 2).isOk());
  EXPECT_EQ(x64.view().as<double>()[1], -0.8688139915466309);
  EXPECT_EQ(labels32.view().as<int32_t>()[2], 4);

  // A full batch of 4 at accumulation 1 sees exactly the samples of two
  // micro-batches of 2 at accumulation 2.
  OwnedTensor full(DType::F32, {4, 4}), half(DType::F32, {2, 4});
  auto fullLoader = DataLoader::synthetic({{"x", &full.view(), 2}}, 3);
  auto halfLoader = DataLoader::synthetic({{"x", &half.view(), 2}}, 3);
  ASSERT_TRUE(fullLoader->fill(5, 0, 1).isOk());
  for (uint32_t m = 0; m < 2; ++m) {
    ASSERT_TRUE(halfLoader->fill(5, m, 2).isOk());
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(half.view().as<float>()[i], full.view().as<float>()[m * 8 + i]);
  }
}

TEST(DataLoaderTest, SyntheticRejectsUnsupportedTypes) {
  OwnedTensor x(DType::F16, {2, 4});
  auto loader = DataLoader::synthetic({{"x", &x.view(), 2}}, 0);
  Status s = loader->fill(0, 0, 1);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "synthetic data: input 'x' has unsupported type f16[2x4]");
}

// N = 1000 tokens, T = 16, seed 7: start_k = splitmix64(splitmix64(7) ^ k)
// mod 984 is 117, 399, 853, 37, 978, 350 for k = 0..5.
TEST(DataLoaderTest, TokenWindowsArePinned) {
  TempDir dir;
  const int64_t starts[] = {117, 399, 853, 37, 978, 350};
  for (std::string dtype : {"uint8", "uint16", "uint32"}) {
    std::string path = dir / ("tokens." + dtype);
    if (dtype == "uint8")
      writeTokens(path, countingTokens<uint8_t>(1000));
    else if (dtype == "uint16")
      writeTokens(path, countingTokens<uint16_t>(1000));
    else
      writeTokens(path, countingTokens<uint32_t>(1000));
    OwnedTensor ids(DType::I64, {2, 16}), labels(DType::I32, {2, 16});
    std::unique_ptr<DataLoader> loader;
    Status s = DataLoader::tokens(path, dtype,
                                  {{"input_ids", &ids.view(), 256},
                                   {"labels", &labels.view(), 256}},
                                  7, loader);
    ASSERT_TRUE(s.isOk()) << s.message();
    EXPECT_TRUE(loader->countsTokens());
    EXPECT_EQ(loader->itemsPerMicroStep(), 32);
    // k = (step * accum + micro) * B + b: (0, 0, 1) reads k = 0, 1;
    // (1, 0, 2) k = 4, 5; (0, 1, 3) k = 2, 3; (2, 0, 1) k = 4, 5.
    struct Case {
      uint64_t step;
      uint32_t micro, accum;
      int firstK;
    } cases[] = {{0, 0, 1, 0}, {1, 0, 2, 4}, {0, 1, 3, 2}, {2, 0, 1, 4}};
    for (const Case &c : cases) {
      ASSERT_TRUE(loader->fill(c.step, c.micro, c.accum).isOk());
      for (int b = 0; b < 2; ++b)
        for (int t = 0; t < 16; ++t) {
          int64_t start = starts[c.firstK + b];
          EXPECT_EQ(ids.view().as<int64_t>()[b * 16 + t], (start + t) % 251)
              << dtype << " k=" << c.firstK + b << " t=" << t;
          EXPECT_EQ(labels.view().as<int32_t>()[b * 16 + t], (start + t + 1) % 251)
              << dtype << " k=" << c.firstK + b << " t=" << t;
        }
    }
  }
}

TEST(DataLoaderTest, TokenFileErrors) {
  TempDir dir;
  OwnedTensor ids(DType::I64, {2, 16}), labels(DType::I64, {2, 16});
  std::vector<LoaderInput> inputs = {{"input_ids", &ids.view(), 256},
                                     {"labels", &labels.view(), 256}};

  EXPECT_EQ(tokenError(dir / "missing.bin", "uint16", inputs),
            "cannot open data file '" + (dir / "missing.bin") +
                "': No such file or directory");

  // N <= T: not one window.
  std::string shortFile = writeTokens(dir / "short.bin",
                                      countingTokens<uint16_t>(16));
  EXPECT_EQ(tokenError(shortFile, "uint16", inputs),
            "'" + shortFile +
                "' holds 16 tokens, fewer than one sequence of 17");
  std::string justEnough = writeTokens(dir / "17.bin",
                                       countingTokens<uint16_t>(17));
  EXPECT_EQ(tokenError(justEnough, "uint16", inputs), "");

  // 33 bytes are not whole uint16 (or uint32) tokens.
  std::string odd = writeTokens(dir / "odd.bin", countingTokens<uint8_t>(33));
  EXPECT_EQ(tokenError(odd, "uint16", inputs),
            "'" + odd + "' has 33 bytes, not a whole number of uint16 tokens");
  EXPECT_EQ(tokenError(odd, "uint32", inputs),
            "'" + odd + "' has 33 bytes, not a whole number of uint32 tokens");
  EXPECT_EQ(tokenError(odd, "int16", inputs),
            "--data-dtype must be uint8, uint16 or uint32, not 'int16'");
}

TEST(DataLoaderTest, TokenOutsideTheVocabularyIsFoundBeforeTraining) {
  // Every token is checked when the file is opened, naming its position
  // and byte offset: not at whichever step first samples it (if any does).
  TempDir dir;
  std::vector<uint16_t> tokens = countingTokens<uint16_t>(400);
  for (uint16_t &t : tokens)
    t %= 10;
  tokens[321] = 300;
  tokens[390] = 999;
  std::string path = writeTokens(dir / "tokens.bin", tokens);
  OwnedTensor ids(DType::I64, {1, 38}), labels(DType::I64, {1, 38});
  std::unique_ptr<DataLoader> loader;
  Status s = DataLoader::tokens(path, "uint16",
                                {{"input_ids", &ids.view(), 256},
                                 {"labels", &labels.view(), 256}},
                                0, loader);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "token 300 at position 321 (byte offset 642) of '" +
                             path + "' is outside the model's vocabulary of "
                                    "256");
  for (const char *type : {"uint8", "uint32"}) {
    std::string other = dir / (std::string(type) + ".bin");
    if (std::string(type) == "uint8") {
      std::vector<uint8_t> narrow(400, 3);
      narrow[17] = 200;
      other = writeTokens(other, narrow);
    } else {
      std::vector<uint32_t> wide(400, 3);
      wide[399] = 70000;
      other = writeTokens(other, wide);
    }
    s = DataLoader::tokens(other, type,
                           {{"input_ids", &ids.view(), 100},
                            {"labels", &labels.view(), 100}},
                           0, loader);
    ASSERT_FALSE(s.isOk()) << type;
    EXPECT_NE(s.message().find(std::string(type) == "uint8"
                                   ? "token 200 at position 17 (byte offset 17)"
                                   : "token 70000 at position 399 (byte "
                                     "offset 1596)"),
              std::string::npos)
        << s.message();
  }
}

TEST(DataLoaderTest, TokenModeNeedsOneIntegerSequenceInput) {
  TempDir dir;
  std::string path = writeTokens(dir / "tokens.bin", countingTokens<uint16_t>(100));
  OwnedTensor ids(DType::I64, {2, 16}), labels(DType::I64, {2, 16});
  OwnedTensor mask(DType::I64, {2, 16}), features(DType::F32, {2, 8});

  EXPECT_EQ(tokenError(path, "uint16",
                       {{"input_ids", &ids.view(), 256},
                        {"attention_mask", &mask.view(), 2},
                        {"labels", &labels.view(), 256}}),
            "token data feeds one integer [B, T] input, but the model also "
            "takes 'attention_mask' (i64[2x16]); use --data synthetic");
  EXPECT_EQ(tokenError(path, "uint16",
                       {{"features", &features.view(), 2},
                        {"labels", &labels.view(), 256}}),
            "token data feeds one integer [B, T] input, but the model also "
            "takes 'features' (f32[2x8]); use --data synthetic");
  const std::string noSequence =
      "token data needs a model with one integer [B, T] input whose logits "
      "are [B, T, V] (next-token labels); use --data synthetic";
  EXPECT_EQ(tokenError(path, "uint16", {{"input_ids", &ids.view(), 256}}),
            noSequence);
  OwnedTensor classLabels(DType::I64, {2});
  EXPECT_EQ(tokenError(path, "uint16",
                       {{"input_ids", &ids.view(), 256},
                        {"labels", &classLabels.view(), 256}}),
            noSequence);
}
