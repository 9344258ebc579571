//===- openmpi_sleep_poll.cpp - A non-blocking all-reduce that never ends --===//
//
// A reproducer without Strata's code for the hang that the emulated
// cluster's calibration met (docs/simulation.md, "A barrier that never
// completed"). Every rank runs a thread that copies 1 MiB blocks without a
// pause while its main thread polls an MPI_Iallreduce of one double with
// MPI_Testall, as Communicator::waitAll does. With 4 ranks on two of
// tools/cluster.sh's nodes (TCP between them, shared memory within), the
// all-reduce never completes when the polling thread sleeps between polls
// (mode 0: 50 us after the first 1000, as waitAll; mode 5: every 16th
// poll), and completes when it spins (mode 1) or yields (mode 4), when the
// call blocks (mode 2), without the copying thread (mode 3), with one rank
// a node, or with the 4 ranks on one host; an all-reduce over each node's
// two ranks alone does not stall either. A stall, not a lost message:
// stopping the copying thread after 2 s of waiting lets every all-reduce
// complete. Open MPI 4.1.4, 2026-11-27.
//
//   mpicxx -O2 -pthread tools/repro/openmpi_sleep_poll.cpp -o /tmp/sleep_poll
//   tools/cluster.sh run -N 2 -n 4 --inter-node-bandwidth 100mbit -- \
//       /tmp/sleep_poll 100 0     # ends with "did not complete in 20 s"
//   tools/cluster.sh run -N 2 -n 4 --inter-node-bandwidth 100mbit -- \
//       /tmp/sleep_poll 100 1     # prints "done 100 rounds"
//
//===----------------------------------------------------------------------===//

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rounds = argc > 1 ? std::atoi(argv[1]) : 50;
  // 0 sleep after 1000 polls, 1 spin, 2 blocking, 3 no copying thread,
  // 4 yield after 1000 polls, 5 sleep every 16th poll after 1000.
  int mode = argc > 2 ? std::atoi(argv[2]) : 0;
  std::vector<char> src(1 << 20, 1), dst(1 << 20);
  for (int r = 0; r < rounds; ++r) {
    std::atomic<bool> stop{false};
    std::thread copier([&] {
      while (mode != 3 && !stop.load(std::memory_order_relaxed))
        std::memcpy(dst.data(), src.data(), src.size());
    });
    for (int k = 0; k < 4; ++k) {
      double v = 1;
      if (mode == 2) {
        MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        continue;
      }
      MPI_Request request;
      MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                     &request);
      auto start = std::chrono::steady_clock::now();
      int done = 0;
      for (int polls = 0; !done; ++polls) {
        MPI_Testall(1, &request, &done, MPI_STATUSES_IGNORE);
        if (std::chrono::steady_clock::now() - start >
            std::chrono::seconds(20)) {
          std::fprintf(stderr,
                       "rank %d: round %d call %d did not complete in 20 s "
                       "(%d polls)\n",
                       rank, r, k, polls);
          MPI_Abort(MPI_COMM_WORLD, 3);
        }
        if (polls <= 1000)
          continue;
        if (mode == 4)
          std::this_thread::yield();
        else if (mode == 0 || (mode == 5 && polls % 16 == 0))
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    // A stretch of work with the copying thread still running.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    volatile double x = 0;
    while (std::chrono::steady_clock::now() < until)
      x = x + 1;
    stop = true;
    copier.join();
  }
  if (rank == 0)
    std::printf("done %d rounds\n", rounds);
  MPI_Finalize();
}
