//===- Topology.h - Ranks, nodes and groups ---------------------*- C++ -*-===//
//
// The groups of a distributed artifact's topology, as pure functions of the
// rank (N ranks, K per node, node-major; partition groups of P), and the
// ring model the byte counters use: in a group of G members each member
// receives from its predecessor in group order, over an intra-node link
// when the predecessor is on its node. The communicator and strata-inspect
// (which predicts a step's bytes from the plan) share them.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_RUNTIME_TOPOLOGY_H
#define STRATA_RUNTIME_TOPOLOGY_H

#include <string_view>
#include <vector>

namespace strata::runtime {

struct TopologyInfo {
  int world = 1, ranksPerNode = 1, partition = 1;
  /// Pipeline stages p: every p*P consecutive ranks a pipeline, every P of
  /// those a stage (1: no pipeline).
  int stages = 1;
};

/// The pipeline stage `rank` runs.
inline int stageOf(const TopologyInfo &t, int rank) {
  int p = t.partition > 0 ? t.partition : 1;
  int stages = t.stages > 0 ? t.stages : 1;
  return rank / p % stages;
}

/// The rank at `rank`'s position in `rank`'s pipeline on stage `stage`.
inline int rankOnStage(const TopologyInfo &t, int rank, int stage) {
  int p = t.partition > 0 ? t.partition : 1;
  return rank + (stage - stageOf(t, rank)) * p;
}

/// Partition {gP..gP+P-1}; Replication {j, j+pP, ...} (p stages: the ranks
/// holding the same shard of the same stage); World; Inter: the
/// ranks of this partition group with this rank's local rank (one per
/// node); Intra: the ranks of this node (K | P: a partition group holds
/// whole nodes).
enum class Group { Partition, Replication, World, Inter, Intra };
inline constexpr int kGroups = 5;

enum class CollectiveKind { AllGather, ReduceScatter, AllReduce };
inline constexpr int kCollectiveKinds = 3;

/// Collective channels: each stream that issues collectives has
/// communicators of its own, so the streams' collectives never match each
/// other. Channel 0 is the `collective` stream's (the parameter
/// all-gathers, and every caller outside a program), 1 the `reduce`
/// stream's (the gradient reductions).
inline constexpr int kCollectiveChannels = 2;
/// The channel of the artifact's stream named `stream`.
inline int collectiveChannelOf(std::string_view stream) {
  return stream == "reduce" ? 1 : 0;
}

enum Link { IntraNode = 0, InterNode = 1 };

const char *groupName(Group group);
const char *collectiveName(CollectiveKind kind);

/// The ranks of `rank`'s group of a kind, in group order.
std::vector<int> groupMembers(const TopologyInfo &t, Group group, int rank);

/// The link `rank` receives over in a ring of its group (the predecessor's
/// node against its own); false when the group has one member.
bool ringLink(const TopologyInfo &t, Group group, int rank, Link &link);

/// Bytes one member of a group of `members` receives on a ring for one
/// tensor of `bytes` (the operand of an all-gather or the result of a
/// reduce-scatter is a shard; an all-reduce's is the whole buffer).
double ringBytes(CollectiveKind kind, int members, double shardOrBufferBytes);

} // namespace strata::runtime

#endif // STRATA_RUNTIME_TOPOLOGY_H
