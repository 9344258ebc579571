//===- MoveKernels.cpp - sched.reload / sched.offload on the CPU backend --===//
//
// Moves between the memory tiers: a HOST tensor is memory of its own (the
// executor's host block), an SSD tensor a range of the executor's SSD file
// (positioned reads and writes). On the CPU backend the device is host
// memory too; the moves are still real copies through the tier, so a plan
// that offloads computes exactly what the all-device plan does.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "kernels/KernelUtils.h"

#include <string>

namespace strata::runtime::cpu {
namespace {

Status checkMove(KernelContext &ctx, const std::string &op) {
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const TensorView &in = ctx.inputs[0];
  const TensorView &out = ctx.outputs[0];
  if (in.dtype != out.dtype || in.shape != out.shape)
    return Status::error(op + ": " + in.describe() + " and " +
                         out.describe() + " differ");
  if ((in.onSsd || out.onSsd) && ctx.ssdFile < 0)
    return Status::error(op + ": the tensor is on the SSD tier but the run "
                              "has no SSD file");
  return Status::ok();
}

Status reloadKernel(KernelContext &ctx) {
  const std::string op = "sched.reload";
  if (Status s = checkMove(ctx, op); !s)
    return s;
  const TensorView &from = ctx.inputs[0];
  if (!readViewBytes(from, ctx.ssdFile, ctx.outputs[0].data))
    return Status::error(op + ": reading " + from.describe() +
                         " from the SSD tier failed");
  return Status::ok();
}

Status offloadKernel(KernelContext &ctx) {
  const std::string op = "sched.offload";
  if (Status s = checkMove(ctx, op); !s)
    return s;
  const TensorView &from = ctx.inputs[0];
  if (!writeViewBytes(ctx.outputs[0], ctx.ssdFile, from.data))
    return Status::error(op + ": writing " + from.describe() +
                         " to the SSD tier failed");
  return Status::ok();
}

} // namespace

void registerMoveKernels(KernelRegistry &registry) {
  registry.add("sched.reload", reloadKernel);
  registry.add("sched.offload", offloadKernel);
}

} // namespace strata::runtime::cpu
