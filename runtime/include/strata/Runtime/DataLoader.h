//===- DataLoader.h - Deterministic batches for training --------*- C++ -*-===//
//
// Every batch is a pure function of (seed, optimizer step, micro-step): the
// sampling rule of docs/training.md, which models/strata_data.py mirrors in
// Python so PyTorch references see the same batches.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_DATALOADER_H
#define STRATA_RUNTIME_DATALOADER_H

#include "strata/Runtime/Kernel.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime {

/// splitmix64's output function of x + golden gamma.
uint64_t splitmix64(uint64_t x);

/// An input the loader fills, with the bound of its integer values.
struct LoaderInput {
  std::string name;
  TensorView *view;
  int64_t high = 2;
};

class DataLoader {
public:
  virtual ~DataLoader();
  /// Fills every input for micro-step `micro` of optimizer step `step`
  /// (0-based), with `accum` micro-steps per optimizer step.
  virtual Status fill(uint64_t step, uint32_t micro, uint32_t accum) = 0;
  /// Tokens (or samples) one micro-step consumes, for throughput.
  virtual int64_t itemsPerMicroStep() const = 0;
  virtual bool countsTokens() const = 0;

  /// Synthetic inputs for any model.
  /// Rank r of N data-parallel ranks reads global sample
  /// k = ((s * A + m) * N + r) * B + b (docs/training.md).
  static std::unique_ptr<DataLoader> synthetic(std::vector<LoaderInput> inputs,
                                               uint64_t seed, int rank = 0,
                                               int world = 1);
  /// Windows of a token file: the one integer [B, T] input and `labels`.
  /// `partial`: a pipeline stage may take the tokens or the labels alone
  /// (the first stage reads the tokens, the last the labels of the same
  /// windows).
  static Status tokens(const std::string &path, const std::string &dtype,
                       std::vector<LoaderInput> inputs, uint64_t seed,
                       std::unique_ptr<DataLoader> &out, int rank = 0,
                       int world = 1, bool partial = false);
  /// A folder of .npy arrays (docs/data.md): one per input, named by
  /// datasetFileName, and labels.npy. Every file is mapped and checked here
  /// (shape, dtype, sample count, labels within [0, labelsHigh) or
  /// `ignoreIndex`); sample k is row splitmix64(splitmix64(seed) ^ k) mod N.
  /// `partial`: a pipeline stage's inputs, so files for other inputs are
  /// no error.
  static Status arrays(const std::string &dir, std::vector<LoaderInput> inputs,
                       int64_t ignoreIndex, uint64_t seed,
                       std::unique_ptr<DataLoader> &out, int rank = 0,
                       int world = 1, bool partial = false);
};

/// The file in a dataset folder that holds input `name`: the name with
/// every byte outside [A-Za-z0-9._-] written as %XX (upper-case hex), and
/// ".npy" (`input_ids` -> input_ids.npy, `x:0` -> x%3A0.npy).
std::string datasetFileName(const std::string &name);

/// The arrays of a dataset folder, checked against the inputs they feed
/// (DataLoader::arrays samples them; evaluation reads them in order).
class ArrayDataset {
public:
  ~ArrayDataset();
  /// Opens `dir`/datasetFileName(input) for every input (see
  /// DataLoader::arrays); a one-line error naming the file and what is
  /// wrong with it.
  static Status open(const std::string &dir,
                     const std::vector<LoaderInput> &inputs,
                     int64_t ignoreIndex, bool partial,
                     std::unique_ptr<ArrayDataset> &out);
  /// Samples in every file (the first dimension).
  uint64_t samples() const { return samples_; }
  /// Copies sample `row` into row `b` of input `i`'s view, converted to the
  /// input's dtype (exact: open checked every value).
  void copySample(size_t i, uint64_t row, int64_t b) const;
  size_t inputs() const { return arrays_.size(); }
  const LoaderInput &input(size_t i) const;

  struct Array;

private:
  std::vector<std::unique_ptr<Array>> arrays_;
  uint64_t samples_ = 0;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_DATALOADER_H
