//===- FuzzExternalData.cpp - libFuzzer target: the external-data loader --===//
//
// readExternalData (frontend/lib/ExternalData.cpp) with fuzzed
// external_data entries (location, offset, length), a fuzzed element count
// and fuzzed file contents, inside a model folder that also holds what it
// must refuse: a FIFO, a folder, a symbolic link leading out and one
// staying in, a link to itself.
//
// Input: 2 bytes (little endian) n, then n bytes of an onnx::TensorProto
// (its external_data entries, dims and data_type), then the bytes of the
// model folder's data.bin (also at sub/data.bin).
//
// Besides not crashing, a read that succeeds must return exactly the bytes
// of the file the location names at [offset, offset + length), with the
// length the tensor's dims and type ask for when they ask.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "strata/Frontend/ExternalData.h"

#include "onnx/onnx_pb.h"

#include <cstring>
#include <sys/stat.h>

using namespace strata;

namespace {

fuzz::ScratchFolder *scratch;
std::string modelDir;

/// The element width of `type` as the importer reads it, 0 for others.
int64_t widthOf(int32_t type) {
  switch (type) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
    return 8;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
    return 4;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
    return 2;
  case onnx::TensorProto::INT8:
  case onnx::TensorProto::BOOL:
    return 1;
  default:
    return 0;
  }
}

/// The bytes the tensor's dims and type ask for, -1 when they ask for none
/// (no data type) or the count does not fit (the importer refuses those
/// before reading).
int64_t expectedBytes(const onnx::TensorProto &t) {
  int64_t width = widthOf(t.data_type());
  if (!width)
    return -1;
  int64_t bytes = width;
  for (int64_t d : t.dims())
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes))
      return -1;
  return bytes;
}

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "fuzz-external-data: %s\n", what);
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  scratch = new fuzz::ScratchFolder("strata-fuzz-external-data");
  modelDir = *scratch / "model";
  std::filesystem::create_directories(modelDir + "/sub");
  std::filesystem::create_directories(modelDir + "/dir");
  fuzz::writeFile(*scratch / "outside.bin", std::string(64, 'x'));
  if (::mkfifo((modelDir + "/fifo").c_str(), 0600) != 0)
    fail("cannot create the FIFO");
  std::filesystem::create_symlink("../outside.bin", modelDir + "/out");
  std::filesystem::create_symlink("data.bin", modelDir + "/in");
  std::filesystem::create_symlink("loop", modelDir + "/loop");
  std::atexit([] { delete scratch; });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view proto, contents;
  if (!fuzz::unpack(data, size, proto, contents))
    return -1;
  onnx::TensorProto tensor;
  if (!tensor.ParseFromArray(proto.data(), int(proto.size())))
    return -1;
  fuzz::writeFile(modelDir + "/data.bin", contents);
  fuzz::writeFile(modelDir + "/sub/data.bin", contents);

  int64_t expected = expectedBytes(tensor);
  std::string out;
  std::string why =
      frontend::readExternalData(tensor, modelDir, expected, out);
  if (!why.empty())
    return 0;

  // The oracle: which file was read, and which bytes it must have given.
  std::string location, offsetText, lengthText;
  for (const auto &entry : tensor.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offsetText = entry.value();
    else if (entry.key() == "length")
      lengthText = entry.value();
  }
  std::string file;
  {
    std::ifstream in(modelDir + "/" + location, std::ios::binary);
    if (!in)
      fail("a read succeeded from a location that cannot be opened");
    file.assign(std::istreambuf_iterator<char>(in),
                std::istreambuf_iterator<char>());
  }
  uint64_t offset = offsetText.empty() ? 0 : std::stoull(offsetText);
  if (offset > file.size())
    fail("a read succeeded past the end of its file");
  if (expected >= 0 && out.size() != uint64_t(expected))
    fail("a read returned another size than the tensor's");
  if (expected < 0 && !lengthText.empty() &&
      out.size() != std::stoull(lengthText))
    fail("a read returned another size than its length entry");
  if (file.compare(offset, out.size(), out) != 0 ||
      offset + out.size() > file.size())
    fail("a read returned bytes that are not the file's");
  // Only data.bin (directly, through sub/ or through the inside link) may be
  // read; everything else in the folder must be refused.
  if (file != contents)
    fail("a read succeeded from a file other than data.bin");
  return 0;
}
