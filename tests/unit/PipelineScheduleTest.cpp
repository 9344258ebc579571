//===- PipelineScheduleTest.cpp - 1F1B, zero bubble, and their proof ------===//

#include "strata/Transforms/PipelineSchedule.h"

#include <gtest/gtest.h>

using namespace strata::pipeline;

namespace {

std::string text(const std::vector<Action> &order) {
  std::string s;
  for (const Action &a : order)
    s += std::string(a.phase == Phase::Forward    ? "F"
                     : a.phase == Phase::Backward ? "B"
                                                  : "W") +
         std::to_string(a.microBatch) + " ";
  return s;
}

std::vector<StageCost> equal(int64_t stages, double f = 1, double b = 1,
                             double w = 1) {
  return std::vector<StageCost>(stages, StageCost{f, b, w});
}

} // namespace

TEST(PipelineSchedule, OneFOneBIsWarmUpSteadyCoolDown) {
  StageOrders o = buildSchedule(ScheduleKind::OneFOneB, 4, equal(2));
  EXPECT_EQ(text(o[0]), "F0 F1 B0 F2 B1 F3 B2 B3 ");
  EXPECT_EQ(text(o[1]), "F0 B0 F1 B1 F2 B2 F3 B3 ");
  StageOrders few = buildSchedule(ScheduleKind::OneFOneB, 2, equal(4));
  EXPECT_EQ(text(few[0]), "F0 F1 B0 B1 ");
  EXPECT_EQ(text(few[3]), "F0 B0 F1 B1 ");
}

TEST(PipelineSchedule, BothSchedulesAreValidAndHoldOneFOneBsMemory) {
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::ZeroBubble})
    for (int64_t p : {1, 2, 3, 4, 8})
      for (int64_t m : {1, 2, 4, 8, 16}) {
        SCOPED_TRACE("p " + std::to_string(p) + " m " + std::to_string(m));
        StageOrders o = buildSchedule(kind, m, equal(p, 1, 1, 1));
        EXPECT_EQ(verifySchedule(kind, o, m), "");
        for (int64_t s = 0; s < p; ++s)
          EXPECT_LE(peakInFlight(kind, o[s]), std::min(p - s, m))
              << text(o[s]);
      }
}

TEST(PipelineSchedule, OneFOneBBubbleIsTheFormula) {
  // Equal stages: (p-1)/(m+p-1) of the step on every stage.
  for (int64_t p : {2, 4, 8})
    for (int64_t m : {2, 4, 8}) {
      auto costs = equal(p, 1, 2, 0);
      Timeline t = simulate(ScheduleKind::OneFOneB,
                            buildSchedule(ScheduleKind::OneFOneB, m, costs),
                            costs);
      for (int64_t s = 0; s < p; ++s)
        EXPECT_NEAR(t.bubble(s), double(p - 1) / double(m + p - 1), 1e-12)
            << "p " << p << " m " << m << " stage " << s;
    }
}

TEST(PipelineSchedule, ZeroBubbleFillsTheBubbleWithWeightGradients) {
  // F = B = W (the paper's setting): the zero-bubble schedule's idle time
  // is below 1F1B's on the same costs, stage by stage on average.
  for (int64_t p : {2, 4})
    for (int64_t m : {2, 4, 8}) {
      auto costs = equal(p, 1, 1, 1);
      Timeline one = simulate(ScheduleKind::OneFOneB,
                              buildSchedule(ScheduleKind::OneFOneB, m, costs),
                              costs);
      StageOrders zbOrders = buildSchedule(ScheduleKind::ZeroBubble, m, costs);
      Timeline zb = simulate(ScheduleKind::ZeroBubble, zbOrders, costs);
      EXPECT_LT(zb.makespan, one.makespan) << "p " << p << " m " << m;
      EXPECT_LT(zb.meanBubble(), one.meanBubble()) << "p " << p << " m " << m;
    }
  // The last stage runs each backward right after its forward and defers
  // the weight gradients.
  StageOrders o = buildSchedule(ScheduleKind::ZeroBubble, 4, equal(2));
  EXPECT_EQ(text(o[1]).substr(0, 6), "F0 B0 ");
}

