//===- ExternalDataTest.cpp - Reading initializers from other files -------===//
//
// The external-data reader trusts nothing in the model: each case here was
// once followed, misparsed or hung on.
//
//===----------------------------------------------------------------------===//

#include "strata/Frontend/ExternalData.h"

#include "TempDir.h"

#include "onnx/onnx_pb.h"

#include "gtest/gtest.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fs = std::filesystem;
using strata::frontend::readExternalData;

namespace {

struct Folder {
  strata::testing::TempDir temp{"strata-external"};
  fs::path root{temp.path()};
  Folder() { fs::create_directories(root / "model"); }
  void write(const fs::path &path, const std::string &bytes) {
    std::ofstream out(root / path, std::ios::binary);
    out << bytes;
  }
  std::string dir() const { return (root / "model").string(); }
};

onnx::TensorProto external(
    std::initializer_list<std::pair<const char *, const char *>> entries) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [key, value] : entries) {
    auto *e = t.add_external_data();
    e->set_key(key);
    e->set_value(value);
  }
  return t;
}

std::string error(const Folder &f, const onnx::TensorProto &t,
                  int64_t bytes = 4) {
  std::string out;
  return readExternalData(t, f.dir(), bytes, out);
}

TEST(ExternalDataTest, ReadsTheNamedBytes) {
  Folder f;
  f.write("model/w.bin", "0123456789");
  std::string out;
  EXPECT_EQ(readExternalData(external({{"location", "w.bin"},
                                       {"offset", "2"},
                                       {"length", "4"}}),
                             f.dir(), 4, out),
            "");
  EXPECT_EQ(out, "2345");
  EXPECT_EQ(readExternalData(external({{"location", "w.bin"}, {"offset", "6"}}),
                             f.dir(), -1, out),
            "");
  EXPECT_EQ(out, "6789");
}

TEST(ExternalDataTest, StaysInsideTheModelsFolder) {
  // "../" was followed and the outside file's bytes became weights.
  Folder f;
  f.write("secret.bin", "abcd");
  EXPECT_EQ(error(f, external({{"location", "../secret.bin"}})),
            "external data location '../secret.bin' leaves the model's "
            "folder");
  EXPECT_EQ(error(f, external({{"location",
                                (f.root / "secret.bin").c_str()}})),
            "external data location '" + (f.root / "secret.bin").string() +
                "' is absolute; it must lie in the model's folder");
  fs::create_symlink(f.root / "secret.bin", f.root / "model" / "link.bin");
  EXPECT_EQ(error(f, external({{"location", "link.bin"}})),
            "external data location 'link.bin' leads out of the model's "
            "folder (a symbolic link)");
}

TEST(ExternalDataTest, ParsesCountsStrictly) {
  // Offsets were parsed by prefix: "64abc" read at 64, "1e9" at 1.
  Folder f;
  f.write("model/w.bin", std::string(128, 'x'));
  for (const char *bad : {"64abc", "1e9", "0x10", "-5", "", " 4"})
    EXPECT_EQ(error(f, external({{"location", "w.bin"}, {"offset", bad}})),
              std::string("external data offset '") + bad +
                  "' is not a byte count (decimal digits)");
  // A negative length was ignored.
  EXPECT_EQ(error(f, external({{"location", "w.bin"}, {"length", "-4"}})),
            "external data length '-4' is not a byte count (decimal digits)");
  EXPECT_EQ(error(f, external({{"location", "w.bin"}, {"length", "8"}})),
            "external data length 8 does not match the tensor's 4 bytes");
  EXPECT_EQ(error(f, external({{"location", "w.bin"},
                               {"offset", "18446744073709551615"}})),
            "external data offset '18446744073709551615' is not a byte "
            "count (decimal digits)");
  EXPECT_EQ(error(f, external({{"location", "w.bin"}, {"offset", "126"}})),
            "external data file '" + f.dir() +
                "/w.bin' ends before offset 126 + 4 bytes");
}

TEST(ExternalDataTest, OpensOnlyRegularFiles) {
  // A FIFO as external data blocked the compile forever.
  Folder f;
  ASSERT_EQ(::mkfifo((f.root / "model" / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(error(f, external({{"location", "fifo"}})),
            "external data file '" + f.dir() + "/fifo' is not a regular file");
  fs::create_directories(f.root / "model" / "dir");
  EXPECT_EQ(error(f, external({{"location", "dir"}})),
            "external data file '" + f.dir() + "/dir' is not a regular file");
  EXPECT_NE(error(f, external({{"location", "missing.bin"}}))
                .find("cannot open external data file"),
            std::string::npos);
  EXPECT_EQ(error(f, external({})), "external data without a location");
}

} // namespace
