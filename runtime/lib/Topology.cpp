//===- Topology.cpp - Ranks, nodes and groups -----------------------------===//

#include "strata/Runtime/Topology.h"

#include <algorithm>

namespace strata::runtime {

const char *groupName(Group g) {
  switch (g) {
  case Group::Partition: return "partition";
  case Group::Replication: return "replication";
  case Group::World: return "world";
  case Group::Inter: return "inter-node";
  case Group::Intra: return "intra-node";
  }
  return "?";
}

const char *collectiveName(CollectiveKind k) {
  switch (k) {
  case CollectiveKind::AllGather: return "all_gather";
  case CollectiveKind::ReduceScatter: return "reduce_scatter";
  case CollectiveKind::AllReduce: return "all_reduce";
  }
  return "?";
}

std::vector<int> groupMembers(const TopologyInfo &t, Group group, int rank) {
  std::vector<int> ranks;
  int p = std::max(t.partition, 1), n = t.world;
  int k = std::max(t.ranksPerNode, 1);
  switch (group) {
  case Group::Partition:
    for (int i = 0; i < p; ++i)
      ranks.push_back(rank / p * p + i);
    break;
  case Group::Replication: {
    int stride = p * std::max(t.stages, 1);
    for (int i = rank % stride; i < n; i += stride)
      ranks.push_back(i);
    break;
  }
  case Group::World:
    for (int i = 0; i < n; ++i)
      ranks.push_back(i);
    break;
  case Group::Inter:
    // The partition group's ranks at this rank's position in its node (a
    // partition group inside one node: this rank alone).
    for (int i = rank / p * p + rank % p % k; i < rank / p * p + p; i += k)
      ranks.push_back(i);
    break;
  case Group::Intra:
    for (int i = rank / k * k; i < rank / k * k + k; ++i)
      ranks.push_back(i);
    break;
  }
  return ranks;
}

bool ringLink(const TopologyInfo &t, Group group, int rank, Link &link) {
  std::vector<int> m = groupMembers(t, group, rank);
  if (m.size() < 2)
    return false;
  size_t i = size_t(std::find(m.begin(), m.end(), rank) - m.begin());
  int predecessor = m[(i + m.size() - 1) % m.size()];
  int k = std::max(t.ranksPerNode, 1);
  link = predecessor / k == rank / k ? IntraNode : InterNode;
  return true;
}

double ringBytes(CollectiveKind kind, int members, double bytes) {
  double g = members;
  if (members < 2)
    return 0;
  return kind == CollectiveKind::AllReduce ? 2.0 * (g - 1) / g * bytes
                                           : (g - 1) * bytes;
}

} // namespace strata::runtime
