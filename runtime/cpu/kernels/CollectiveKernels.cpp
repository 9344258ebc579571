//===- CollectiveKernels.cpp - sched.* collectives on the CPU backend -----===//
//
// sched.all_gather, sched.reduce_scatter and sched.all_reduce over the
// group their `group` attribute names, through the run's Communicator (MPI).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include "strata/Runtime/Communicator.h"

#include <string>

namespace strata::runtime::cpu {
namespace {

Status prepare(KernelContext &ctx, const std::string &op,
               Communicator::Group &group, size_t &members) {
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  if (!ctx.comm)
    return Status::error(op + ": the artifact is distributed but this run "
                              "has no communicator (launch it with mpirun)");
  std::string name = ctx.attrs.getString("group");
  if (!Communicator::parseGroup(name, group))
    return Status::error(op + ": unknown group '" + name + "'");
  members = ctx.comm->members(group).size();
  if (ctx.inputs[0].dtype != ctx.outputs[0].dtype)
    return Status::error(op + ": operand and result types differ");
  return Status::ok();
}

Status allGatherKernel(KernelContext &ctx) {
  const std::string op = "sched.all_gather";
  Communicator::Group group;
  size_t members;
  if (Status s = prepare(ctx, op, group, members); !s)
    return s;
  if (ctx.outputs[0].bytes() != ctx.inputs[0].bytes() * members)
    return Status::error(op + ": result " + ctx.outputs[0].describe() +
                         " is not the group's shards " +
                         ctx.inputs[0].describe());
  return ctx.comm->allGather(group, ctx.inputs[0].data, ctx.outputs[0].data,
                             ctx.inputs[0].bytes(), "all_gather");
}

Status reduceScatterKernel(KernelContext &ctx) {
  const std::string op = "sched.reduce_scatter";
  Communicator::Group group;
  size_t members;
  if (Status s = prepare(ctx, op, group, members); !s)
    return s;
  if (ctx.inputs[0].bytes() != ctx.outputs[0].bytes() * members)
    return Status::error(op + ": operand " + ctx.inputs[0].describe() +
                         " is not the group's shards " +
                         ctx.outputs[0].describe());
  return ctx.comm->reduceScatterSum(group, ctx.inputs[0].dtype,
                                    ctx.inputs[0].data, ctx.outputs[0].data,
                                    ctx.outputs[0].numel(), "reduce_scatter");
}

Status allReduceKernel(KernelContext &ctx) {
  const std::string op = "sched.all_reduce";
  Communicator::Group group;
  size_t members;
  if (Status s = prepare(ctx, op, group, members); !s)
    return s;
  if (ctx.inputs[0].bytes() != ctx.outputs[0].bytes())
    return Status::error(op + ": operand and result sizes differ");
  return ctx.comm->allReduceSum(group, ctx.inputs[0].dtype, ctx.inputs[0].data,
                                ctx.outputs[0].data, ctx.inputs[0].numel(),
                                "all_reduce");
}

} // namespace

void registerCollectiveKernels(KernelRegistry &registry) {
  registry.add("sched.all_gather", allGatherKernel);
  registry.add("sched.reduce_scatter", reduceScatterKernel);
  registry.add("sched.all_reduce", allReduceKernel);
}

} // namespace strata::runtime::cpu
