//===- ArrayData.cpp - Datasets of .npy arrays ----------------------------===//
//
// A dataset folder holds one .npy array per model input (and labels.npy),
// sample i of every input at row i. Each file is memory-mapped and checked
// once, before training: its shape against the input's, its dtype against
// what converts exactly into the input's, every label against the model's
// classes. The sampling rule (docs/data.md) is the token files' with rows
// for windows.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/DataLoader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <limits>
#include <set>

namespace strata::runtime {

std::string datasetFileName(const std::string &name) {
  static const char *kHex = "0123456789ABCDEF";
  std::string file;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-') {
      file += char(c);
    } else {
      file += '%';
      file += kHex[c >> 4];
      file += kHex[c & 15];
    }
  }
  return file + ".npy";
}

/// One mapped .npy file: its element kind and width, its shape, and where
/// its data starts.
struct ArrayDataset::Array {
  enum Kind { Float, Signed, Unsigned, Bool };
  ~Array() {
    if (map)
      munmap(map, mapBytes);
  }
  LoaderInput input;
  std::string path, descr;
  Kind kind = Float;
  size_t width = 4;
  std::vector<int64_t> shape;
  void *map = nullptr;
  size_t mapBytes = 0;
  const unsigned char *data = nullptr;
  uint64_t perSample = 0; // elements of one sample

  /// Element `i` as a double (floats) or an integer (the rest).
  double floatAt(uint64_t i) const;
  int64_t signedAt(uint64_t i) const;
  uint64_t unsignedAt(uint64_t i) const;
};

namespace {

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exponent = (h >> 10) & 31,
           mantissa = h & 1023;
  float value;
  if (exponent == 0)
    value = std::ldexp(float(mantissa), -24);
  else if (exponent == 31)
    value = mantissa ? std::numeric_limits<float>::quiet_NaN()
                     : std::numeric_limits<float>::infinity();
  else
    value = std::ldexp(float(mantissa | 1024), int(exponent) - 25);
  return sign ? -value : value;
}

template <typename T> T load(const unsigned char *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

} // namespace

double ArrayDataset::Array::floatAt(uint64_t i) const {
  const unsigned char *p = data + i * width;
  if (width == 2)
    return halfToFloat(load<uint16_t>(p));
  if (width == 4)
    return load<float>(p);
  return load<double>(p);
}

int64_t ArrayDataset::Array::signedAt(uint64_t i) const {
  const unsigned char *p = data + i * width;
  switch (width) {
  case 1: return load<int8_t>(p);
  case 2: return load<int16_t>(p);
  case 4: return load<int32_t>(p);
  default: return load<int64_t>(p);
  }
}

uint64_t ArrayDataset::Array::unsignedAt(uint64_t i) const {
  const unsigned char *p = data + i * width;
  switch (width) {
  case 1: return load<uint8_t>(p);
  case 2: return load<uint16_t>(p);
  case 4: return load<uint32_t>(p);
  default: return load<uint64_t>(p);
  }
}

