//===- FuzzSupport.h - What the libFuzzer targets share ---------*- C++ -*-===//
//
// A scratch folder per fuzzer process (the loaders under test read files),
// removed when the process exits normally, and a file writer.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TESTS_FUZZ_FUZZSUPPORT_H
#define STRATA_TESTS_FUZZ_FUZZSUPPORT_H

#include "TempDir.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace strata::fuzz {

/// A fresh folder under $TMPDIR for this process, removed at exit.
using ScratchFolder = strata::testing::TempDir;

/// The input of a target that reads two files: a 2-byte little-endian
/// length, that many bytes (`head`), then the rest (`tail`), as
/// strata-fuzz-seeds' pack() writes it. False when the input is too short.
inline bool unpack(const uint8_t *data, size_t size, std::string_view &head,
                   std::string_view &tail) {
  if (size < 2)
    return false;
  size_t n = data[0] | size_t(data[1]) << 8;
  if (n > size - 2)
    return false;
  head = std::string_view(reinterpret_cast<const char *>(data) + 2, n);
  tail = std::string_view(reinterpret_cast<const char *>(data) + 2 + n,
                          size - 2 - n);
  return true;
}

/// Writes `bytes` to `path` (replacing it); aborts when it cannot, since a
/// target that silently tested nothing would be worse than a stop.
inline void writeFile(const std::string &path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write '%s'\n", path.c_str());
    std::abort();
  }
}

/// FNV-1a, 64 bits (decides, per input, which variant a target runs).
inline uint64_t hashBytes(const uint8_t *data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

} // namespace strata::fuzz

#endif // STRATA_TESTS_FUZZ_FUZZSUPPORT_H
