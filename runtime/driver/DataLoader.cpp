//===- DataLoader.cpp - Deterministic batches for training ----------------===//

#include "strata/Runtime/DataLoader.h"

#include "strata/Runtime/Artifact.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace strata::runtime {

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

DataLoader::~DataLoader() = default;

namespace {

/// Rows in the batch of an input: its first dim (1 for a scalar).
int64_t batchOf(const TensorView &t) { return t.rank() ? t.shape[0] : 1; }

class SyntheticLoader : public DataLoader {
public:
  SyntheticLoader(std::vector<LoaderInput> inputs, uint64_t seed, int rank,
                  int world)
      : inputs_(std::move(inputs)), seedMix_(splitmix64(seed)), rank_(rank),
        world_(world) {}

  Status fill(uint64_t step, uint32_t micro, uint32_t accum) override {
    for (LoaderInput &input : inputs_) {
      TensorView &t = *input.view;
      int64_t batch = batchOf(t);
      uint64_t perSample = batch ? t.numel() / batch : 0;
      uint64_t base = splitmix64(
          seedMix_ ^ fnv1a64(input.name.data(), input.name.size()));
      for (int64_t b = 0; b < batch; ++b) {
        uint64_t k =
            ((step * accum + micro) * world_ + rank_) * uint64_t(batch) + b;
        for (uint64_t e = 0; e < perSample; ++e) {
          uint64_t h = splitmix64(base ^ (k * perSample + e));
          uint64_t i = b * perSample + e;
          double uniform = double(h >> 40) * 0x1p-24 * 2.0 - 1.0;
          uint64_t value = h % uint64_t(std::max<int64_t>(input.high, 1));
          switch (t.dtype) {
          case DType::F32: t.as<float>()[i] = float(uniform); break;
          case DType::F64: t.as<double>()[i] = uniform; break;
          case DType::I64: t.as<int64_t>()[i] = int64_t(value); break;
          case DType::I32: t.as<int32_t>()[i] = int32_t(value); break;
          default:
            return Status::error("synthetic data: input '" + input.name +
                                 "' has unsupported type " + t.describe());
          }
        }
      }
    }
    return Status::ok();
  }
  int64_t itemsPerMicroStep() const override {
    return inputs_.empty() ? 0 : batchOf(*inputs_.front().view);
  }
  bool countsTokens() const override { return false; }

private:
  std::vector<LoaderInput> inputs_;
  uint64_t seedMix_;
  uint64_t rank_, world_;
};

class TokenLoader : public DataLoader {
public:
  ~TokenLoader() override {
    if (data_)
      munmap(const_cast<void *>(data_), bytes_);
  }
  Status fill(uint64_t step, uint32_t micro, uint32_t accum) override {
    // A pipeline stage may hold the tokens or the labels alone.
    TensorView *x = tokens_.view, *y = labels_.view;
    const TensorView &shape = x ? *x : *y;
    int64_t high = x ? tokens_.high : labels_.high;
    int64_t batch = shape.shape[0], length = shape.shape[1];
    uint64_t windows = count_ - uint64_t(length);
    for (int64_t b = 0; b < batch; ++b) {
      uint64_t k =
          ((step * accum + micro) * world_ + rank_) * uint64_t(batch) + b;
      uint64_t start = splitmix64(seedMix_ ^ k) % windows;
      for (int64_t t = 0; t <= length; ++t) {
        uint64_t token = at(start + t);
        if (int64_t(token) >= high)
          return Status::error("token " + std::to_string(token) +
                               " at position " + std::to_string(start + t) +
                               " of the data is outside the model's "
                               "vocabulary of " +
                               std::to_string(high));
        if (t < length && x)
          store(*x, b * length + t, token);
        if (t > 0 && y)
          store(*y, b * length + t - 1, token);
      }
    }
    return Status::ok();
  }
  int64_t itemsPerMicroStep() const override {
    return (tokens_.view ? tokens_.view : labels_.view)->numel();
  }
  bool countsTokens() const override { return true; }

