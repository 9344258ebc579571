//===- TempDir.h - A temporary folder for a test ----------------*- C++ -*-===//
//
// Header-only and dependency-free: the GoogleTest suites (TestArtifacts.h)
// and the libFuzzer targets (tests/fuzz/FuzzSupport.h) share it.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TESTS_TEMPDIR_H
#define STRATA_TESTS_TEMPDIR_H

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace strata::testing {

/// A fresh folder under $TMPDIR named `prefix`-XXXXXX, removed with the
/// object; aborts when it cannot be made (a test in no folder would test
/// nothing).
class TempDir {
public:
  explicit TempDir(const char *prefix = "strata-test") {
    std::string pattern =
        (std::filesystem::temp_directory_path() / prefix).string() + "-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!::mkdtemp(buffer.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = buffer.data();
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string &path() const { return path_; }
  std::string operator/(const std::string &name) const {
    return path_ + "/" + name;
  }

private:
  std::string path_;
};

} // namespace strata::testing

#endif // STRATA_TESTS_TEMPDIR_H
