//===- ExternalData.cpp - An ONNX initializer's bytes in another file -----===//

#include "strata/Frontend/ExternalData.h"

#include "onnx/onnx_pb.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

namespace strata::frontend {
namespace {

/// A byte count written as decimal digits only ("64abc", "1e9", "0x10",
/// "-5" and "" are not).
bool parseCount(const std::string &text, uint64_t &out) {
  if (text.empty() || text.size() > 19)
    return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    out = out * 10 + uint64_t(c - '0');
  }
  return true;
}

/// The canonical absolute form of `path` (symbolic links resolved), or "".
std::string realPath(const std::string &path) {
  std::unique_ptr<char, decltype(&std::free)> resolved(
      ::realpath(path.c_str(), nullptr), &std::free);
  return resolved ? std::string(resolved.get()) : std::string();
}

} // namespace

std::string readExternalData(const onnx::TensorProto &tensor,
                             const std::string &baseDir,
                             int64_t expectedBytes, std::string &out) {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool haveLength = false;
  for (const auto &entry : tensor.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
    } else if (entry.key() == "offset") {
      if (!parseCount(entry.value(), offset))
        return "external data offset '" + entry.value() +
               "' is not a byte count (decimal digits)";
    } else if (entry.key() == "length") {
      if (!parseCount(entry.value(), length))
        return "external data length '" + entry.value() +
               "' is not a byte count (decimal digits)";
      haveLength = true;
    }
  }
  if (location.empty())
    return "external data without a location";
  std::filesystem::path relative(location);
  if (relative.is_absolute())
    return "external data location '" + location +
           "' is absolute; it must lie in the model's folder";
  for (const auto &part : relative)
    if (part == "..")
      return "external data location '" + location +
             "' leaves the model's folder";
  std::string dir = baseDir.empty() ? "." : baseDir;
  std::string path = (std::filesystem::path(dir) / relative).string();
  std::string root = realPath(dir), file = realPath(path);
  if (file.empty())
    return "cannot open external data file '" + path + "': " +
           std::strerror(errno);
  if (root.empty() || file.compare(0, root.size() + 1, root + "/") != 0)
    return "external data location '" + location +
           "' leads out of the model's folder (a symbolic link)";
  struct stat st;
  if (::stat(file.c_str(), &st) != 0)
    return "cannot open external data file '" + path + "': " +
           std::strerror(errno);
  if (!S_ISREG(st.st_mode))
    return "external data file '" + path + "' is not a regular file";
  uint64_t size = uint64_t(st.st_size);
  if (offset > size)
    return "external data offset " + std::to_string(offset) + " lies past "
           "the end of '" + path + "' (" + std::to_string(size) + " bytes)";
  if (expectedBytes >= 0) {
    if (haveLength && length != uint64_t(expectedBytes))
      return "external data length " + std::to_string(length) +
             " does not match the tensor's " + std::to_string(expectedBytes) +
             " bytes";
    length = uint64_t(expectedBytes);
  } else if (!haveLength) {
    length = size - offset;
  }
  if (length > size - offset)
    return "external data file '" + path + "' ends before offset " +
           std::to_string(offset) + " + " + std::to_string(length) +
           " bytes" +
           (size == 0 ? " (it is empty: a weightless model, whose "
                        "initializers are declared only; compile it with "
                        "--no-weights)"
                      : "");
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return "cannot open external data file '" + path + "': " +
           std::strerror(errno);
  out.assign(size_t(length), '\0');
  size_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, out.data() + done, size_t(length) - done,
                        off_t(offset + done));
    if (n <= 0) {
      ::close(fd);
      return "cannot read external data file '" + path + "'";
    }
    done += size_t(n);
  }
  ::close(fd);
  return "";
}

} // namespace strata::frontend