namespace {

using Array = ArrayDataset::Array;

/// The numpy name of an input's dtype, for messages.
const char *numpyName(DType t) {
  switch (t) {
  case DType::F32: return "float32";
  case DType::F64: return "float64";
  case DType::I64: return "int64";
  case DType::I32: return "int32";
  default: return "an unsupported type";
  }
}

/// "(N, 8, 8)": the shape a file feeding `view` must have.
std::string expectedShape(const TensorView &view) {
  std::string s = "(N";
  for (int64_t i = 1; i < view.rank(); ++i)
    s += ", " + std::to_string(view.shape[i]);
  return s + (view.rank() == 1 ? ",)" : ")");
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

/// The value of `key` in a .npy header's dict (up to the next top-level
/// comma), or "" when absent.
std::string headerValue(const std::string &header, const std::string &key) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos)
    return "";
  at = header.find(':', at);
  if (at == std::string::npos)
    return "";
  ++at;
  while (at < header.size() && header[at] == ' ')
    ++at;
  size_t end = at;
  int depth = 0;
  for (; end < header.size(); ++end) {
    char c = header[end];
    if (c == '(' || c == '[')
      ++depth;
    else if (c == ')' || c == ']')
      --depth;
    else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  return header.substr(at, end - at);
}

/// Maps `path` and reads its header into `a`.
Status mapNpy(const std::string &path, Array &a) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Status::error("'" + path + "' is not a regular file");
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  a.mapBytes = size_t(st.st_size);
  void *m = a.mapBytes ? mmap(nullptr, a.mapBytes, PROT_READ, MAP_PRIVATE, fd, 0)
                       : MAP_FAILED;
  ::close(fd);
  if (m == MAP_FAILED)
    return Status::error("'" + path + "' is not a .npy file (empty or "
                         "unreadable)");
  a.map = m;
  const unsigned char *p = static_cast<const unsigned char *>(m);
  if (a.mapBytes < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    return Status::error("'" + path + "' is not a .npy file (no \\x93NUMPY "
                         "magic)");
  uint32_t major = p[6];
  size_t headerStart = major == 1 ? 10 : 12;
  if ((major != 1 && major != 2 && major != 3) || a.mapBytes < headerStart)
    return Status::error("'" + path + "' has .npy format version " +
                         std::to_string(major) + "; 1, 2 and 3 are read");
  size_t headerLength =
      major == 1 ? load<uint16_t>(p + 8) : load<uint32_t>(p + 8);
  if (headerStart + headerLength > a.mapBytes)
    return Status::error("'" + path + "' is truncated inside its header");
  std::string header(reinterpret_cast<const char *>(p + headerStart),
                     headerLength);
  std::string descr = headerValue(header, "descr");
  if (descr.size() < 4 || descr.front() != '\'' || descr.back() != '\'')
    return Status::error("'" + path + "' has the dtype " +
                         (descr.empty() ? "(none)" : descr) +
                         ", not a plain number type");
  a.descr = descr.substr(1, descr.size() - 2);
  if (headerValue(header, "fortran_order") != "False")
    return Status::error("'" + path + "' is in Fortran order; save it with "
                         "np.save(path, np.ascontiguousarray(a))");
  char order = a.descr[0], kind = a.descr[1];
  std::string widthText = a.descr.substr(2);
  a.width = widthText == "1"   ? 1
            : widthText == "2" ? 2
            : widthText == "4" ? 4
            : widthText == "8" ? 8
                               : 0;
  bool known = a.width && (order == '<' || order == '|' || order == '=') &&
               (kind == 'f' ? a.width >= 2
                : kind == 'b' ? a.width == 1
                              : kind == 'i' || kind == 'u');
  if (!known)
    return Status::error("'" + path + "' has the dtype '" + a.descr +
                         "'; datasets hold little-endian bool, int, uint "
                         "or float arrays");
  a.kind = kind == 'f'   ? Array::Float
           : kind == 'i' ? Array::Signed
           : kind == 'u' ? Array::Unsigned
                         : Array::Bool;
  std::string shape = headerValue(header, "shape");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')')
    return Status::error("'" + path + "' has no readable shape in its header");
  for (size_t at = 1; at + 1 < shape.size();) {
    while (at + 1 < shape.size() && (shape[at] == ' ' || shape[at] == ','))
      ++at;
    if (at + 1 >= shape.size())
      break;
    size_t used = 0;
    try {
      a.shape.push_back(std::stoll(shape.substr(at), &used));
    } catch (...) {
      return Status::error("'" + path + "' has an unreadable shape " + shape);
    }
    at += used;
  }
  uint64_t elements = 1;
  for (int64_t d : a.shape)
    elements *= uint64_t(d);
  size_t dataStart = headerStart + headerLength;
  if (a.mapBytes - dataStart != elements * a.width)
    return Status::error("'" + path + "' holds " +
                         std::to_string(a.mapBytes - dataStart) +
                         " bytes of data; its shape " + shapeText(a.shape) +
                         " of '" + a.descr + "' needs " +
                         std::to_string(elements * a.width));
  a.data = p + dataStart;
  return Status::ok();
}

/// Whether every value of `a` converts exactly into `to`; a one-line error
/// naming the first that does not (or the dtype, where none can).
Status checkConvertible(const Array &a, DType to) {
  const std::string what = "'" + a.path + "' (" + a.descr + ")";
  const std::string input = "input '" + a.input.name + "' (" + numpyName(to) +
                            ")";
  bool integerTarget = to == DType::I64 || to == DType::I32;
  if (integerTarget && a.kind == Array::Float)
    return Status::error(what + " holds floats; " + input +
                         " takes integers: convert it with astype");
  if (to != DType::F32 && to != DType::F64 && !integerTarget)
    return Status::error("input '" + a.input.name + "' is " +
                         a.input.view->describe() +
                         "; datasets feed float32, float64, int64 and int32 "
                         "inputs");
  uint64_t n = a.shape.empty() ? 0 : uint64_t(a.shape[0]) * a.perSample;
  auto refuse = [&](uint64_t i, const std::string &value) {
    return Status::error(what + " holds " + value + " at sample " +
                         std::to_string(i / std::max<uint64_t>(a.perSample, 1)) +
                         ", which " + input + " cannot hold exactly");
  };
  // Conversions exact for every value by the types alone.
  if (a.kind == Array::Bool ||
      (a.kind == Array::Float && (to == DType::F64 || a.width <= 4)))
    return Status::ok();
  if (a.kind == Array::Float) {
    // float64 into float32: each value must be a float32.
    for (uint64_t i = 0; i < n; ++i) {
      double v = a.floatAt(i);
      if (!std::isnan(v) && double(float(v)) != v) {
        char text[32];
        std::snprintf(text, sizeof(text), "%.17g", v);
        return refuse(i, text);
      }
    }
    return Status::ok();
  }
  // Integers: by value where the width alone does not settle it.
  bool isSigned = a.kind == Array::Signed;
  for (uint64_t i = 0; i < n; ++i) {
    if (!isSigned && a.width == 8 && a.unsignedAt(i) > uint64_t(INT64_MAX))
      return refuse(i, std::to_string(a.unsignedAt(i)));
    int64_t v = isSigned ? a.signedAt(i) : int64_t(a.unsignedAt(i));
    bool exact = true;
    switch (to) {
    case DType::I32:
      exact = v >= INT32_MIN && v <= INT32_MAX;
      break;
    case DType::F32:
    case DType::F64: {
      // Exact in double (2^63 itself is not an int64), and for float32
      // exact in float too.
      double d = double(v);
      exact = d < 0x1p63 && int64_t(d) == v &&
              (to == DType::F64 || double(float(d)) == d);
      break;
    }
    default:
      break;
    }
    if (!exact)
      return refuse(i, std::to_string(v));
  }
  return Status::ok();
}

