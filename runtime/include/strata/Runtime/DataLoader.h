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
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_DATALOADER_H