TEST(PipelineSchedule, DroppedReceiveIsCaught) {
  // Stage 1 never runs micro-batch 3's forward: stage 0's activation is
  // never received (and stage 1 never sends its gradient).
  StageOrders o = buildSchedule(ScheduleKind::OneFOneB, 4, equal(2));
  std::vector<Action> &last = o[1];
  last.erase(std::find(last.begin(), last.end(), Action{Phase::Forward, 3}));
  EXPECT_EQ(verifySchedule(ScheduleKind::OneFOneB, o, 4),
            "stage 1 never runs the forward of micro-batch 3");
}

TEST(PipelineSchedule, SwappedMicroBatchOrderIsCaught) {
  StageOrders o = buildSchedule(ScheduleKind::OneFOneB, 4, equal(2));
  // Stage 1 takes micro-batch 2 before 1: the activations arrive 1 first.
  std::vector<Action> &last = o[1];
  auto f1 = std::find(last.begin(), last.end(), Action{Phase::Forward, 1});
  auto f2 = std::find(last.begin(), last.end(), Action{Phase::Forward, 2});
  std::swap(*f1, *f2);
  auto b1 = std::find(last.begin(), last.end(), Action{Phase::Backward, 1});
  auto b2 = std::find(last.begin(), last.end(), Action{Phase::Backward, 2});
  std::swap(*b1, *b2);
  EXPECT_EQ(verifySchedule(ScheduleKind::OneFOneB, o, 4),
            "stage 1 waits for the activation of micro-batch 2 from stage 0, "
            "but stage 0 sent the activation of micro-batch 1 first");
}

TEST(PipelineSchedule, DeadlockIsCaught) {
  // Each stage's order is valid on its own; their messages wait on each
  // other.
  StageOrders o(2);
  o[0] = {{Phase::Forward, 0}, {Phase::Backward, 0}, {Phase::Forward, 1},
          {Phase::Backward, 1}};
  // Stage 1 wants micro-batch 1's activation before it sends 0's gradient,
  // but stage 0 sends 1's activation only after receiving 0's gradient.
  o[1] = {{Phase::Forward, 0}, {Phase::Forward, 1}, {Phase::Backward, 0},
          {Phase::Backward, 1}};
  EXPECT_EQ(verifySchedule(ScheduleKind::OneFOneB, o, 2),
            "the schedule deadlocks: stage 0 waits for the gradient of "
            "micro-batch 0 from stage 1; stage 1 waits for the activation of "
            "micro-batch 1 from stage 0");
}

TEST(PipelineSchedule, MissingAndRepeatedPhasesAreCaught) {
  StageOrders o = buildSchedule(ScheduleKind::ZeroBubble, 2, equal(2));
  StageOrders twice = o;
  twice[0].push_back(twice[0].front());
  EXPECT_EQ(verifySchedule(ScheduleKind::ZeroBubble, twice, 2),
            "stage 0 runs the forward of micro-batch 0 twice");
  StageOrders noW = o;
  noW[1].erase(std::find(noW[1].begin(), noW[1].end(),
                         Action{Phase::Weight, 1}));
  EXPECT_EQ(verifySchedule(ScheduleKind::ZeroBubble, noW, 2),
            "stage 1 never runs the weight gradient of micro-batch 1");
  StageOrders early = buildSchedule(ScheduleKind::OneFOneB, 2, equal(1));
  std::swap(early[0][0], early[0][1]);
  EXPECT_EQ(verifySchedule(ScheduleKind::OneFOneB, early, 2),
            "stage 0 runs the backward of micro-batch 0 before its forward");
}
