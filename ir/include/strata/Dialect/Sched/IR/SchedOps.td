//===- SchedOps.td - The sched dialect's ops ---------------*- tablegen -*-===//
//
// How, where and when: collectives on the groups of the artifact's topology
// (#sched<group ...>, SchedBase.td), moves between memory tiers, and the
// events that order streams. Each rank runs the same program (SPMD).
// A collective is coalesced: it takes any number of tensors and runs as one
// grouped call (one bucket), each operand with its own result. Collectives
// are not Pure: two all-gathers of one shard (forward, and again in
// backward) stay two.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECT_SCHED_IR_SCHEDOPS_TD
#define STRATA_DIALECT_SCHED_IR_SCHEDOPS_TD

include "strata/Dialect/Sched/IR/SchedBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Sched_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sched_Dialect, mnemonic, traits>;

def Sched_Tensor : StaticShapeTensorOf<[AnyType]>;


class Sched_CollectiveOp<string mnemonic> : Sched_Op<mnemonic,
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let arguments = (ins Sched_GroupAttr:$group, Variadic<Sched_Tensor>:$inputs);
  let results = (outs Variadic<Sched_Tensor>:$outputs);
  let assemblyFormat =
      "`` $group $inputs attr-dict `:` type($inputs) `->` type($outputs)";
  let hasVerifier = 1;
}

