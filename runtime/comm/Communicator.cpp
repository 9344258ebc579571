//===- Communicator.cpp - Collectives between ranks over MPI --------------===//

#include "strata/Runtime/Communicator.h"

// The C API only: no OpenMPI C++ bindings.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <thread>

namespace strata::runtime {
namespace {

MPI_Datatype mpiType(DType t) {
  switch (t) {
  case DType::F32: return MPI_FLOAT;
  case DType::F64: return MPI_DOUBLE;
  case DType::I64: return MPI_INT64_T;
  case DType::I32: return MPI_INT32_T;
  default: return MPI_DATATYPE_NULL;
  }
}

const char *groupName(Communicator::Group g) {
  switch (g) {
  case Communicator::Group::Partition: return "partition";
  case Communicator::Group::Replication: return "replication";
  case Communicator::Group::World: return "world";
  case Communicator::Group::Inter: return "inter-node";
  case Communicator::Group::Intra: return "intra-node";
  }
  return "?";
}

} // namespace

Communicator::~Communicator() {
  for (void *&c : comms_)
    if (c) {
      MPI_Comm comm = static_cast<MPI_Comm>(c);
      MPI_Comm_free(&comm);
    }
}

bool Communicator::parseGroup(std::string_view name, Group &group) {
  if (name == "partition") group = Group::Partition;
  else if (name == "replication") group = Group::Replication;
  else if (name == "world") group = Group::World;
  else if (name == "inter") group = Group::Inter;
  else if (name == "intra") group = Group::Intra;
  else return false;
  return true;
}

Status Communicator::create(const TopologyInfo &topology, double timeoutSeconds,
                            std::unique_ptr<Communicator> &out) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SINGLE, &provided);
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized)
        MPI_Finalize();
    });
  }
  std::unique_ptr<Communicator> c(new Communicator());
  c->topology_ = topology;
  c->timeout_ = timeoutSeconds;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &c->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != topology.world)
    return Status::error("the artifact was compiled for --world " +
                         std::to_string(topology.world) + " but " +
                         std::to_string(size) +
                         " ranks were launched (mpirun -np " +
                         std::to_string(topology.world) + ")");
  int p = topology.partition, r = c->rank_;
  int k = std::max(topology.ranksPerNode, 1);
  int colors[5] = {r / p, r % p, 0, r / p * k + r % k, r / k};
  for (int i = 0; i < 5; ++i) {
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, colors[i], r, &comm);
    c->comms_[i] = comm;
  }
  out = std::move(c);
  return Status::ok();
}

std::vector<int> Communicator::members(Group group) const {
  std::vector<int> ranks;
  int p = topology_.partition, n = topology_.world;
  switch (group) {
  case Group::Partition:
    for (int i = 0; i < p; ++i)
      ranks.push_back(rank_ / p * p + i);
    break;
  case Group::Replication:
    for (int i = rank_ % p; i < n; i += p)
      ranks.push_back(i);
    break;
  case Group::World:
    for (int i = 0; i < n; ++i)
      ranks.push_back(i);
    break;
  case Group::Inter: {
    int k = std::max(topology_.ranksPerNode, 1);
    for (int i = rank_ / p * p + rank_ % k; i < rank_ / p * p + p; i += k)
      ranks.push_back(i);
    break;
  }
  case Group::Intra: {
    int k = std::max(topology_.ranksPerNode, 1);
    for (int i = rank_ / k * k; i < rank_ / k * k + k; ++i)
      ranks.push_back(i);
    break;
  }
  }
  return ranks;
}

void Communicator::count(Group group, size_t bytesPerPeer) {
  int k = std::max(topology_.ranksPerNode, 1);
  for (int peer : members(group)) {
    if (peer == rank_)
      continue;
    (peer / k == rank_ / k ? intraBytes_ : interBytes_) += bytesPerPeer;
  }
}

Status Communicator::wait(void *requestPtr, Group group,
                          const std::string &what) {
  MPI_Request &request = *static_cast<MPI_Request *>(requestPtr);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(timeout_);
  for (int spins = 0;; ++spins) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done)
      return Status::ok();
    if (std::chrono::steady_clock::now() > deadline) {
      std::string ranks;
      for (int m : members(group))
        ranks += (ranks.empty() ? "" : ",") + std::to_string(m);
      std::cerr << "strata-run: error: rank " << rank_ << ": " << what
                << " on the " << groupName(group) << " group {" << ranks
                << "} did not complete within " << timeout_
                << " s: a rank of the group stopped participating; aborting "
                   "every rank\n"
                << std::flush;
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status Communicator::allGather(Group group, const void *in, void *out,
                               size_t bytes, const std::string &what) {
  MPI_Request request;
  MPI_Iallgather(in, static_cast<int>(bytes), MPI_BYTE, out,
                 static_cast<int>(bytes), MPI_BYTE,
                 static_cast<MPI_Comm>(comms_[int(group)]), &request);
  count(group, bytes);
  return wait(&request, group, what);
}

Status Communicator::reduceScatterSum(Group group, DType dtype, const void *in,
                                      void *out, size_t countPerMember,
                                      const std::string &what) {
  MPI_Datatype type = mpiType(dtype);
  if (type == MPI_DATATYPE_NULL)
    return Status::error(what + ": unsupported element type");
  MPI_Request request;
  MPI_Ireduce_scatter_block(in, out, static_cast<int>(countPerMember), type,
                            MPI_SUM, static_cast<MPI_Comm>(comms_[int(group)]),
                            &request);
  count(group, countPerMember * byteWidth(dtype));
  return wait(&request, group, what);
}

Status Communicator::allReduceSum(Group group, DType dtype, const void *in,
                                  void *out, size_t count,
                                  const std::string &what) {
  MPI_Datatype type = mpiType(dtype);
  if (type == MPI_DATATYPE_NULL)
    return Status::error(what + ": unsupported element type");
  MPI_Request request;
  const void *send = in == out ? MPI_IN_PLACE : in;
  MPI_Iallreduce(send, out, static_cast<int>(count), type, MPI_SUM,
                 static_cast<MPI_Comm>(comms_[int(group)]), &request);
  // A ring all-reduce moves 2 (G-1)/G of the buffer per rank; counted per
  // peer as 2/G of it.
  size_t members = this->members(group).size();
  this->count(group, members ? 2 * count * byteWidth(dtype) / members : 0);
  return wait(&request, group, what);
}

} // namespace strata::runtime
