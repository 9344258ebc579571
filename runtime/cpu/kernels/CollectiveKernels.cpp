//===- CollectiveKernels.cpp - sched.* collectives on the CPU backend -----===//
//
// sched.all_gather, sched.reduce_scatter and sched.all_reduce over the
// group their `group` attribute names, through the run's Communicator (MPI)
// on their stream's channel: every operand of one op is one tensor of a
// single grouped call (a coalesced bucket). sched.local_shard copies this
// rank's slice.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/Communicator.h"

#include <cstring>
#include <string>

namespace strata::runtime::cpu {
namespace {

using Group = Communicator::Group;

/// The group, after checking the arity (n operands, n results).
Status prepare(KernelContext &ctx, const std::string &op, Group &group,
               size_t &members) {
  if (ctx.inputs.empty() || ctx.inputs.size() != ctx.outputs.size())
    return Status::error(op + ": needs one result per operand, got " +
                         std::to_string(ctx.inputs.size()) + " and " +
                         std::to_string(ctx.outputs.size()));
  if (!ctx.comm)
    return Status::error(op + ": the artifact is distributed but this run "
                              "has no communicator (launch it with mpirun)");
  group = ctx.group;
  members = ctx.comm->members(group).size();
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i].dtype != ctx.outputs[i].dtype)
      return Status::error(op + ": operand " + std::to_string(i) +
                           " and its result have different types");
  return Status::ok();
}

Status allGatherKernel(KernelContext &ctx) {
  const std::string op = "sched.all_gather";
  Group group;
  size_t members;
  if (Status s = prepare(ctx, op, group, members); !s)
    return s;
  // `blocks` B: operand block j gathers into result block j (one call).
  int64_t blocks = ctx.attrs.getInt("blocks", 1);
  std::vector<Communicator::Buffer> buffers;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorView &in = ctx.inputs[i];
    TensorView &out = ctx.outputs[i];
    if (out.bytes() != in.bytes() * members)
      return Status::error(op + ": result " + out.describe() +
                           " is not the group's " + std::to_string(members) +
                           " shards " + in.describe());
    if (blocks < 1 || in.numel() % blocks != 0)
      return Status::error(op + ": operand " + in.describe() + " is not " +
                           std::to_string(blocks) + " equal blocks");
    size_t count = size_t(in.numel() / blocks);
    size_t bytes = count * byteWidth(in.dtype);
    for (int64_t j = 0; j < blocks; ++j)
      buffers.push_back({in.dtype, static_cast<char *>(in.data) + j * bytes,
                         static_cast<char *>(out.data) + j * bytes * members,
                         count});
  }
  return ctx.comm->allGather(group, buffers, ctx.channel);
}

Status reduceScatterKernel(KernelContext &ctx) {
  const std::string op = "sched.reduce_scatter";
  Group group;
  size_t members;
  if (Status s = prepare(ctx, op, group, members); !s)
    return s;
  std::vector<Communicator::Buffer> buffers;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorView &in = ctx.inputs[i];
    TensorView &out = ctx.outputs[i];
    if (in.bytes() != out.bytes() * members)
      return Status::error(op + ": operand " + in.describe() +
                           " is not the group's " + std::to_string(members) +
                           " shards " + out.describe());
    buffers.push_back({in.dtype, in.data, out.data, size_t(out.numel())});
  }
  return ctx.comm->reduceScatterSum(group, buffers, ctx.channel);
}

Status allReduceKernel(KernelContext &ctx) {
  const std::string op = "sched.all_reduce";
  Group group;
  size_t members;
  if (Status s = prepare(ctx, op, group, members); !s)
    return s;
  std::vector<Communicator::Buffer> buffers;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const TensorView &in = ctx.inputs[i];
    TensorView &out = ctx.outputs[i];
    if (in.bytes() != out.bytes())
      return Status::error(op + ": operand " + in.describe() +
                           " and result " + out.describe() + " differ");
    buffers.push_back({in.dtype, in.data, out.data, size_t(in.numel())});
  }
  return ctx.comm->allReduceSum(group, buffers, ctx.channel);
}

Status localShardKernel(KernelContext &ctx) {
  const std::string op = "sched.local_shard";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  Group group = ctx.group;
  const TensorView &in = ctx.inputs[0];
  TensorView &out = ctx.outputs[0];
  // One rank, or a group of one: the slice is the whole value.
  size_t members = ctx.comm ? ctx.comm->members(group).size() : 1;
  size_t index = ctx.comm ? size_t(ctx.comm->indexIn(group)) : 0;
  if (in.dtype != out.dtype || in.bytes() != out.bytes() * members)
    return Status::error(op + ": result " + out.describe() +
                         " is not one of the group's " +
                         std::to_string(members) + " slices of " +
                         in.describe());
  std::memcpy(out.data, static_cast<const char *>(in.data) + index * out.bytes(),
              out.bytes());
  return Status::ok();
}

} // namespace

void registerCollectiveKernels(KernelRegistry &registry) {
  registry.add("sched.all_gather", allGatherKernel);
  registry.add("sched.reduce_scatter", reduceScatterKernel);
  registry.add("sched.all_reduce", allReduceKernel);
  registry.add("sched.local_shard", localShardKernel);
}

} // namespace strata::runtime::cpu
