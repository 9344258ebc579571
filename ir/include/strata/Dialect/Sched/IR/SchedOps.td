//===- SchedOps.td - The sched dialect ---------------------*- tablegen -*-===//
//
// How, where and when: collectives on the groups of the artifact's topology.
// Each rank runs the same program (SPMD); a group attribute names the kind
// of group and each rank takes its own group of that kind from its rank r
// (N ranks, K per node, node-major; partition groups of P):
//   "partition"   {gP, ..., gP+P-1}, g = r / P
//   "replication" {j, j+P, j+2P, ...}, j = r % P
//   "world"       every rank
//   "inter"       this partition group's ranks with r's local rank, one per
//                 node: stage 1 of the hierarchical all-gather
//   "intra"       this node's K ranks: stage 3
// A collective is coalesced: it takes any number of tensors and runs as one
// grouped call (one bucket), each operand with its own result. Collectives
// are not Pure: two all-gathers of one shard (forward, and again in
// backward) stay two.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECT_SCHED_IR_SCHEDOPS_TD
#define STRATA_DIALECT_SCHED_IR_SCHEDOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Sched_Dialect : Dialect {
  let name = "sched";
  let cppNamespace = "::strata::sched";
  let summary = "Collectives, streams and memory moves of a training step";
}

class Sched_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sched_Dialect, mnemonic, traits>;

def Sched_Tensor : StaticShapeTensorOf<[AnyType]>;


class Sched_CollectiveOp<string mnemonic> : Sched_Op<mnemonic,
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let arguments = (ins Variadic<Sched_Tensor>:$inputs, StrAttr:$group);
  let results = (outs Variadic<Sched_Tensor>:$outputs);
  let assemblyFormat =
      "$inputs attr-dict `:` type($inputs) `->` type($outputs)";
  let hasVerifier = 1;
}

def Sched_AllGatherOp : Sched_CollectiveOp<"all_gather"> {
  let summary = "Concatenate every group member's 1-D shard, in group order";
  let description = [{
    Each result is the concatenation of its operand over the group's
    members, in group order: G times the operand's size for a group of G.
    Several operands are one coalesced call (a bucket).

    ```mlir
    %full = sched.all_gather %shard {group = "partition"} : tensor<128xf32> -> tensor<512xf32>
    %w, %b = sched.all_gather %ws, %bs {group = "partition"} : tensor<128xf32>, tensor<2xf32> -> tensor<512xf32>, tensor<8xf32>
    ```
  }];
}

def Sched_ReduceScatterOp : Sched_CollectiveOp<"reduce_scatter"> {
  let summary = "Sum over the group, keep this member's slice (1-D)";
  let description = [{
    Each result is this member's slice (1/G of it, in group order) of the
    element-wise sum of its operand over the group.

    ```mlir
    %shard = sched.reduce_scatter %grad {group = "partition"} : tensor<512xf32> -> tensor<128xf32>
    ```
  }];
}

def Sched_AllReduceOp : Sched_CollectiveOp<"all_reduce"> {
  let summary = "Sum over the group";
  let description = [{
    ```mlir
    %sum = sched.all_reduce %shard {group = "replication"} : tensor<128xf32> -> tensor<128xf32>
    ```
  }];
}

def Sched_LocalShardOp : Sched_Op<"local_shard", [Pure]> {
  let summary = "This rank's slice of a 1-D value sharded over a group";
  let description = [{
    The slice a reduce-scatter over the group would keep, without the
    reduction: slice i (of G equal slices) for the member at position i of
    this rank's group. `--grad-sync global` keeps the local shard of the
    all-reduced gradient with it.

    ```mlir
    %mine = sched.local_shard %sum {group = "partition"} : tensor<512xf32> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Sched_Tensor:$input, StrAttr:$group);
  let results = (outs Sched_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Moves between memory tiers
//===----------------------------------------------------------------------===//

class Sched_MoveOp<string mnemonic> : Sched_Op<mnemonic,
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
     AllTypesMatch<["input", "output"]>]> {
  let arguments = (ins Sched_Tensor:$input, StrAttr:$tier);
  let results = (outs Sched_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Sched_ReloadOp : Sched_MoveOp<"reload"> {
  let summary = "Bring a value kept on a slower tier into device memory";
  let description = [{
    The operand is persistent state that strata-plan-memory placed on the
    `tier` ("host" or "ssd"); the result is its copy in device memory,
    for the ops that read it.

    ```mlir
    %m = sched.reload %exp_avg {tier = "host"} : tensor<4096xf32>
    ```
  }];
}

def Sched_OffloadOp : Sched_MoveOp<"offload"> {
  let summary = "Write a device value back to the slower tier it lives on";
  let description = [{
    The result is the new value of persistent state kept on `tier`; codegen
    writes it straight into that state's storage.

    ```mlir
    %kept = sched.offload %new_exp_avg {tier = "host"} : tensor<4096xf32>
    ```
  }];
}

#endif // STRATA_DIALECT_SCHED_IR_SCHEDOPS_TD