  LoaderInput tokens_, labels_;
  const void *data_ = nullptr;
  size_t bytes_ = 0;
  uint64_t count_ = 0;
  size_t width_ = 2;
  uint64_t seedMix_ = 0;
  uint64_t rank_ = 0, world_ = 1;

private:
  uint64_t at(uint64_t i) const {
    const unsigned char *p = static_cast<const unsigned char *>(data_);
    if (width_ == 1)
      return p[i];
    if (width_ == 4) {
      uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  }
  static void store(TensorView &t, int64_t i, uint64_t v) {
    if (t.dtype == DType::I64)
      t.as<int64_t>()[i] = int64_t(v);
    else
      t.as<int32_t>()[i] = int32_t(v);
  }
};

} // namespace

std::unique_ptr<DataLoader> DataLoader::synthetic(std::vector<LoaderInput> inputs,
                                                  uint64_t seed, int rank,
                                                  int world) {
  return std::make_unique<SyntheticLoader>(std::move(inputs), seed, rank,
                                           world);
}

namespace {

/// The largest of `n` tokens of type T (a loop the compiler vectorizes).
template <typename T> uint64_t largest(const void *data, uint64_t n) {
  const T *p = static_cast<const T *>(data);
  T most = 0;
  for (uint64_t i = 0; i < n; ++i)
    most = p[i] > most ? p[i] : most;
  return most;
}

template <typename T>
uint64_t firstAtLeast(const void *data, uint64_t n, uint64_t high) {
  const T *p = static_cast<const T *>(data);
  for (uint64_t i = 0; i < n; ++i)
    if (uint64_t(p[i]) >= high)
      return i;
  return n;
}

/// Every token of the file below the model's vocabulary `high`.
Status checkVocabulary(const void *data, uint64_t n, size_t width,
                       int64_t high, const std::string &path) {
  if (high <= 0)
    return Status::ok();
  uint64_t most = width == 1   ? largest<uint8_t>(data, n)
                  : width == 2 ? largest<uint16_t>(data, n)
                               : largest<uint32_t>(data, n);
  if (most < uint64_t(high))
    return Status::ok();
  uint64_t at = width == 1   ? firstAtLeast<uint8_t>(data, n, uint64_t(high))
                : width == 2 ? firstAtLeast<uint16_t>(data, n, uint64_t(high))
                             : firstAtLeast<uint32_t>(data, n, uint64_t(high));
  uint64_t token = width == 1   ? static_cast<const uint8_t *>(data)[at]
                   : width == 2 ? static_cast<const uint16_t *>(data)[at]
                                : static_cast<const uint32_t *>(data)[at];
  return Status::error("token " + std::to_string(token) + " at position " +
                       std::to_string(at) + " (byte offset " +
                       std::to_string(at * width) + ") of '" + path +
                       "' is outside the model's vocabulary of " +
                       std::to_string(high));
}

} // namespace

Status DataLoader::tokens(const std::string &path, const std::string &dtype,
                          std::vector<LoaderInput> inputs, uint64_t seed,
                          std::unique_ptr<DataLoader> &out, int rank,
                          int world, bool partial) {
  if (dtype != "uint8" && dtype != "uint16" && dtype != "uint32")
    return Status::error("--data-dtype must be uint8, uint16 or uint32, not '" +
                         dtype + "'");
  auto loader = std::make_unique<TokenLoader>();
  bool haveTokens = false, haveLabels = false;
  for (LoaderInput &input : inputs) {
    const TensorView &t = *input.view;
    bool integer = t.dtype == DType::I64 || t.dtype == DType::I32;
    if (input.name == "labels") {
      loader->labels_ = input;
      haveLabels = true;
    } else if (integer && t.rank() == 2 && !haveTokens) {
      loader->tokens_ = input;
      haveTokens = true;
    } else {
      return Status::error("token data feeds one integer [B, T] input, but "
                           "the model also takes '" + input.name + "' (" +
                           t.describe() + "); use --data synthetic");
    }
  }
  bool complete = haveTokens && haveLabels &&
                  loader->labels_.view->shape == loader->tokens_.view->shape;
  bool stage = partial && (haveTokens || haveLabels) &&
               (haveTokens ? *loader->tokens_.view : *loader->labels_.view)
                       .rank() == 2;
  if (!complete && !stage)
    return Status::error("token data needs a model with one integer [B, T] "
                         "input whose logits are [B, T, V] (next-token "
                         "labels); use --data synthetic");
  // A regular file only: opening a FIFO (or a terminal) would block until
  // someone writes to it.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error("cannot open data file '" + path + "': " +
                         std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return Status::error("data file '" + path + "' is not a regular file");
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return Status::error("cannot open data file '" + path + "': " +
                         std::strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return Status::error("data file '" + path + "' is not a regular file");
  }
  size_t width = dtype == "uint32" ? 4 : dtype == "uint16" ? 2 : 1;
  loader->bytes_ = static_cast<size_t>(st.st_size);
  if (loader->bytes_ % width != 0) {
    close(fd);
    return Status::error("'" + path + "' has " + std::to_string(st.st_size) +
                         " bytes, not a whole number of " + dtype + " tokens");
  }
  loader->count_ = loader->bytes_ / width;
  loader->width_ = width;
  int64_t length =
      (haveTokens ? loader->tokens_ : loader->labels_).view->shape[1];
  if (loader->count_ <= uint64_t(length)) {
    close(fd);
    return Status::error("'" + path + "' holds " +
                         std::to_string(loader->count_) +
                         " tokens, fewer than one sequence of " +
                         std::to_string(length + 1));
  }
  void *m = mmap(nullptr, loader->bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED)
    return Status::error("cannot map '" + path + "'");
  loader->data_ = m;
  // Every token checked once, here: a bad one names its offset before
  // training starts, not at whichever step first samples it.
  int64_t high = haveTokens ? loader->tokens_.high : loader->labels_.high;
  if (Status s = checkVocabulary(m, loader->count_, width, high, path); !s)
    return s;
  loader->seedMix_ = splitmix64(seed);
  loader->rank_ = uint64_t(rank);
  loader->world_ = uint64_t(world);
  out = std::move(loader);
  return Status::ok();
}

} // namespace strata::runtime