/// Every label within [0, high) or the ignored index.
Status checkLabels(const Array &a, int64_t high, int64_t ignoreIndex) {
  uint64_t n = uint64_t(a.shape[0]) * a.perSample;
  bool isSigned = a.kind == Array::Signed;
  for (uint64_t i = 0; i < n; ++i) {
    int64_t v = a.kind == Array::Bool ? a.data[i]
                : isSigned            ? a.signedAt(i)
                                      : int64_t(a.unsignedAt(i));
    if ((v < 0 || v >= high) && v != ignoreIndex)
      return Status::error(
          "'" + a.path + "' holds the label " + std::to_string(v) +
          " at sample " + std::to_string(i / a.perSample) +
          ", outside the model's " + std::to_string(high) + " classes [0, " +
          std::to_string(high) + ") (ignored: " + std::to_string(ignoreIndex) +
          ")");
  }
  return Status::ok();
}

} // namespace

ArrayDataset::~ArrayDataset() = default;

const LoaderInput &ArrayDataset::input(size_t i) const {
  return arrays_[i]->input;
}

Status ArrayDataset::open(const std::string &dir,
                          const std::vector<LoaderInput> &inputs,
                          int64_t ignoreIndex, bool partial,
                          std::unique_ptr<ArrayDataset> &out) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error("dataset '" + dir + "' is not a folder");
  auto dataset = std::make_unique<ArrayDataset>();
  std::set<std::string> expected;
  for (const LoaderInput &input : inputs)
    expected.insert(datasetFileName(input.name));
  // A file that feeds nothing is most likely a misspelt input.
  if (!partial) {
    if (DIR *d = opendir(dir.c_str())) {
      std::string stray;
      while (dirent *e = readdir(d)) {
        std::string name = e->d_name;
        if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0 &&
            !expected.count(name) && (stray.empty() || name < stray))
          stray = name;
      }
      closedir(d);
      if (!stray.empty()) {
        std::string names;
        for (const std::string &e : expected)
          names += (names.empty() ? "" : ", ") + e;
        return Status::error("dataset '" + dir + "': '" + stray +
                             "' feeds no input of the model (it reads " +
                             names + ")");
      }
    }
  }
  std::string firstPath;
  for (const LoaderInput &input : inputs) {
    auto a = std::make_unique<Array>();
    a->input = input;
    a->path = dir + "/" + datasetFileName(input.name);
    const TensorView &view = *input.view;
    if (::stat(a->path.c_str(), &st) != 0)
      return Status::error("dataset '" + dir + "' has no '" +
                           datasetFileName(input.name) + "' for " +
                           (input.name == "labels" ? "the labels"
                                                   : "input '" + input.name +
                                                         "'") +
                           " (" + view.describe() + ": an array of shape " +
                           expectedShape(view) + ")");
    if (Status s = mapNpy(a->path, *a); !s)
      return s;
    if (view.rank() == 0)
      return Status::error("input '" + input.name +
                           "' is a scalar; dataset inputs have a batch "
                           "dimension");
    std::vector<int64_t> sample(view.shape.begin() + 1, view.shape.end());
    if (a->shape.empty() ||
        std::vector<int64_t>(a->shape.begin() + 1, a->shape.end()) != sample)
      return Status::error("'" + a->path + "' has shape " +
                           shapeText(a->shape) + "; " +
                           (input.name == "labels" ? "the labels"
                                                   : "input '" + input.name +
                                                         "'") +
                           " (" + view.describe() + ") take " +
                           expectedShape(view));
    a->perSample = 1;
    for (int64_t d : sample)
      a->perSample *= uint64_t(d);
    if (dataset->arrays_.empty()) {
      dataset->samples_ = uint64_t(a->shape[0]);
      firstPath = a->path;
    } else if (uint64_t(a->shape[0]) != dataset->samples_) {
      return Status::error("'" + a->path + "' has " +
                           std::to_string(a->shape[0]) + " samples but '" +
                           firstPath + "' has " +
                           std::to_string(dataset->samples_));
    }
    if (Status s = checkConvertible(*a, view.dtype); !s)
      return s;
    if (input.name == "labels")
      if (Status s = checkLabels(*a, input.high, ignoreIndex); !s)
        return s;
    dataset->arrays_.push_back(std::move(a));
  }
  if (!dataset->arrays_.empty() && dataset->samples_ == 0)
    return Status::error("dataset '" + dir + "' holds no samples");
  out = std::move(dataset);
  return Status::ok();
}

