//===- Executor.h - Runs an artifact's instructions -------------*- C++ -*-===//
//
// The executor owns one arena holding every tensor of the plan, allocated
// once when it is created; running the plan allocates nothing. Kernels come
// from a backend's registry (the CPU one for now).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_EXECUTOR_H
#define STRATA_RUNTIME_EXECUTOR_H

#include "strata/Runtime/Artifact.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime {

class Executor {
public:
  /// Lays out the arena, copies constants and initial parameters in, and
  /// resolves every instruction's kernel (an op without one is an error).
  static Status create(const Artifact &artifact, const KernelRegistry &kernels,
                       std::unique_ptr<Executor> &out);

  /// The view of an input, output or parameter by name.
  TensorView *findInput(const std::string &name);
  const TensorView *findOutput(const std::string &name) const;
  std::vector<std::string> getInputNames() const;
  std::vector<std::string> getOutputNames() const;

  /// Runs every instruction in order; the first failing kernel's message
  /// names the instruction and its ONNX node.
  Status run(uint64_t seed = 0);

  size_t getArenaBytes() const { return arena_.size(); }

private:
  /// An instruction with its views prebuilt: the arena never moves, so a
  /// run copies nothing.
  struct Step {
    const KernelFn *kernel;
    std::vector<TensorView> inputs, outputs;
    KernelAttrs attrs;
    std::string description;
  };
  Executor() = default;
  std::vector<unsigned char> arena_;
  std::vector<TensorView> tensors_;
  std::vector<Step> steps_;
  std::map<std::string, uint32_t> inputs_, outputs_;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_EXECUTOR_H
