//===- TopologyTest.cpp - Groups of ranks ---------------------------------===//

#include "strata/Runtime/Topology.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace strata::runtime;

namespace {

std::vector<int> members(TopologyInfo t, Group g, int rank) {
  return groupMembers(t, g, rank);
}

TEST(TopologyTest, MiCSGroupsAcrossNodes) {
  // 8 ranks, 2 a node, partition groups of 4: two nodes per group.
  TopologyInfo t{8, 2, 4, 1};
  EXPECT_EQ(members(t, Group::Partition, 5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(members(t, Group::Replication, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(members(t, Group::Inter, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(members(t, Group::Intra, 5), (std::vector<int>{4, 5}));
}

TEST(TopologyTest, PartitionInsideANodeHasAnInterGroupOfOne) {
  // Each rank its own partition group on a node of 2 (one rank per
  // pipeline stage): every group a rank joins holds the rank itself. The
  // inter-node group was empty for rank 1, and NCCL refused a communicator
  // of 0 ranks.
  TopologyInfo t{2, 2, 1, 2};
  for (int rank = 0; rank < 2; ++rank)
    for (Group g : {Group::Partition, Group::Replication, Group::World,
                    Group::Inter, Group::Intra}) {
      std::vector<int> m = members(t, g, rank);
      EXPECT_NE(std::find(m.begin(), m.end(), rank), m.end())
          << groupName(g) << " of rank " << rank;
    }
  EXPECT_EQ(members(t, Group::Inter, 1), (std::vector<int>{1}));
  // Partition groups of 2 on nodes of 4.
  TopologyInfo u{8, 4, 2, 1};
  EXPECT_EQ(members(u, Group::Inter, 3), (std::vector<int>{3}));
  EXPECT_EQ(members(u, Group::Replication, 3), (std::vector<int>{1, 3, 5, 7}));
}

TEST(TopologyTest, StagesStrideTheReplicationGroup) {
  // (p, t, d) = (2, 2, 2): ranks 0-3 one pipeline, 4-7 the other.
  TopologyInfo t{8, 2, 2, 2};
  EXPECT_EQ(stageOf(t, 2), 1);
  EXPECT_EQ(stageOf(t, 5), 0);
  EXPECT_EQ(members(t, Group::Partition, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(members(t, Group::Replication, 2), (std::vector<int>{2, 6}));
}

} // namespace
