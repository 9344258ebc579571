//===- SchedOps.td - The sched dialect ---------------------*- tablegen -*-===//
//
// How, where and when: collectives on the groups of the artifact's topology.
// Each rank runs the same program (SPMD); a group attribute names the kind
// of group ("partition", "replication", "world") and each rank takes its
// own group of that kind from its rank: "partition" {gP .. gP+P-1},
// "replication" {j, j+P, ...}, "world", and for hierarchical all-gathers
// "inter" (this partition group's ranks with this rank's local rank, one
// per node) and "intra" (this node's ranks). Collectives are not Pure: two
// all-gathers of one shard (forward, and again in backward) stay two.
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
  let arguments = (ins Sched_Tensor:$input, StrAttr:$group);
  let results = (outs Sched_Tensor:$output);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

def Sched_AllGatherOp : Sched_CollectiveOp<"all_gather"> {
  let summary = "Concatenate every group member's 1-D shard, in group order";
  let description = [{
    ```mlir
    %full = sched.all_gather %shard {group = "partition"} : tensor<128xf32> -> tensor<512xf32>
    ```
  }];
}

def Sched_ReduceScatterOp : Sched_CollectiveOp<"reduce_scatter"> {
  let summary = "Sum over the group, keep this member's slice (1-D)";
  let description = [{
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

#endif // STRATA_DIALECT_SCHED_IR_SCHEDOPS_TD
