//===- Communicator.h - Collectives between ranks ---------------*- C++ -*-===//
//
// The CPU backend's collectives over MPI: one communicator per group kind of
// the artifact's topology and per channel, coalesced (grouped) non-blocking
// calls polled against a deadline, and byte counters per collective and
// link class. A collective that does not complete in time aborts every rank
// with a message naming it, its group and the ranks that never arrived.
//
// Two streams issue collectives at once (the parameter all-gathers on
// `collective`, the gradient reductions on `reduce`): each has a channel,
// its own duplicate of every group's communicator, so the two streams'
// collectives never match each other, and its own sequence numbers. MPI
// runs MPI_THREAD_SERIALIZED: one mutex serialises every MPI call, held
// for a start or one poll (MPI_Testall) at a time and released between
// polls, so neither stream's wait holds the other's up.
//
// The counters model ring algorithms, as NCCL runs them: in a group of G
// members (in group order), each member receives from its predecessor
// (G-1)/G of an all-gather's result or of a reduce-scatter's operand, and
// 2(G-1)/G of an all-reduce's buffer; the bytes count as intra-node when
// the predecessor is on the same node (rank / K), inter-node otherwise.
// Over MPI the library picks its own algorithm; the counters are what the
// schedule moves on a ring, which is what the formulas in
// docs/distributed.md are stated for.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_COMMUNICATOR_H
#define STRATA_RUNTIME_COMMUNICATOR_H

#include "strata/Runtime/Kernel.h"
#include "strata/Runtime/Topology.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace strata::runtime {

class Communicator {
public:
  using Group = runtime::Group;
  using Kind = CollectiveKind;
  static constexpr int kGroups = runtime::kGroups;
  static constexpr int kKinds = kCollectiveKinds;
  /// Channels (Topology.h): 0 for the `collective` stream and every caller
  /// outside a program, 1 for the `reduce` stream.
  static constexpr int kChannels = kCollectiveChannels;

  /// One tensor of a coalesced call. `count` is elements: per member for
  /// all-gather (the shard) and reduce-scatter (the result), the whole
  /// buffer for all-reduce.
  struct Buffer {
    DType dtype;
    const void *in;
    void *out;
    size_t count;
  };

  /// Bytes received, by collective and link class.
  using Traffic = std::array<std::array<double, 2>, kKinds>;

  ~Communicator();
  /// Initializes MPI if needed; the launch must have `topology.world` ranks.
  static Status create(const TopologyInfo &topology, double timeoutSeconds,
                       std::unique_ptr<Communicator> &out);

  int rank() const { return rank_; }
  int world() const { return topology_.world; }
  const TopologyInfo &topology() const { return topology_; }
  /// The ranks of this rank's group of a kind, in group order.
  const std::vector<int> &members(Group group) const {
    return members_[int(group)];
  }
  /// This rank's position in its group of a kind.
  int indexIn(Group group) const;

  static const char *kindName(Kind kind) { return collectiveName(kind); }

  /// Each out = concatenation over the group of each member's in, on
  /// `channel`'s communicator of the group.
  Status allGather(Group group, const std::vector<Buffer> &buffers,
                   int channel = 0);
  /// Each out = this member's slice of the element-wise sum of in over
  /// the group.
  Status reduceScatterSum(Group group, const std::vector<Buffer> &buffers,
                          int channel = 0);
  /// Each out = element-wise sum of in over the group (in == out: in place).
  Status allReduceSum(Group group, const std::vector<Buffer> &buffers,
                      int channel = 0);

  /// Bookkeeping outside the counters: the element-wise sum over every
  /// rank of `values` (f64), in place.
  Status sumOverWorld(double *values, size_t count, const std::string &what);
  /// Counts a collective a device library (NCCL) ran on this rank's
  /// `group`, as the MPI path counts its own: per buffer, the shard
  /// (all-gather, reduce-scatter) or buffer (all-reduce) bytes on the ring
  /// model (`count` is elements of the shard or buffer).
  void countDeviceCollective(Group group, Kind kind, DType dtype,
                             size_t count) {
    this->count(group, kind,
                ringBytes(kind, int(members(group).size()),
                          double(count * byteWidth(dtype))));
  }
  /// The bytes of `group`'s first member, on every member (a device
  /// library's communicator id).
  Status broadcastFromFirst(Group group, std::string &bytes,
                            const std::string &what);
  /// Collectives started on `channel` of `group` so far (the number the
  /// timeout diagnostic gives the stalled one).
  uint64_t sequence(Group group, int channel) const;
  /// Bookkeeping outside the counters: every rank's `value`, by rank.
  Status gatherOverWorld(uint64_t value, std::vector<uint64_t> &out,
                         const std::string &what);

  const Traffic &traffic() const { return traffic_; }

