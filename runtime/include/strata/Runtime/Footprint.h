//===- Footprint.h - What one rank of a plan allocates ----------*- C++ -*-===//
//
// A rank allocates the tensors of the programs it runs, nothing else: with
// pipeline stages, a rank of stage s runs pipeline_step_<s> and
// optimizer_step_<s> and holds that stage's parameters, gradients,
// optimizer states, constants and activation arena only. The loader
// (Executor::create), the checkpoints (each rank saves what it holds),
// --consolidate (which stage holds a parameter) and strata-inspect (each
// stage's planned peak) all ask here, so they agree.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_FOOTPRINT_H
#define STRATA_RUNTIME_FOOTPRINT_H

#include <cstdint>
#include <string>
#include <vector>

namespace strata::plan {
class Plan;
class Program;
} // namespace strata::plan

namespace strata::runtime {

/// The number of pipeline stages (1 without).
int pipelineStages(const plan::Plan &p);

/// The programs a rank of `stage` runs: pipeline_step_<stage> and
/// optimizer_step_<stage> in a pipelined plan; every program otherwise, or
/// when `stage` is negative.
std::vector<const plan::Program *> programsOfStage(const plan::Plan &p,
                                                   int stage);

/// Indexed by tensor id: whether one of `programs` names the tensor (an
/// instruction's input or output, or a binding).
std::vector<bool> tensorsUsedBy(const plan::Plan &p,
                                const std::vector<const plan::Program *> &programs);

/// Indexed by tensor id: the tensors a rank of `stage` holds: those its
/// programs name, and every persistent tensor no stage's program names
/// (a BERT pooler the loss does not reach keeps its initial value on each
/// stage, for checkpoints and export; the runtime's own state such as the
/// loss scale). Every tensor without stages or for a negative `stage`.
std::vector<bool> tensorsOfStage(const plan::Plan &p, int stage);
/// tensorsOfStage of every stage at once (one set without stages): the
/// stages' programs are walked once, not once per stage.
std::vector<std::vector<bool>> tensorsOfEveryStage(const plan::Plan &p);

/// The bytes one rank of `stage` allocates, laid out as the loader lays
/// them: persistent tensors and constants 64-byte aligned, SSD-tier ones
/// 4 KiB-aligned, the activation arena (and the host activation arena) the
/// largest of its programs'.
struct Footprint {
  uint64_t state = 0;      // persistent tensors on the device tier
  uint64_t constants = 0;
  uint64_t activations = 0;          // the arena
  uint64_t activationLowerBound = 0; // the most bytes live at once
  uint64_t host = 0;       // persistent tensors on the host tier
  uint64_t hostActivations = 0; // the host activation arena (offloaded)
  uint64_t ssd = 0;
  uint64_t parameters = 0;       // parameter elements this rank holds
  uint64_t parameterBytes = 0;
  /// The device peak: state, constants and the arena.
  uint64_t device() const { return state + constants + activations; }
};
/// `held` is tensorsOfStage(p, stage) (tensorsOfEveryStage's for a loop
/// over the stages).
Footprint footprintOf(const plan::Plan &p, int stage,
                      const std::vector<bool> &held);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_FOOTPRINT_H
