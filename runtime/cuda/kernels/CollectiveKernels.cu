//===- CollectiveKernels.cu - sched.* collectives on NCCL -----------------===//
//
// sched.all_gather, sched.reduce_scatter and sched.all_reduce over the
// communicator of the group their `group` attribute names, on the
// instruction's stream (the schedule's collective stream): every operand of
// one op is one call of a single NCCL group (a coalesced bucket).
// sched.local_shard copies this rank's slice. The CPU's kernels
// (runtime/cpu/kernels/CollectiveKernels.cpp) are the specification: same
// checks, same messages, the same layout (member i's shard at offset i).
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtils.cuh"

#include "strata/Runtime/Topology.h"

#if STRATA_HAVE_NCCL
#include <nccl.h>
#endif

#include <string>

namespace strata::runtime::cuda {
namespace {

#if STRATA_HAVE_NCCL

Status ncclStatus(ncclResult_t r, const std::string &what) {
  if (r == ncclSuccess)
    return Status::ok();
  return Status::error(what + ": " + ncclGetErrorString(r));
}

bool ncclType(DType t, ncclDataType_t &out) {
  switch (t) {
  case DType::F32: out = ncclFloat32; return true;
  case DType::F64: out = ncclFloat64; return true;
  case DType::F16: out = ncclFloat16; return true;
  case DType::BF16: out = ncclBfloat16; return true;
  case DType::I64: out = ncclInt64; return true;
  case DType::I32: out = ncclInt32; return true;
  case DType::I8: out = ncclInt8; return true;
  case DType::I1: out = ncclUint8; return true;
  default: return false;
  }
}

/// The group's communicator and size, after the CPU kernel's checks; a run
/// without communicators (one rank) has groups of one.
/// `summed`: the collective adds (reduce-scatter, all-reduce), which an i1
/// cannot (NCCL would add its bytes past 1).
Status prepareGroup(KernelContext &ctx, const std::string &op,
                    ncclComm_t &comm, int &members, bool summed) {
  if (ctx.inputs.empty() || ctx.inputs.size() != ctx.outputs.size())
    return Status::error(op + ": needs one result per operand, got " +
                         std::to_string(ctx.inputs.size()) + " and " +
                         std::to_string(ctx.outputs.size()));
  comm = static_cast<ncclComm_t>(communicatorOf(ctx));
  if (!comm)
    return Status::error(op + ": the artifact is distributed but this run "
                              "has no communicator (launch it with mpirun)");
  if (Status st = ncclStatus(ncclCommCount(comm, &members), op); !st)
    return st;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (ctx.inputs[i].dtype != ctx.outputs[i].dtype)
      return Status::error(op + ": operand " + std::to_string(i) +
                           " and its result have different types");
    ncclDataType_t type;
    if (!ncclType(ctx.inputs[i].dtype, type))
      return Status::error(op + ": NCCL has no " +
                           std::string(name(ctx.inputs[i].dtype)) + " type");
    if (summed && ctx.inputs[i].dtype == DType::I1)
      return Status::error(op + ": i1 operand " + std::to_string(i) +
                           " cannot be summed");
  }
  return Status::ok();
}

/// Runs `call` for every operand inside one NCCL group.
template <typename Call>
Status grouped(KernelContext &ctx, const std::string &op, Call &&call) {
  if (Status s = ncclStatus(ncclGroupStart(), op + ": ncclGroupStart"); !s)
    return s;
  Status failed = Status::ok();
  for (size_t i = 0; i < ctx.inputs.size() && failed.isOk(); ++i) {
    ncclDataType_t type = ncclFloat32;
    ncclType(ctx.inputs[i].dtype, type);
    failed = ncclStatus(call(ctx.inputs[i], ctx.outputs[i], type), op);
  }
  Status ended = ncclStatus(ncclGroupEnd(), op + ": ncclGroupEnd");
  return failed.isOk() ? ended : failed;
}

Status allGatherKernel(KernelContext &ctx) {
  const std::string op = "sched.all_gather";
  ncclComm_t comm;
  int members;
  if (Status s = prepareGroup(ctx, op, comm, members, /*summed=*/false); !s)
    return s;
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.outputs[i].bytes() != ctx.inputs[i].bytes() * size_t(members))
      return Status::error(op + ": result " + ctx.outputs[i].describe() +
                           " is not the group's " + std::to_string(members) +
                           " shards " + ctx.inputs[i].describe());
  // `blocks` B: operand block j gathers into result block j, all in one
  // NCCL group.
  int64_t blocks = ctx.attrs.getInt("blocks", 1);
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (blocks < 1 || ctx.inputs[i].numel() % blocks != 0)
      return Status::error(op + ": operand " + ctx.inputs[i].describe() +
                           " is not " + std::to_string(blocks) +
                           " equal blocks");
  cudaStream_t stream = streamOf(ctx).stream;
  return grouped(ctx, op, [&](const TensorView &in, TensorView &out,
                              ncclDataType_t type) {
    size_t count = size_t(in.numel() / blocks);
    size_t bytes = count * byteWidth(in.dtype);
    ncclResult_t result = ncclSuccess;
    for (int64_t j = 0; j < blocks && result == ncclSuccess; ++j)
      result = ncclAllGather(static_cast<const char *>(in.data) + j * bytes,
                             static_cast<char *>(out.data) +
                                 j * bytes * size_t(members),
                             count, type, comm, stream);
    return result;
  });
}

