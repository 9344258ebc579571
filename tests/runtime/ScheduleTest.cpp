//===- ScheduleTest.cpp - The learning-rate schedule of docs/training.md --===//
//
// Expected values computed independently in Python from the formulas in
// docs/training.md (double precision, the same order of operations).
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Training.h"

#include "plan.pb.h"

#include <gtest/gtest.h>

using namespace strata;
using namespace strata::runtime;

namespace {

plan::Training schedule(const std::string &kind, uint64_t warmup,
                        uint64_t total, double minRatio = 0.1) {
  plan::Training t;
  t.set_lr_schedule(kind);
  t.set_warmup_steps(warmup);
  t.set_total_steps(total);
  t.set_min_lr_ratio(minRatio);
  return t;
}

} // namespace

TEST(ScheduleTest, ConstantWithoutWarmup) {
  plan::Training t = schedule("constant", 0, 10);
  for (uint64_t step : {1, 2, 10, 11, 1000})
    EXPECT_EQ(scheduledLearningRate(t, 1e-3, step), 1e-3) << step;
}

TEST(ScheduleTest, ConstantWithWarmup) {
  plan::Training t = schedule("constant", 4, 14);
  EXPECT_DOUBLE_EQ(scheduledLearningRate(t, 1e-3, 1), 0.00025);
  EXPECT_DOUBLE_EQ(scheduledLearningRate(t, 1e-3, 2), 0.0005);
  EXPECT_DOUBLE_EQ(scheduledLearningRate(t, 1e-3, 4), 0.001);
  EXPECT_EQ(scheduledLearningRate(t, 1e-3, 7), 0.001);
}

TEST(ScheduleTest, CosineWithWarmup) {
  // lr 3e-3, 4 warmup steps, horizon 14, floor 10%.
  plan::Training t = schedule("cosine", 4, 14);
  const std::pair<uint64_t, double> expected[] = {
      {1, 0.00075},
      {2, 0.0015},
      {3, 0.0022500000000000003},
      {4, 0.003},
      {5, 0.0029339262969984574},
      {10, 0.0012328270575938211},
      {13, 0.0003660737030015428},
      {14, 0.00030000000000000003},
      // strata-run --steps beyond the horizon stays at the floor.
      {20, 0.00030000000000000003},
  };
  for (auto [step, lr] : expected)
    EXPECT_DOUBLE_EQ(scheduledLearningRate(t, 3e-3, step), lr) << step;
}

TEST(ScheduleTest, CosineWithoutWarmupToZero) {
  plan::Training t = schedule("cosine", 0, 10, 0.0);
  EXPECT_DOUBLE_EQ(scheduledLearningRate(t, 1e-3, 1), 0.0009755282581475768);
  EXPECT_DOUBLE_EQ(scheduledLearningRate(t, 1e-3, 5), 0.0005);
  EXPECT_NEAR(scheduledLearningRate(t, 1e-3, 10), 0.0, 1e-20);
}

TEST(ScheduleTest, OverriddenBaseRateScalesTheSchedule) {
  // strata-run --lr replaces the base rate; the shape stays the compiled one.
  plan::Training t = schedule("cosine", 4, 14);
  for (uint64_t step = 1; step <= 14; ++step)
    EXPECT_NEAR(scheduledLearningRate(t, 6e-3, step),
                2 * scheduledLearningRate(t, 3e-3, step), 1e-18)
        << step;
}
