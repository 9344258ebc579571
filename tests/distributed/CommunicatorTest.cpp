//===- CommunicatorTest.cpp - Two collective streams at once, over MPI ----===//
//
// Run under mpirun with 2 ranks (ctest distributed.communicator). The
// collective and reduce streams issue collectives from two threads at once,
// in opposite orders on the two ranks. With one communicator shared by both
// streams the ranks' first collectives would match each other (an
// all-gather against an all-reduce), and with a lock held across a blocking
// wait each rank's first thread would wait for the other rank's, which
// cannot take the lock: either way a hang, which the communicator's timeout
// turns into an abort naming the collective.
//
// With STRATA_COMM_TEST_STALL=1 (ctest distributed.communicator.stall) rank 1
// never joins a reduce-stream collective: rank 0's timeout diagnostic must
// name it with the reduce stream's own sequence number.
//
// With STRATA_COMM_TEST_FOUR=1 (ctest distributed.communicator.four) the
// world is 4 ranks: more than the cores of a 2-core machine, where a
// waiter's pauses keep the default timer slack.
//
// With STRATA_COMM_TEST_CHAIN=1 (ctest distributed.communicator.chain, 4
// ranks on two "nodes" of 2) rank 0 waits for rank 1, which waits for rank 3,
// which is gone: rank 1's diagnostic must name rank 3, and rank 0 must not
// end the job first blaming rank 1.
//
//===----------------------------------------------------------------------===//

#include "strata/Runtime/Communicator.h"

#include <gtest/gtest.h>

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

using namespace strata::runtime;

namespace {

/// One communicator for the whole test binary (MPI initialises once).
Communicator &communicator() {
  static std::unique_ptr<Communicator> comm = [] {
    TopologyInfo topology;
    bool four = std::getenv("STRATA_COMM_TEST_CHAIN") ||
                std::getenv("STRATA_COMM_TEST_FOUR");
    topology.world = four ? 4 : 2;
    topology.ranksPerNode = 2;
    topology.partition = four ? 4 : 2;
    std::unique_ptr<Communicator> c;
    const char *timeout = std::getenv("STRATA_COMM_TEST_TIMEOUT");
    Status s =
        Communicator::create(topology, timeout ? std::atof(timeout) : 20, c);
    if (!s) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      std::abort();
    }
    return c;
  }();
  return *comm;
}

void pause(int millis) {
  std::this_thread::sleep_for(std::chrono::milliseconds(millis));
}

TEST(Communicator, TwoStreamsInOppositeOrders) {
  Communicator &comm = communicator();
  ASSERT_EQ(comm.world(), 2) << "run under mpirun -np 2";
  const int rank = comm.rank();
  const int rounds = 20;
  const size_t n = 1000;
  const uint64_t gathersBefore = comm.sequence(Group::Partition, 0);
  const uint64_t reductionsBefore = comm.sequence(Group::Partition, 1);
  std::vector<Status> gatherStatus(rounds, Status::ok()),
      reduceStatus(rounds, Status::ok());
  std::vector<bool> gatheredRight(rounds), reducedRight(rounds);

  // The collective stream: all-gathers on channel 0.
  auto gathers = [&] {
    for (int r = 0; r < rounds; ++r) {
      // Rank 1 lets its reduce stream go first.
      if (rank == 1)
        pause(r % 3 == 0 ? 30 : 2);
      std::vector<float> in(n, float(rank * 1000 + r)), out(2 * n, -1.0f);
      gatherStatus[r] = comm.allGather(
          Group::Partition, {{DType::F32, in.data(), out.data(), n}}, 0);
      bool right = true;
      for (size_t i = 0; i < 2 * n; ++i)
        right &= out[i] == float((i / n) * 1000 + r);
      gatheredRight[r] = right;
    }
  };
  // The reduce stream: reduce-scatters and all-reduces on channel 1.
  auto reductions = [&] {
    for (int r = 0; r < rounds; ++r) {
      // Rank 0 lets its collective stream go first.
      if (rank == 0)
        pause(r % 3 == 0 ? 30 : 2);
      std::vector<float> in(2 * n), out(n, -1.0f);
      for (size_t i = 0; i < 2 * n; ++i)
        in[i] = float(i + rank + r);
      bool right;
      if (r % 2 == 0) {
        reduceStatus[r] = comm.reduceScatterSum(
            Group::Partition, {{DType::F32, in.data(), out.data(), n}}, 1);
        right = true;
        for (size_t i = 0; i < n; ++i)
          right &= out[i] == float(2 * (rank * n + i) + 1 + 2 * r);
      } else {
        reduceStatus[r] = comm.allReduceSum(
            Group::Partition, {{DType::F32, in.data(), in.data(), 2 * n}}, 1);
        right = true;
        for (size_t i = 0; i < 2 * n; ++i)
          right &= in[i] == float(2 * i + 1 + 2 * r);
      }
      reducedRight[r] = right;
    }
  };
  std::thread collective(gathers), reduce(reductions);
  collective.join();
  reduce.join();
  for (int r = 0; r < rounds; ++r) {
    EXPECT_TRUE(gatherStatus[r]) << gatherStatus[r].message();
    EXPECT_TRUE(reduceStatus[r]) << reduceStatus[r].message();
    EXPECT_TRUE(gatheredRight[r]) << "all-gather of round " << r;
    EXPECT_TRUE(reducedRight[r]) << "reduction of round " << r;
  }
  // Each channel numbers its own collectives (the timeout diagnostic's #).
  EXPECT_EQ(comm.sequence(Group::Partition, 0) - gathersBefore,
            uint64_t(rounds));
  EXPECT_EQ(comm.sequence(Group::Partition, 1) - reductionsBefore,
            uint64_t(rounds));
}

