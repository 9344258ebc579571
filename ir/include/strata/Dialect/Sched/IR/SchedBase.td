//===- SchedBase.td - The sched dialect, its enums, attributes, types -*- tablegen -*-===//
//
// The schedule and the memory plan as IR: every enumerated choice (group,
// tier, stream) is an enum attribute, cross-stream ordering is SSA tokens,
// and the memory plan is typed attributes the dialect verifies.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_DIALECT_SCHED_IR_SCHEDBASE_TD
#define STRATA_DIALECT_SCHED_IR_SCHEDBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Sched_Dialect : Dialect {
  let name = "sched";
  let cppNamespace = "::strata::sched";
  let summary = "Collectives, streams, events and the memory plan of a training step";
  let description = [{
    How, where and when a training step runs. Ops: collectives on the groups
    of the artifact's topology, moves between memory tiers, and the events
    that order streams (`sched.record` / `sched.wait` on `!sched.token`
    values). Discardable attributes, each verified by the dialect:

    - `sched.stream = #sched<stream compute>` on an op: the stream it runs on;
      `sched.streams` on a function lists the streams its ops use, in the
      order the artifact numbers them.
    - `sched.tier = #sched<tier host>` on a function argument: the memory
      tier a persistent tensor lives on (device when absent).
    - `sched.slots = [#sched.slot<0, 256>, unit]` on an op: where each
      result lives in its function's activation arena (offset, reserved
      bytes), `unit` for a result computed into a persistent tensor's own
      storage.
    - `sched.arena = #sched.arena<size = N, live = M>` on a function: the
      arena's bytes and the lower bound (most bytes live at once), and
      `host = H` when activations are offloaded: the host tier's activation
      arena. With it, the function's slots are checked: inside their arena
      (the host one for `sched.offload activation` results), and no two
      values live at once in the same bytes of one arena.
    - `sched.offloaded = #sched.offloaded<...>` on a function: what
      strata-offload-activations moved.
    - `sched.checkpointed = ["transformer.h.0"]` on a function: the layers
      strata-recompute checkpointed (their inputs kept, the rest made again
      before their backward).
    - `sched.memory_plan = #sched.memory_plan<...>` on the module: the
      plan's totals per tier.
    - `sched.pipeline = #sched.pipeline<stages = 2, boundaries = [4]>` on the
      module: the model is cut into pipeline stages; `sched.stage = 1` on an
      op: the stage that runs it (below the module's stage count).
    - `sched.schedule = "zb"` and `sched.stage_cost = array<f64: F, B, W>`
      on a stage program (a function): its pipeline schedule (`1f1b` or
      `zb`) and its stage's forward FLOPs per micro-batch in each phase.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Discardable attribute names (see the dialect description).
    static constexpr ::llvm::StringLiteral kStreamAttrName = "sched.stream";
    static constexpr ::llvm::StringLiteral kStreamsAttrName = "sched.streams";
    static constexpr ::llvm::StringLiteral kTierAttrName = "sched.tier";
    static constexpr ::llvm::StringLiteral kSlotsAttrName = "sched.slots";
    static constexpr ::llvm::StringLiteral kArenaAttrName = "sched.arena";
    static constexpr ::llvm::StringLiteral kMemoryPlanAttrName =
        "sched.memory_plan";
    /// On an op strata-plan-memory cloned to recompute in backward.
    static constexpr ::llvm::StringLiteral kRecomputedAttrName =
        "sched.recomputed";
    /// On @micro_step: the layers strata-recompute checkpointed (kept
    /// their inputs, made the rest again before their backward), in order.
    static constexpr ::llvm::StringLiteral kCheckpointedAttrName =
        "sched.checkpointed";
    /// On a function strata-offload-activations moved activations of.
    static constexpr ::llvm::StringLiteral kOffloadedAttrName =
        "sched.offloaded";
    /// strata-plan-execution's decisions, written into the artifact.
    static constexpr ::llvm::StringLiteral kDelayableAttrName =
        "sched.delayable";
    static constexpr ::llvm::StringLiteral kRngStreamAttrName =
        "sched.rng_stream";
    static constexpr ::llvm::StringLiteral kSeedSlotAttrName =
        "sched.seed_slot";
    static constexpr ::llvm::StringLiteral kExactTf32AttrName =
        "sched.exact_tf32";
    static constexpr ::llvm::StringLiteral kPipelineAttrName =
        "sched.pipeline";
    static constexpr ::llvm::StringLiteral kStageAttrName = "sched.stage";
    static constexpr ::llvm::StringLiteral kBackwardAttrName =
        "sched.backward";
    static constexpr ::llvm::StringLiteral kMicroBatchAttrName =
        "sched.micro_batch";
    /// On a stage program: its schedule ("1f1b" | "zb") and its stage's
    /// forward FLOPs per micro-batch in F, B and W (the schedule's costs).
    static constexpr ::llvm::StringLiteral kScheduleAttrName =
        "sched.schedule";
    static constexpr ::llvm::StringLiteral kStageCostAttrName =
        "sched.stage_cost";
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

// The groups of ranks a collective runs over. Each rank takes its own group
// of a kind from its rank r (N ranks, K per node, node-major; partition
// groups of P).
def Sched_GroupPartition : I32EnumAttrCase<"Partition", 0, "partition">;
def Sched_GroupReplication : I32EnumAttrCase<"Replication", 1, "replication">;
def Sched_GroupWorld : I32EnumAttrCase<"World", 2, "world">;
def Sched_GroupInter : I32EnumAttrCase<"Inter", 3, "inter">;
def Sched_GroupIntra : I32EnumAttrCase<"Intra", 4, "intra">;
def Sched_Group : I32EnumAttr<"Group", "a group of ranks", [
    Sched_GroupPartition, Sched_GroupReplication, Sched_GroupWorld,
    Sched_GroupInter, Sched_GroupIntra]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::strata::sched";
}
def Sched_GroupAttr : EnumAttr<Sched_Dialect, Sched_Group, "group"> {
  let summary = [{A group of ranks:
    partition   {gP, ..., gP+P-1}, g = r / P;
    replication {j, j+P, j+2P, ...}, j = r % P;
    world       every rank;
    inter       this partition group's ranks with r's local rank, one per
                node (stage 1 of the hierarchical all-gather);
    intra       this node's K ranks (stage 3)}];
}

def Sched_TierDevice : I32EnumAttrCase<"Device", 0, "device">;
def Sched_TierHost : I32EnumAttrCase<"Host", 1, "host">;
def Sched_TierSsd : I32EnumAttrCase<"Ssd", 2, "ssd">;
def Sched_Tier : I32EnumAttr<"Tier", "a memory tier", [
    Sched_TierDevice, Sched_TierHost, Sched_TierSsd]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::strata::sched";
}
def Sched_TierAttr : EnumAttr<Sched_Dialect, Sched_Tier, "tier"> {
  let summary = "A memory tier: device memory, pinned host memory or an SSD file";
}

def Sched_StreamCompute : I32EnumAttrCase<"Compute", 0, "compute">;
def Sched_StreamCollective : I32EnumAttrCase<"Collective", 1, "collective">;
def Sched_StreamHostToDevice : I32EnumAttrCase<"HostToDevice", 2, "h2d">;
def Sched_StreamDeviceToHost : I32EnumAttrCase<"DeviceToHost", 3, "d2h">;
def Sched_StreamSsd : I32EnumAttrCase<"Ssd", 4, "ssd">;
def Sched_StreamReduce : I32EnumAttrCase<"Reduce", 5, "reduce">;
def Sched_Stream : I32EnumAttr<"Stream", "an execution stream", [
    Sched_StreamCompute, Sched_StreamCollective, Sched_StreamHostToDevice,
    Sched_StreamDeviceToHost, Sched_StreamSsd, Sched_StreamReduce]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::strata::sched";
}
def Sched_StreamAttr : EnumAttr<Sched_Dialect, Sched_Stream, "stream"> {
  let summary = [{A stream: its instructions run in order, concurrently with
    the other streams' (a CUDA stream; a thread on the CPU). `collective`
    carries the parameter all-gathers, `reduce` the gradient reductions
    (reduce-scatters, all-reduces); each has communicators of its own}];
}

//===----------------------------------------------------------------------===//
// Attributes of the memory plan
//===----------------------------------------------------------------------===//

class Sched_Attr<string name, string attrMnemonic> :
    AttrDef<Sched_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Sched_SlotAttr : Sched_Attr<"Slot", "slot"> {
  let summary = "Where a value lives in its function's activation arena";
  let description = [{
    `offset` and `size` in bytes; `size` is what the plan reserves (the
    value's bytes rounded up to the plan's alignment).
    ```mlir
    %y = graph.tanh %x {sched.slots = [#sched.slot<128, 64>]} : tensor<8xf32>
    ```
  }];
  let parameters = (ins "int64_t":$offset, "int64_t":$size);
  let assemblyFormat = "`<` $offset `,` $size `>`";
  let genVerifyDecl = 1;
}

def Sched_ArenaAttr : Sched_Attr<"Arena", "arena"> {
  let summary = "A function's activation arena: its size and lower bound";
  let description = [{
    `size` and `live`: the device arena's planned bytes and lower bound;
    `host` (printed when not 0): the bytes of the host tier's activation
    arena, where `sched.offload activation` results live.
    ```mlir
    func.func @f() attributes {sched.arena = #sched.arena<size = 4096, live = 4000, host = 1024>}
    ```
  }];
  let parameters = (ins "int64_t":$size, "int64_t":$live,
                        DefaultValuedParameter<"int64_t", "0">:$host);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Sched_MemoryPlanAttr : Sched_Attr<"MemoryPlan", "memory_plan"> {
  let summary = "The memory plan's totals";
  let description = [{
    `arena`: the largest function arena; `live`: the largest lower bound;
    `device`, `host`, `ssd`: the peak bytes per tier (device: persistent
    state, constants and the arena; host: persistent state and the host
    activation arena); `budget`: `--gpu-memory` (0: none); `host_arena`
    (printed when not 0): the largest function's host activation arena.
  }];
  let parameters = (ins "int64_t":$arena, "int64_t":$live,
                        "int64_t":$page_size, "int64_t":$alignment,
                        "int64_t":$device, "int64_t":$host, "int64_t":$ssd,
                        "int64_t":$budget,
                        DefaultValuedParameter<"int64_t", "0">:$host_arena);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Sched_OffloadedAttr : Sched_Attr<"Offloaded", "offloaded"> {
  let summary = "What strata-offload-activations moved in a function";
  let description = [{
    `values`: the forward values copied to the host tier and back; `bytes`:
    their bytes (each moved once each way); `arena_before` and
    `live_before`: the function's device arena and its lower bound (the
    most bytes live at once), planned on the same order without the moves;
    `at_peak`: the moved bytes live where that lower bound is reached,
    the most the moves can lower it by.
    ```mlir
    func.func @micro_step() attributes {sched.offloaded = #sched.offloaded<values = 12, bytes = 393216, arena_before = 5570624, live_before = 5509124, at_peak = 393216>}
    ```
  }];
  let parameters = (ins "int64_t":$values, "int64_t":$bytes,
                        "int64_t":$arena_before, "int64_t":$live_before,
                        "int64_t":$at_peak);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Sched_PipelineAttr : Sched_Attr<"Pipeline", "pipeline"> {
  let summary = "How the model is cut into pipeline stages";
  let description = [{
    `stages`: how many; `boundaries`: for each stage after the first, the
    index of its first layer (layers numbered from 0 in the order the model
    first uses them; a layer is a module path up to its first numeric
    component, `transformer.h.3`), strictly increasing.
    ```mlir
    module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [4]>}
    ```
  }];
  let parameters = (ins "int64_t":$stages,
                        OptionalArrayRefParameter<"int64_t">:$boundaries);
  let assemblyFormat =
      "`<` `stages` `=` $stages `,` `boundaries` `=` `[` (`]`) : ($boundaries^ `]`)? `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def Sched_TokenType : TypeDef<Sched_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "A point on a stream that other streams can wait for";
  let description = [{
    Made by `sched.record` (everything its stream enqueued before it),
    consumed by `sched.wait` (nothing its stream enqueues after the wait
    starts before that point). A CUDA event; IREE's `!stream.timepoint`.
  }];
}

#endif // STRATA_DIALECT_SCHED_IR_SCHEDBASE_TD
