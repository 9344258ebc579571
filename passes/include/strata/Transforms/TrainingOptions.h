//===- TrainingOptions.h - The training options, declared once --*- C++ -*-===//
//
// Every option of the training step is one row of TrainingOptions.def.
// From it come TrainingConfig (below: what strata-compile collects and the
// artifact records), the pipelines' options (Passes.h: what strata-opt
// --strata-training-pipeline= and --strata-memory-pipeline= take) and
// strata-compile's flags, so a flag has one name, one type, one default
// and one help text everywhere. Enumerated choices are enums with
// cl::values; sizes take units (6MiB, 40G).
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TRANSFORMS_TRAININGOPTIONS_H
#define STRATA_TRANSFORMS_TRAININGOPTIONS_H

#include "strata/Transforms/PipelineSchedule.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata {

enum class Precision { FP32, BF16, FP16 };
enum class PrecisionStorage { Narrow, F32 };
enum class Optimizer { AdamW, SGD };
enum class Hierarchical { Auto, On, Off };
enum class GradSync { TwoHop, Global };
enum class ReduceDtype { FP32, Narrow };
enum class Recompute { None, Auto, Always, Layers };
enum class LrSchedule { Constant, Cosine };

/// The names the flags take (and the artifact records).
llvm::StringRef stringify(Precision p);
llvm::StringRef stringify(PrecisionStorage s);
llvm::StringRef stringify(Optimizer o);
llvm::StringRef stringify(Hierarchical h);
llvm::StringRef stringify(GradSync g);
llvm::StringRef stringify(ReduceDtype r);
llvm::StringRef stringify(Recompute r);
llvm::StringRef stringify(LrSchedule s);

/// A number of bytes, written with a unit: "4096", "6MiB", "6M", "40G",
/// "1.5GiB" (K, M, G, T: powers of 1024). 0: none.
struct ByteSize {
  ByteSize() = default;
  explicit ByteSize(uint64_t bytes) : bytes(bytes) {}
  uint64_t bytes = 0;
  explicit operator bool() const { return bytes != 0; }
  bool operator==(const ByteSize &o) const { return bytes == o.bytes; }
};
std::optional<uint64_t> parseByteSize(llvm::StringRef text);
inline llvm::raw_ostream &operator<<(llvm::raw_ostream &os, ByteSize size) {
  return os << size.bytes;
}

/// Every option's value: the command line's, or a pipeline's.
struct TrainingConfig {
#define STRATA_OPTION(TYPE, FIELD, FLAG, DEFAULT, DESC, ...) TYPE FIELD = DEFAULT;
#define STRATA_TRAINING_OPTION STRATA_OPTION
#define STRATA_TOPOLOGY_OPTION STRATA_OPTION
#define STRATA_MEMORY_OPTION STRATA_OPTION
#define STRATA_RUNTIME_OPTION STRATA_OPTION
#include "strata/Transforms/TrainingOptions.def"
#undef STRATA_OPTION
  /// Parameter globs kept fixed (--freeze, repeatable).
  std::vector<std::string> freeze;

  /// With pipeline stages and recompute = layers: each stage's first N
  /// layers checkpointed (-1: every layer). Not a flag: strata-compile's
  /// --recompute auto chooses it under --gpu-memory.
  int64_t stageRecomputeLayers = -1;

  /// AdamW's default weight decay is 0.01, SGD's 0 (weightDecay < 0: the
  /// optimizer's default).
  double resolvedWeightDecay() const {
    return weightDecay >= 0 ? weightDecay
           : optimizer == Optimizer::AdamW ? 0.01
                                           : 0.0;
  }
};

/// The ranks and groups a topology's options name, defaults filled in
/// (K and P default to N; hierarchical=auto is on when P > K and K | P).
struct ResolvedTopology {
  unsigned world = 1, ranksPerNode = 1, partition = 1;
  bool hierarchical = false;
};
inline ResolvedTopology resolveTopology(unsigned world, unsigned gpusPerNode,
                                        unsigned partitionGroup,
                                        Hierarchical hierarchical,
                                        unsigned pipelineStages = 1) {
  ResolvedTopology t;
  unsigned stages = pipelineStages ? pipelineStages : 1;
  // --pipeline-stages p alone: one rank per stage.
  t.world = world > 1 ? world : stages;
  t.ranksPerNode = gpusPerNode ? gpusPerNode : t.world;
  t.partition = partitionGroup ? partitionGroup
                               : std::max(1u, t.world / stages);
  bool possible = t.partition > t.ranksPerNode &&
                  t.partition % t.ranksPerNode == 0;
  t.hierarchical = hierarchical == Hierarchical::On ||
                   (hierarchical == Hierarchical::Auto && possible);
  return t;
}

/// --stage-boundaries: comma-separated layer indices ("3,6"); false when
/// the text is not that.
bool parseStageBoundaries(llvm::StringRef text,
                          llvm::SmallVectorImpl<int64_t> &out);

} // namespace strata

namespace llvm::cl {

/// --gpu-memory 6MiB: sizes with units, on the command line and in the
/// pipelines' options.
template <> class parser<strata::ByteSize> : public basic_parser<strata::ByteSize> {
public:
  parser(Option &o) : basic_parser(o) {}
  bool parse(Option &o, StringRef argName, StringRef arg,
             strata::ByteSize &value) {
    std::optional<uint64_t> bytes = strata::parseByteSize(arg);
    if (!bytes)
      return o.error("expects a size like 6MiB or 40G, got '" + arg + "'");
    value = strata::ByteSize(*bytes);
    return false;
  }
  StringRef getValueName() const override { return "size"; }
  void printOptionDiff(const Option &o, strata::ByteSize value,
                       OptionValue<strata::ByteSize> defaultValue,
                       size_t globalWidth) const {
    printOptionName(o, globalWidth);
    outs() << "= " << value.bytes << "\n";
  }
  void anchor() override {}
};

} // namespace llvm::cl

#endif // STRATA_TRANSFORMS_TRAININGOPTIONS_H