TEST(Communicator, MainThreadBetweenStreams) {
  // The main thread's bookkeeping (channel 0, world) while the reduce
  // stream reduces: the lock serialises them, the communicators keep them
  // apart.
  Communicator &comm = communicator();
  const size_t n = 4096;
  std::vector<float> in(n, 1.0f);
  Status reduced = Status::ok();
  std::thread reduce([&] {
    reduced = comm.allReduceSum(Group::World,
                                {{DType::F32, in.data(), in.data(), n}}, 1);
  });
  double values[2] = {double(comm.rank()), 1.0};
  Status summed = comm.sumOverWorld(values, 2, "a test sum");
  reduce.join();
  ASSERT_TRUE(summed) << summed.message();
  ASSERT_TRUE(reduced) << reduced.message();
  EXPECT_EQ(values[0], 1.0);
  EXPECT_EQ(values[1], 2.0);
  for (float v : in)
    ASSERT_EQ(v, 2.0f);
}

TEST(Communicator, StalledReduceStreamIsNamed) {
  if (!std::getenv("STRATA_COMM_TEST_STALL"))
    GTEST_SKIP() << "set STRATA_COMM_TEST_STALL=1 (it aborts the job)";
  Communicator &comm = communicator();
  float x = float(comm.rank()), y[2];
  // Three all-gathers on the collective stream's channel, then a reduction
  // on the reduce stream's that rank 1 never joins: rank 0 names it as
  // "all_reduce #1 ... (reduce stream)", rank 1 as missing, and aborts
  // every rank.
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(comm.allGather(Group::Partition, {{DType::F32, &x, y, 1}}, 0));
  if (comm.rank() == 1)
    for (;;)
      pause(1000);
  Status s = comm.allReduceSum(Group::Partition, {{DType::F32, &x, &x, 1}}, 1);
  FAIL() << "the stalled reduction returned: " << s.message();
}

TEST(Communicator, StalledChainNamesTheRankAtItsEnd) {
  if (!std::getenv("STRATA_COMM_TEST_CHAIN"))
    GTEST_SKIP() << "set STRATA_COMM_TEST_CHAIN=1 (it aborts the job)";
  Communicator &comm = communicator();
  ASSERT_EQ(comm.world(), 4) << "run under mpirun -np 4";
  float x = float(comm.rank()), y[2];
  Status s = Status::ok();
  switch (comm.rank()) {
  case 0:
    // Waits first, for rank 1 on node 0: it times out first.
    s = comm.allGather(Group::Intra, {{DType::F32, &x, y, 1}}, 0);
    break;
  case 1:
    // Waits 1.5 s later, for rank 3 on node 1, which never comes.
    pause(1500);
    s = comm.allGather(Group::Inter, {{DType::F32, &x, y, 1}}, 0);
    break;
  default:
    // Node 1: gone (never polls, never answers).
    for (;;)
      pause(1000);
  }
  FAIL() << "the stalled all-gather returned: " << s.message();
}

TEST(Communicator, WaiterPausesPreciselyWhereRanksHaveCores) {
  // Rank 1 comes 20 ms late, so rank 0's waiter spins out and pauses
  // between polls. Where this machine's ranks do not outnumber its cores,
  // the waiting thread's timer slack is then 1 us (a 50 us pause that ends
  // on time); where they do, it keeps the slack it had (here 50 us, set
  // first, so that neither outcome is inherited).
  Communicator &comm = communicator();
  std::vector<float> in(16, float(comm.rank()));
  std::vector<float> out(16 * size_t(comm.world()));
  unsigned long slack = 0;
  Status gathered = Status::ok();
  std::thread waiter([&] {
    (void)prctl(PR_SET_TIMERSLACK, 50000UL, 0UL, 0UL, 0UL);
    if (comm.rank() != 0)
      pause(20);
    gathered = comm.allGather(Group::World,
                              {{DType::F32, in.data(), out.data(), in.size()}});
    slack = (unsigned long)prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
  });
  waiter.join();
  ASSERT_TRUE(gathered) << gathered.message();
  if (comm.rank() != 0)
    return;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  bool ownCores = unsigned(comm.world()) <= cores;
  EXPECT_EQ(slack, ownCores ? 1000UL : 50000UL)
      << comm.world() << " ranks on " << std::thread::hardware_concurrency()
      << " cores";
}

TEST(Communicator, UnknownChannel) {
  Communicator &comm = communicator();
  float x = 0, y = 0;
  Status s = comm.allGather(Group::Partition, {{DType::F32, &x, &y, 1}}, 2);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message(), "all_gather: no channel 2");
}

} // namespace
