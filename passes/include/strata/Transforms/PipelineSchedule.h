//===- PipelineSchedule.h - Pipeline schedules, their timing, their proof -*- C++ -*-===//
//
// The order in which each pipeline stage runs its micro-batches' forward
// (F), backward (B) and, for the zero-bubble schedule, weight-gradient (W)
// work; the timeline that order gives under a cost model (the predicted
// bubble); and the check that the sends and receives the order implies
// match and cannot deadlock.
//
// 1F1B (the MiCS thesis's synchronized schedule): stage s runs
// min(p-s-1, m) forwards, then alternates one forward and one backward,
// then runs the remaining backwards; B computes the input and the weight
// gradients. Zero bubble (Qi et al., ICLR 2024, ZB-H1): B computes only the
// input gradient, which the previous stage waits for, and W the weight
// gradient, which nobody waits for, so Ws fill the bubbles. The order is
// built by simulating the pipeline: an idle stage runs a ready B first,
// then a ready F while fewer than p-s micro-batches hold activations (F
// done, W not: 1F1B's activation memory), then a pending W.
//
// Communication model (what the runtime implements): sends never block
// the stage's program (each peer has its own send stream, in program
// order); a receive blocks until the neighbour's matching send; the messages
// of one channel (stage to stage, one direction) arrive in the order sent.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TRANSFORMS_PIPELINESCHEDULE_H
#define STRATA_TRANSFORMS_PIPELINESCHEDULE_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata::pipeline {

enum class ScheduleKind { OneFOneB, ZeroBubble };

enum class Phase : uint8_t { Forward, Backward, Weight };

/// One unit of a stage's work: a phase of one micro-batch.
struct Action {
  Phase phase;
  int64_t microBatch;
  bool operator==(const Action &o) const {
    return phase == o.phase && microBatch == o.microBatch;
  }
};

/// The time a stage's phases take (any unit). Under 1F1B a backward takes
/// backward + weight.
struct StageCost {
  double forward = 1, backward = 1, weight = 1;
};

/// Each stage's actions, in the order it runs them.
using StageOrders = std::vector<std::vector<Action>>;

/// The schedule of `kind` for `costs.size()` stages and `microBatches`.
StageOrders buildSchedule(ScheduleKind kind, int64_t microBatches,
                          llvm::ArrayRef<StageCost> costs);

/// When each action runs, each stage as soon as its order and the data
/// allow (communication takes no time).
struct Timeline {
  struct Slot {
    Action action;
    double start, end;
  };
  std::vector<std::vector<Slot>> stages;
  /// From the first start to the last end.
  double makespan = 0;
  /// Stage s's idle time over the makespan.
  double bubble(size_t stage) const;
  /// The mean of the stages' bubbles.
  double meanBubble() const;
};

/// The timeline of `orders` under `costs` (`kind` says whether B includes
/// W). `orders` must pass verifySchedule.
Timeline simulate(ScheduleKind kind, const StageOrders &orders,
                  llvm::ArrayRef<StageCost> costs);

/// Checks that every stage runs each micro-batch's F, B (and W with the
/// zero-bubble schedule) exactly once, in that order; that activations and
/// gradients are received in the order the neighbour sends them; and that
/// no stage waits forever. Returns "" or one line saying what is wrong,
/// naming the stage and micro-batch.
std::string verifySchedule(ScheduleKind kind, const StageOrders &orders,
                           int64_t microBatches);

/// One send or receive of a stage's program: to or from stage `peer`, the
/// value `tag` of micro-batch `microBatch`.
struct Message {
  bool send;
  int64_t peer, microBatch, tag;
};

/// The communication check verifySchedule makes, on each stage's sends and
/// receives in program order: every receive finds the message it expects
/// at the head of its channel, every send is received, no stage waits
/// forever. `tagName` names a tag in the one-line error ("the activation",
/// "value 3").
std::string
verifyMessages(const std::vector<std::vector<Message>> &programs,
               const std::function<std::string(int64_t)> &tagName);

/// The most micro-batches stage `stage` holds activations for at once.
int64_t peakInFlight(ScheduleKind kind, const std::vector<Action> &order);

const char *phaseName(Phase phase);

} // namespace strata::pipeline

#endif // STRATA_TRANSFORMS_PIPELINESCHEDULE_H
