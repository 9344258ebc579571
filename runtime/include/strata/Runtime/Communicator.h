//===- Communicator.h - Collectives between ranks ---------------*- C++ -*-===//
//
// The CPU backend's collectives over MPI: one communicator per group kind of
// the artifact's topology (partition, replication, world), non-blocking
// calls polled against a deadline, and per-link byte counters (a peer on
// the same node, rank / K, is an intra-node link). A collective that does
// not complete in time aborts every rank with a message naming it.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_COMMUNICATOR_H
#define STRATA_RUNTIME_COMMUNICATOR_H

#include "strata/Runtime/Kernel.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime {

struct TopologyInfo {
  int world = 1, ranksPerNode = 1, partition = 1;
};

class Communicator {
public:
  /// Inter: the ranks of this partition group with this rank's local rank
  /// (one per node); Intra: the ranks of this node (K | P: a partition
  /// group holds whole nodes).
  enum class Group { Partition, Replication, World, Inter, Intra };

  ~Communicator();
  /// Initializes MPI if needed; the launch must have `topology.world` ranks.
  static Status create(const TopologyInfo &topology, double timeoutSeconds,
                       std::unique_ptr<Communicator> &out);

  int rank() const { return rank_; }
  int world() const { return topology_.world; }
  const TopologyInfo &topology() const { return topology_; }
  /// The ranks of this rank's group of a kind, in group order.
  std::vector<int> members(Group group) const;
  static bool parseGroup(std::string_view name, Group &group);

  /// out = concatenation over the group of each member's `bytes` bytes.
  Status allGather(Group group, const void *in, void *out, size_t bytes,
                   const std::string &what);
  /// out = this member's slice of the element-wise sum over the group of
  /// `in` (count elements per member).
  Status reduceScatterSum(Group group, DType dtype, const void *in, void *out,
                          size_t countPerMember, const std::string &what);
  /// out = element-wise sum over the group.
  Status allReduceSum(Group group, DType dtype, const void *in, void *out,
                      size_t count, const std::string &what);

  /// Bytes this rank received over intra- and inter-node links.
  uint64_t intraNodeBytes() const { return intraBytes_; }
  uint64_t interNodeBytes() const { return interBytes_; }

private:
  Communicator() = default;
  void count(Group group, size_t bytesPerPeer);
  Status wait(void *request, Group group, const std::string &what);

  TopologyInfo topology_;
  int rank_ = 0;
  double timeout_ = 60;
  void *comms_[5] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  uint64_t intraBytes_ = 0, interBytes_ = 0;
};

} // namespace strata::runtime

#endif // STRATA_RUNTIME_COMMUNICATOR_H