  /// Pipeline stages: this rank's stage.
  int stage() const { return stageOf(topology_, rank_); }
  /// Sends `bytes` to this rank's counterpart on `stage` without waiting
  /// for the receive: the bytes are copied, the send completes in the
  /// background (the messages to one rank arrive in the order sent).
  /// `what` names the message in errors.
  Status sendToStage(int stage, const void *data, size_t bytes,
                     const std::string &what);
  /// Receives the oldest message from this rank's counterpart on `stage`,
  /// which must be `bytes` long; waits at most the run's timeout, then
  /// names `what` and aborts every rank.
  Status recvFromStage(int stage, void *data, size_t bytes,
                       const std::string &what);
  /// Waits for every background send (before the run ends).
  Status finishSends();
  /// Ends every rank of the job at once (MPI_Abort) with `code`: a rank
  /// that failed alone (its message printed) must not leave the others
  /// waiting in a collective until the timeout, or mpirun hanging.
  [[noreturn]] void abortJob(int code);
  /// Bytes sent to other stages.
  double pointToPointBytes() const { return p2pBytes_; }
  /// Counts a message the device sent to another stage itself (NCCL).
  void countDeviceSend(size_t bytes) { p2pBytes_ += double(bytes); }
  /// Seconds spent waiting in recvFromStage: the pipeline's idle time on
  /// this rank.
  double receiveWaitSeconds() const { return recvWait_; }

private:
  Communicator() = default;
  void count(Group group, Kind kind, double bytes);
  template <typename Start>
  Status grouped(Group group, int channel, Kind kind,
                 const std::vector<Buffer> &buffers, const char *what,
                 Start start);
  /// Polls `requests` until all complete, holding the MPI lock for one
  /// poll at a time; on timeout diagnoses who never arrived and aborts
  /// every rank.
  Status waitAll(std::vector<void *> &requests, Group group, int channel,
                 const std::string &what);
  [[noreturn]] void abortStalled(Group group, int channel,
                                 const std::string &what);
  /// What each waiter waits for: the channels' collectives (0, 1) and the
  /// pipeline receive (kChannels). A rank whose peer never arrived asks the
  /// peer (`waitForThoseWaiting`); a peer that waits elsewhere answers, and
  /// the asker lets it time out and name whom it waits for (the rank at the
  /// end of the chain: the dead node, not a live rank between).
  static constexpr int kWaiters = kChannels + 1;
  /// "all_gather #61 on the inter-node group {1,3}": the collective
  /// `group`'s channel `channel` started last.
  std::string describe(Group group, int channel, const std::string &what) const;
  void beginWait(int waiter, const std::string &what,
                 std::chrono::steady_clock::time_point abortBy);
  void endWait(int waiter);
  /// Answers the questions other ranks asked (with the MPI lock held).
  void answerQuestions();
  /// Asks `missing` what they wait for and, while every one of them waits
  /// elsewhere (and so times out on its own), waits for one of them to end
  /// the job, answering questions; at most `cap` seconds. Returns, per
  /// missing rank, what it waits for ("" where it did not answer).
  std::vector<std::string> waitForThoseWaiting(const std::vector<int> &missing,
                                               int waiter, double cap);
  /// "node 1 on strata-n1, ..." for the nodes of `ranks`.
  std::string nodesOf(const std::vector<int> &ranks) const;

  TopologyInfo topology_;
  int rank_ = 0;
  double timeout_ = 60;
  /// Per channel, one communicator per group kind (channel 1's are
  /// duplicates of channel 0's).
  void *comms_[kChannels][kGroups] = {};
  /// A duplicate of the world communicator for timeout notices.
  void *notices_ = nullptr;
  // What lives past one call is fixed-size and made by `create`: the
  // collectives run inside instructions, where operator new serves from the
  // instruction's scratch arena (ScratchArena.h), rewound when it ends.
  struct Wait {
    bool active = false;
    char what[320] = {};
    /// When this waiter ends the job if what it waits for never comes.
    std::chrono::steady_clock::time_point abortBy;
  };
  /// Guarded by waitMutex_ (taken under mpi_ when answering, never the
  /// other way round).
  Wait waits_[kWaiters];
  std::mutex waitMutex_;
  /// Answers in flight (a ring; a question finding none free goes
  /// unanswered), and per waiter the questions it sent, which are never
  /// waited for (the job ends after them).
  struct Answer;
  static constexpr int kAnswerSlots = 16, kQuestionSlots = 64;
  std::unique_ptr<Answer[]> answers_;
  std::unique_ptr<uint64_t[]> asked_;
  int askedCount_[kWaiters] = {};
  uint64_t questions_ = 0;
  /// Collectives started per channel and group kind (ranks of a group
  /// agree on it).
  std::atomic<uint64_t> sequence_[kChannels][kGroups] = {};
  /// Held for each MPI call (MPI_THREAD_SERIALIZED), never across a wait.
  std::mutex mpi_;
  /// The byte counters, updated from both channels' streams.
  std::mutex countMutex_;
  Traffic traffic_ = {};
  std::vector<int> members_[kGroups];
  /// Every rank's host name (MPI_Get_processor_name), for the messages
  /// that name a node.
  std::vector<std::string> hosts_;
  /// Whether a waiter's pauses between polls are kept short (a timer
  /// slack of 1 us): where the ranks on this machine (namespaces
  /// included: one boot id) do not outnumber its cores. With more, the
  /// default slack lets the ranks computing keep the cores longer.
  bool precisePauses_ = false;
  /// Point-to-point between stages: a duplicate of the world communicator,
  /// and the sends still in flight.
  void *p2p_ = nullptr;
  struct PendingSend;
  std::vector<std::unique_ptr<PendingSend>> sends_;
  double p2pBytes_ = 0, recvWait_ = 0;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_COMMUNICATOR_H