def Sched_AllGatherOp : Sched_CollectiveOp<"all_gather"> {
  let summary = "Concatenate every group member's 1-D shard, in group order";
  let description = [{
    Each result is the concatenation of its operand over the group's
    members, in group order: G times the operand's size for a group of G.
    Several operands are one coalesced call (a bucket).

    With `blocks = B` (MiCS's hierarchical gather, its intra-node stage)
    each operand is B equal blocks and each result B blocks of G times
    their size: result block j is block j gathered over the group. One op
    describes what would otherwise be B gathers and a concatenation, so the
    IR does not grow with the number of nodes a partition group spans.

    ```mlir
    %full = sched.all_gather partition %shard : tensor<128xf32> -> tensor<512xf32>
    %w, %b = sched.all_gather partition %ws, %bs : tensor<128xf32>, tensor<2xf32> -> tensor<512xf32>, tensor<8xf32>
    %full = sched.all_gather intra %pieces {blocks = 4 : i64} : tensor<512xf32> -> tensor<1024xf32>
    ```
  }];
}

def Sched_ReduceScatterOp : Sched_CollectiveOp<"reduce_scatter"> {
  let summary = "Sum over the group, keep this member's slice (1-D)";
  let description = [{
    Each result is this member's slice (1/G of it, in group order) of the
    element-wise sum of its operand over the group.

    ```mlir
    %shard = sched.reduce_scatter partition %grad : tensor<512xf32> -> tensor<128xf32>
    ```
  }];
}

def Sched_AllReduceOp : Sched_CollectiveOp<"all_reduce"> {
  let summary = "Sum over the group";
  let description = [{
    ```mlir
    %sum = sched.all_reduce %shard : tensor<128xf32> -> tensor<128xf32>
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
    %mine = sched.local_shard partition %sum : tensor<512xf32> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Sched_GroupAttr:$group, Sched_Tensor:$input);
  let results = (outs Sched_Tensor:$output);
  let assemblyFormat =
      "`` $group $input attr-dict `:` type($input) `->` type($output)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Between pipeline stages
//===----------------------------------------------------------------------===//

def Sched_SendOp : Sched_Op<"send",
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Send a value to another pipeline stage";
  let description = [{
    The rank at this rank's position in the stage group of stage `peer`, in
    this rank's pipeline group, receives `value` with the `sched.recv` of
    the same `micro_batch` and `tag`. A send does not wait for its receive
    (each peer has its own send stream). `peer` is another stage than the
    op's `sched.stage`: the stage before or after it for activations and
    their gradients, any holder of a shared parameter for its gradient.
    ```mlir
    sched.send %h to 1 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 0 : i64} : tensor<8x32x32xf32>
    ```
  }];
  let arguments = (ins Sched_Tensor:$value, I64Attr:$peer, I64Attr:$micro_batch,
                       I64Attr:$tag);
  let assemblyFormat = "$value `to` $peer attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Sched_RecvOp : Sched_Op<"recv",
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "Receive a value from another pipeline stage";
  let description = [{
    Waits for the `sched.send` of stage `peer` with the same `micro_batch`
    and `tag`; the messages between two stages arrive in the order sent.
    ```mlir
    %h = sched.recv from 0 {micro_batch = 0 : i64, tag = 0 : i64, sched.stage = 1 : i64} : tensor<8x32x32xf32>
    ```
  }];
  let arguments = (ins I64Attr:$peer, I64Attr:$micro_batch, I64Attr:$tag);
  let results = (outs Sched_Tensor:$value);
  let assemblyFormat = "`from` $peer attr-dict `:` type($value)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Moves between memory tiers
//===----------------------------------------------------------------------===//

// A move of persistent state (a function argument on `tier`, or the new
// value the function returns for it), or with `activation` of an
// activation: an offload copies a forward value backward reads into the
// host tier's activation arena, and a reload brings that copy back.
class Sched_MoveOp<string mnemonic> : Sched_Op<mnemonic,
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
     AllTypesMatch<["input", "output"]>]> {
  let arguments = (ins Sched_TierAttr:$tier, Sched_Tensor:$input,
                       UnitAttr:$activation);
  let results = (outs Sched_Tensor:$output);
  let assemblyFormat =
      "(`activation` $activation^)? `` $tier $input attr-dict `:` type($input)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether the move is of an activation (its host copy lives in the
    /// host activation arena), not of persistent state.
    bool isActivation() { return getActivation(); }
  }];
}

def Sched_ReloadOp : Sched_MoveOp<"reload"> {
  let summary = "Bring a value kept on a slower tier into device memory";
  let description = [{
    The operand is persistent state that strata-offload-state placed on the
    `tier` (host or ssd), a function argument; the result is its copy in
    device memory, for the ops that read it.

    With `activation`, the operand is the host copy a `sched.offload
    activation` made of a forward value (strata-offload-activations), and
    the result the device copy backward reads.

    ```mlir
    %m = sched.reload host %exp_avg : tensor<4096xf32>
    %h = sched.reload activation host %saved : tensor<8x64x64xf32>
    ```
  }];
}

def Sched_OffloadOp : Sched_MoveOp<"offload"> {
  let summary = "Write a device value to a slower tier";
  let description = [{
    The result is the new value of persistent state kept on `tier`; codegen
    writes it straight into that state's storage.

    With `activation`, the operand is a forward value backward reads, and
    the result its copy in the host tier's activation arena (its
    `sched.slots` are offsets there, within the function's
    `#sched.arena<host = ...>`), read only by `sched.reload activation`.

    ```mlir
    %kept = sched.offload host %new_exp_avg : tensor<4096xf32>
    %saved = sched.offload activation host %h : tensor<8x64x64xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Events between streams
//===----------------------------------------------------------------------===//

def Sched_RecordOp : Sched_Op<"record"> {
  let summary = "A token for everything its stream has run so far";
  let description = [{
    Placed after the last op on `stream` that another stream must wait for.
    The token completes when every op of `stream` before the record (in
    block order) has. strata-insert-events makes them; codegen numbers them
    as the artifact's events.

    ```mlir
    %g = sched.all_gather partition %s {sched.stream = #sched<stream collective>} : tensor<4xf32> -> tensor<8xf32>
    %t = sched.record on collective
    sched.wait %t on compute
    %y = graph.tanh %g {sched.stream = #sched<stream compute>} : tensor<8xf32>
    ```
  }];
  let arguments = (ins Sched_StreamAttr:$stream);
  let results = (outs Sched_TokenType:$token);
  let assemblyFormat = "`on` `` $stream attr-dict";
  let builders = [
    OpBuilder<(ins "::strata::sched::Stream":$stream), [{
      build($_builder, $_state, TokenType::get($_builder.getContext()),
            stream);
    }]>
  ];
}

def Sched_WaitOp : Sched_Op<"wait"> {
  let summary = "Holds a stream until tokens of other streams complete";
  let description = [{
    No op of `stream` after the wait (in block order) starts before every
    token has completed. Each token must come from a `sched.record` on
    another stream: a token that no record produces could never complete.

    ```mlir
    sched.wait %t0, %t1 on compute
    ```
  }];
  let arguments = (ins Sched_StreamAttr:$stream,
                       Variadic<Sched_TokenType>:$tokens);
  let assemblyFormat = "$tokens `on` `` $stream attr-dict";
  let hasVerifier = 1;
}

#endif // STRATA_DIALECT_SCHED_IR_SCHEDOPS_TD