Status reduceScatterKernel(KernelContext &ctx) {
  const std::string op = "sched.reduce_scatter";
  ncclComm_t comm;
  int members;
  if (Status s = prepareGroup(ctx, op, comm, members, /*summed=*/true); !s)
    return s;
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i].bytes() != ctx.outputs[i].bytes() * size_t(members))
      return Status::error(op + ": operand " + ctx.inputs[i].describe() +
                           " is not the group's " + std::to_string(members) +
                           " shards " + ctx.outputs[i].describe());
  cudaStream_t stream = streamOf(ctx).stream;
  return grouped(ctx, op, [&](const TensorView &in, TensorView &out,
                              ncclDataType_t type) {
    return ncclReduceScatter(in.data, out.data, size_t(out.numel()), type,
                             ncclSum, comm, stream);
  });
}

Status allReduceKernel(KernelContext &ctx) {
  const std::string op = "sched.all_reduce";
  ncclComm_t comm;
  int members;
  if (Status s = prepareGroup(ctx, op, comm, members, /*summed=*/true); !s)
    return s;
  for (size_t i = 0; i < ctx.inputs.size(); ++i)
    if (ctx.inputs[i].bytes() != ctx.outputs[i].bytes())
      return Status::error(op + ": operand " + ctx.inputs[i].describe() +
                           " and result " + ctx.outputs[i].describe() +
                           " differ");
  cudaStream_t stream = streamOf(ctx).stream;
  return grouped(ctx, op, [&](const TensorView &in, TensorView &out,
                              ncclDataType_t type) {
    return ncclAllReduce(in.data, out.data, size_t(in.numel()), type, ncclSum,
                         comm, stream);
  });
}

#endif // STRATA_HAVE_NCCL

Status localShardKernel(KernelContext &ctx) {
  const std::string op = "sched.local_shard";
  if (Status s = checkArity(ctx, op, 1, 1, 1); !s)
    return s;
  const CudaStream &s = streamOf(ctx);
  // One rank, or a group of one: the slice is the whole value.
  int members = 1, index = 0;
#if STRATA_HAVE_NCCL
  if (void *c = communicatorOf(ctx)) {
    if (Status st = ncclStatus(
            ncclCommCount(static_cast<ncclComm_t>(c), &members),
            op + ": ncclCommCount");
        !st)
      return st;
    if (Status st = ncclStatus(
            ncclCommUserRank(static_cast<ncclComm_t>(c), &index),
            op + ": ncclCommUserRank");
        !st)
      return st;
  }
#endif
  const TensorView &in = ctx.inputs[0];
  TensorView &out = ctx.outputs[0];
  if (in.dtype != out.dtype || in.bytes() != out.bytes() * size_t(members))
    return Status::error(op + ": result " + out.describe() +
                         " is not one of the group's " +
                         std::to_string(members) + " slices of " +
                         in.describe());
  if (out.bytes() == 0)
    return Status::ok();
  return cudaStatus(
      cudaMemcpyAsync(out.data,
                      static_cast<const char *>(in.data) +
                          size_t(index) * out.bytes(),
                      out.bytes(), cudaMemcpyDeviceToDevice, s.stream),
      op);
}

} // namespace

void registerCollectiveKernels(KernelRegistry &registry) {
#if STRATA_HAVE_NCCL
  registry.add("sched.all_gather", allGatherKernel);
  registry.add("sched.reduce_scatter", reduceScatterKernel);
  registry.add("sched.all_reduce", allReduceKernel);
#endif
  registry.add("sched.local_shard", localShardKernel);
}

} // namespace strata::runtime::cuda