void ArrayDataset::copySample(size_t i, uint64_t row, int64_t b) const {
  const Array &a = *arrays_[i];
  TensorView &view = *a.input.view;
  uint64_t n = a.perSample, from = row * n, to = uint64_t(b) * n;
  bool same = (view.dtype == DType::F32 && a.kind == Array::Float &&
               a.width == 4) ||
              (view.dtype == DType::F64 && a.kind == Array::Float &&
               a.width == 8) ||
              (view.dtype == DType::I64 && a.kind != Array::Float &&
               a.kind != Array::Bool && a.width == 8) ||
              (view.dtype == DType::I32 && a.kind == Array::Signed &&
               a.width == 4);
  if (same) {
    std::memcpy(static_cast<char *>(view.data) + to * a.width,
                a.data + from * a.width, n * a.width);
    return;
  }
  for (uint64_t e = 0; e < n; ++e) {
    uint64_t at = from + e;
    if (a.kind == Array::Float) {
      double v = a.floatAt(at);
      if (view.dtype == DType::F32)
        view.as<float>()[to + e] = float(v);
      else
        view.as<double>()[to + e] = v;
      continue;
    }
    int64_t v = a.kind == Array::Bool     ? int64_t(a.data[at] != 0)
                : a.kind == Array::Signed ? a.signedAt(at)
                                          : int64_t(a.unsignedAt(at));
    switch (view.dtype) {
    case DType::F32: view.as<float>()[to + e] = float(v); break;
    case DType::F64: view.as<double>()[to + e] = double(v); break;
    case DType::I64: view.as<int64_t>()[to + e] = v; break;
    default: view.as<int32_t>()[to + e] = int32_t(v); break;
    }
  }
}

namespace {

/// Rows of a dataset folder, sampled by the token files' rule.
class ArrayLoader : public DataLoader {
public:
  Status fill(uint64_t step, uint32_t micro, uint32_t accum) override {
    for (uint64_t b = 0; b < batch_; ++b) {
      uint64_t k = ((step * accum + micro) * world_ + rank_) * batch_ + b;
      uint64_t row = splitmix64(seedMix_ ^ k) % dataset_->samples();
      for (size_t i = 0; i < dataset_->inputs(); ++i)
        dataset_->copySample(i, row, int64_t(b));
    }
    return Status::ok();
  }
  int64_t itemsPerMicroStep() const override { return int64_t(batch_); }
  bool countsTokens() const override { return false; }

  std::unique_ptr<ArrayDataset> dataset_;
  uint64_t batch_ = 0, seedMix_ = 0, rank_ = 0, world_ = 1;
};

} // namespace

Status DataLoader::arrays(const std::string &dir,
                          std::vector<LoaderInput> inputs, int64_t ignoreIndex,
                          uint64_t seed, std::unique_ptr<DataLoader> &out,
                          int rank, int world, bool partial) {
  auto loader = std::make_unique<ArrayLoader>();
  for (const LoaderInput &input : inputs) {
    int64_t batch = input.view->rank() ? input.view->shape[0] : 0;
    if (loader->batch_ && uint64_t(batch) != loader->batch_)
      return Status::error("input '" + input.name + "' (" +
                           input.view->describe() +
                           ") has another batch than input '" +
                           inputs.front().name + "' (" +
                           inputs.front().view->describe() +
                           "); a dataset feeds inputs of one batch");
    loader->batch_ = uint64_t(batch);
  }
  if (Status s =
          ArrayDataset::open(dir, inputs, ignoreIndex, partial, loader->dataset_);
      !s)
    return s;
  loader->seedMix_ = splitmix64(seed);
  loader->rank_ = uint64_t(rank);
  loader->world_ = uint64_t(world);
  out = std::move(loader);
  return Status::ok();
}

} // namespace strata::runtime
