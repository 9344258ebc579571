//===- Passes.td - Strata passes ---------------------------*- tablegen -*-===//
//
// Every Strata pass, grouped by the stage of the flow it belongs to. Flags
// start with `strata-`; options are Option<>s.
//
//===----------------------------------------------------------------------===//

#ifndef STRATA_TRANSFORMS_PASSES_TD
#define STRATA_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Graph cleanup after import
//===----------------------------------------------------------------------===//

def RaiseGraphPass : Pass<"strata-raise-graph", "::mlir::func::FuncOp"> {
  let summary = "Recognise linear, GELU, LayerNorm and attention as single ops";
  let description = [{
    Exporters decompose the modules a user wrote; the passes after import
    want them whole. This pass rewrites:
    - `matmul(x, W)` with a rank-2 `W` into `linear`, folding a following
      `add` of a rank-1 bias and a `transpose` of the weight;
    - `0.5 * x * (1 + erf(x / sqrt(2)))` into `gelu {approximate = "none"}`
      and the tanh form into `gelu {approximate = "tanh"}`;
    - a hand-written layer norm, `(x - mean(x)) / sqrt(var(x) + eps)
      [* scale] [+ bias]` over trailing axes (also with a reciprocal square
      root), into `layer_norm`;
    - `softmax(q @ k^T * scale (+ mask | masked_fill(-inf))) [dropout] @ v`
      into `attention`, with `causal = true` when the mask is the constant
      causal mask. A finite fill of at most -1e9 (torch.finfo(dtype).min)
      counts as -inf when every row keeps at least one score: its exponent
      then underflows to exactly 0, as -inf's does.

    Before:
    ```mlir
    %0 = graph.matmul %x, %w : tensor<8x64xf32>, tensor<64x256xf32> -> tensor<8x256xf32>
    %1 = graph.add %0, %b : tensor<8x256xf32>, tensor<256xf32> -> tensor<8x256xf32>
    ```
    After:
    ```mlir
    %1 = graph.linear %x, %w, %b : (tensor<8x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<8x256xf32>
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect"];
  let options = [
    Option<"fuseAttention", "fuse-attention", "bool", /*default=*/"true",
           "Recognise scaled-dot-product attention">,
  ];
}


def KeepAttentionProbabilitiesPass
    : Pass<"strata-keep-attention-probabilities", "::mlir::func::FuncOp"> {
  let summary = "Keep attention's probabilities for its gradient";
  let description = [{
    `graph.attention_grad` makes the forward's probabilities again from the
    query and the key (a product of S x T x D and an exponential per score
    in each batch matrix). This pass has the forward attention whose
    operands and attributes the gradient repeats keep them instead
    (`keep_probabilities`: a second result, `[..., H, S, T]`) and passes
    them to the gradient, which then skips that product and those
    exponentials: memory for FLOPs, as PyTorch's eager autograd saves a
    softmax's output. The kernels compute the probabilities the same way
    in both places, so the gradients are bit-identical either way.

    Only f32 and f64 attentions: a bf16 or fp16 one would keep rounded
    probabilities, which the gradient does not compute from now.
    `strata-compile --keep-attention-probabilities` runs it after autodiff;
    a layer that `--recompute layers` makes again keeps them in its clone.

    Before:
    ```mlir
    %o = graph.attention %q, %k, %v {causal = true, scale = 0.25 : f64} : ...
    ...
    %dq, %dk, %dv = graph.attention_grad %do, %q, %k, %v {causal = true, scale = 0.25 : f64} : ...
    ```
    After:
    ```mlir
    %o, %p = graph.attention %q, %k, %v {causal = true, keep_probabilities = true, scale = 0.25 : f64} : ...
    ...
    %dq, %dk, %dv = graph.attention_grad %do, %q, %k, %v probabilities %p {causal = true, keep_probabilities = true, scale = 0.25 : f64} : ...
    ```
  }];
}

def SinkGatherPass : Pass<"strata-sink-gather", "::mlir::func::FuncOp"> {
  let summary = "Compute only the positions a gather keeps";
  let description = [{
    A classifier that reads one position of a sequence (the class token of
    a ViT or a BERT classifier: `x[:, 0]`) is a `graph.gather` after the
    last block; the ops before it that work position by position compute
    the positions it drops for nothing, forward and backward. This pass
    moves such a gather ahead of its producer when every user of the
    producer is the same gather and the producer is one of:
    - an elementwise op or a cast (any axis), a binary op whose operands
      do not broadcast along the axis;
    - `linear` (the axis is not the last), `layer_norm` (the axis comes
      before the normalized ones), `softmax` / `log_softmax` (another axis);
    - a `reshape` that keeps every dim up to the axis, a `transpose`;
    - `attention` along the query positions, without mask, causality or
      dropout: the query is gathered instead, keys and values stay whole.
    Each kept position is computed by the same operations as before; only
    products and sums over the positions (weight gradients) see fewer
    terms. It gathers only where fewer positions are kept than the axis
    has, with indices of rank 0 or 1.

    Before (the last block of a ViT, classifying from position 0):
    ```mlir
    %y = graph.linear %h, %w, %b {transpose_weight = true} : (tensor<16x65x768xf32>, tensor<192x768xf32>, tensor<192xf32>) -> tensor<16x65x192xf32>
    %z = graph.add %x, %y : tensor<16x65x192xf32>, tensor<16x65x192xf32> -> tensor<16x65x192xf32>
    %c = graph.gather %z, %i {axis = 1 : i64} : (tensor<16x65x192xf32>, tensor<i64>) -> tensor<16x192xf32>
    ```
    After (and so on up to the attention):
    ```mlir
    %h0 = graph.gather %h, %i {axis = 1 : i64} : (tensor<16x65x768xf32>, tensor<i64>) -> tensor<16x768xf32>
    %y0 = graph.linear %h0, %w, %b {transpose_weight = true} : (tensor<16x768xf32>, tensor<192x768xf32>, tensor<192xf32>) -> tensor<16x192xf32>
    %x0 = graph.gather %x, %i {axis = 1 : i64} : (tensor<16x65x192xf32>, tensor<i64>) -> tensor<16x192xf32>
    %c = graph.add %x0, %y0 : tensor<16x192xf32>, tensor<16x192xf32> -> tensor<16x192xf32>
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

//===----------------------------------------------------------------------===//
// Training: the loss, the backward graph, the optimizer
//===----------------------------------------------------------------------===//

def MixedPrecisionPass : Pass<"strata-mixed-precision", "::mlir::func::FuncOp"> {
  let summary = "Run linear, matmul, attention and conv in bf16 or fp16";
  let description = [{
    Autocast's policy: those ops read operands rounded to `dtype` and
    produce a rounded result; normalizations, softmax, losses and the
    optimizer stay fp32 and parameters stay fp32 master weights. Runs on the
    forward graph, before strata-autodiff; the gradient of a rounding rounds
    the incoming gradient too.

    With `storage=narrow` (the default) each f32 operand goes through its
    own `graph.cast` to `dtype` and the op's results are `dtype` tensors,
    widened back by a `graph.cast` to f32 for their users; the gradients of
    the op are then narrow as well. A matmul whose batch dimensions
    broadcast keeps the `round_to` form: its gradient sums over the
    broadcast dimensions, which must happen before the rounding. With
    `storage=f32` every such op takes the `round_to` form.
  }];
  let dependentDialects = ["::strata::graph::GraphDialect"];
  let options = [
    Option<"dtype", "dtype", "::strata::Precision",
           /*default=*/"::strata::Precision::BF16", "bf16 or fp16",
           [{::llvm::cl::values(
               clEnumValN(::strata::Precision::FP32, "fp32", ""),
               clEnumValN(::strata::Precision::BF16, "bf16", ""),
               clEnumValN(::strata::Precision::FP16, "fp16", ""))}]>,
    Option<"storage", "storage", "::strata::PrecisionStorage",
           /*default=*/"::strata::PrecisionStorage::Narrow",
           "narrow: those operands and results are bf16 / fp16 tensors "
           "(graph.cast), so they take half the memory and the GPU runs "
           "narrow GEMMs; f32: they stay f32, rounded by graph.round_to (the "
           "emulation). Both compute the same numbers",
           [{::llvm::cl::values(
               clEnumValN(::strata::PrecisionStorage::Narrow, "narrow", ""),
               clEnumValN(::strata::PrecisionStorage::F32, "f32", ""))}]>,
  ];
}

def SinkWideningCastsPass
    : Pass<"strata-sink-widening-casts", "::mlir::func::FuncOp"> {
  let summary = "Move data between narrow tensors, not their f32 copies";
  let description = [{
    Narrow storage (strata-mixed-precision) widens a product's result for
    its users and narrows the next product's operand; between them there
    is often only data movement (split, reshape, transpose, slice, concat:
    attention's heads in and out, and their gradients). A widening cast
    (bf16 / fp16 to f32, exact) with a single use commutes with those ops,
    so this pass moves it past them, and drops `cast(cast(x))` that
    narrows straight back to x's type. The data then moves at 2 bytes an
    element and the f32 copies and the casts disappear; the values are the
    same, bit for bit. Runs after autodiff, on the whole training step.
  }];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

def AutodiffPass : Pass<"strata-autodiff", "::mlir::ModuleOp"> {
  let summary = "Build @micro_step: the loss and the gradient of every parameter";
  let description = [{
    Clones the forward `@main` into `@micro_step`, adds the loss (the model's
    own scalar output, or the mean cross-entropy of its logits against a new
    `labels` input) and builds the backward graph by calling each op's
    `GradientOpInterface` in reverse order, summing gradients where a value
    fans out (a tied embedding and head get one gradient).

    `@micro_step` returns `strata.loss` (role "output"), the gradient of each
    trainable parameter (role "gradient", name "grad:NAME") and the updated
    buffers (role "buffer"). With `accumulate`, each gradient is added to an
    argument holding the running sum (role "gradient"), so the runtime can
    run several micro-steps per optimizer step.
  }];
  let dependentDialects = ["::strata::graph::GraphDialect",
                           "::mlir::func::FuncDialect"];
  let options = [
    ListOption<"freeze", "freeze", "std::string",
               "Parameters (glob patterns over ONNX names) that get no gradient">,
    Option<"logits", "logits", "std::string", /*default=*/"\"\"",
           "The output the cross-entropy reads (default: the first)">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "Label value excluded from the loss">,
    Option<"accumulate", "accumulate", "bool", /*default=*/"false",
           "Add each gradient into a running sum (gradient accumulation)">,
    Option<"lossScale", "loss-scale", "bool", /*default=*/"false",
           "Seed the backward pass with the input strata.loss_scale (fp16)">,
    Option<"lossWeight", "loss-weight", "double", /*default=*/"1.0",
           "Seed of the backward pass (1/N with N data-parallel ranks, so "
           "summed gradients are averages)">,
  ];
}

def OptimizerPass : Pass<"strata-optimizer", "::mlir::ModuleOp"> {
  let summary = "Build @optimizer_step: clipping and the parameter updates";
  let description = [{
    For every gradient `@micro_step` returns, `@optimizer_step` takes the
    parameter, its accumulated gradient and its optimizer states (role
    "optimizer_state": "adamw.exp_avg:NAME", "adamw.exp_avg_sq:NAME" or
    "sgd.momentum:NAME"), and the inputs `strata.lr` (f64) and `strata.step`
    (i64, from 1). It returns `strata.grad_norm` (the global L2 norm of the
    averaged gradient), the updated parameters and the updated states.
    Gradients are multiplied by `1/accum` and, with `clip-norm`, by
    `min(1, clip / (norm + 1e-6))` inside the update.
  }];
  let dependentDialects = ["::strata::graph::GraphDialect",
                           "::mlir::func::FuncDialect"];
  let options = [
    Option<"optimizer", "optimizer", "::strata::Optimizer",
           /*default=*/"::strata::Optimizer::AdamW", "adamw or sgd",
           [{::llvm::cl::values(
               clEnumValN(::strata::Optimizer::AdamW, "adamw", ""),
               clEnumValN(::strata::Optimizer::SGD, "sgd", ""))}]>,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.01",
           "Decoupled (AdamW) or L2 (SGD) weight decay">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9", "SGD momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"0.0",
           "Global gradient-norm clipping threshold (0: off)">,
    Option<"accum", "accum", "unsigned", /*default=*/"1",
           "Micro-steps per optimizer step">,
    Option<"lossScale", "loss-scale", "bool", /*default=*/"false",
           "Divide the gradients by the input strata.loss_scale and skip the "
           "update when their norm is not finite (fp16)">,
  ];
}

//===----------------------------------------------------------------------===//
// Distribution
//===----------------------------------------------------------------------===//

def PipelinePass : Pass<"strata-pipeline", "::mlir::ModuleOp"> {
  let summary = "Cut the forward graph into pipeline stages between layers";
  let description = [{
    Cuts `@main` into `stages` pipeline stages at layer boundaries. A layer
    is a module path up to its first numeric component (`transformer.h.3`),
    numbered from 0 in the order the model first uses it; the ops before
    the first layer (embeddings) go with it, those after the last (final
    norm, heads) with the last. Every op is placed no earlier than the
    parameters and the values it reads, so values only flow to later
    stages; an op that reads no parameter (a constant, a mask computed from
    an input) takes the earliest stage that uses it (any stage may compute
    it again).

    The split balances the layers' forward FLOPs: of the contiguous splits,
    the one whose largest stage is smallest. `boundaries` gives a split
    instead: the first layer of each stage after the first.

    Writes `sched.pipeline = #sched.pipeline<stages = S, boundaries = [...]>`
    on the module and `sched.stage = s` on every op of `@main`; autodiff
    then places each gradient op on the stage of the op it differentiates.
    `stages = 1` changes nothing.

    ```mlir
    // stages=2 on a model of 4 layers of equal cost
    module attributes {sched.pipeline = #sched.pipeline<stages = 2, boundaries = [2]>} {
      func.func @main(...) {
        %0 = graph.linear %arg0, %arg1, %arg2 {sched.stage = 0 : i64, ...}
        ...
        %6 = graph.linear %5, %arg7, %arg8 {sched.stage = 1 : i64, ...}
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect",
                           "::strata::sched::SchedDialect"];
  let options = [
    Option<"stages", "stages", "unsigned", /*default=*/"1",
           "Pipeline stages (1: no pipeline)">,
    ListOption<"boundaries", "boundaries", "int64_t",
               "The first layer of each stage after the first (default: "
               "balanced by forward FLOPs)">,
  ];
}

def StageProgramsPass : Pass<"strata-stage-programs", "::mlir::ModuleOp"> {
  let summary = "One training-step program per pipeline stage, unrolled over the micro-batches";
  let description = [{
    Splits `@micro_step`, whose ops `strata-pipeline` and `strata-autodiff`
    placed on stages, into `@pipeline_step_<s>` for each stage `s`: the
    stage's forward (F) and backward (B) ops, and with the zero-bubble
    schedule its weight-gradient ops (W: the backward ops the values sent
    to the previous stage do not need) apart from B, cloned once per
    micro-batch in the order the schedule gives the stage
    (`strata/Transforms/PipelineSchedule.h`). A value computed on one stage
    and read on another is sent (`sched.send`) at the end of the action
    that computes it and received (`sched.recv`) at the start of the
    consumer's action of the same micro-batch, through every stage in
    between; its tag numbers it among the values that cross. Ops that read
    no state (constants, masks computed from inputs) are computed again on
    every stage that needs them. Inputs become one argument per
    micro-batch (`sched.micro_batch`); gradient accumulators and buffers
    chain from one micro-batch to the next; each stage returns the losses
    (the last stage, one per micro-batch), the gradients and buffers it
    computes. A parameter read on several stages (a tied weight) has a
    gradient sum on each; after strata-partition, each such stage
    reduce-scatters its whole sum over its stage group once, after its last
    micro-batch (taken out of the bucket's per-micro-batch reduce-scatter),
    so nothing of it crosses a cut during the step. `@micro_step` is
    removed.

    Every op of a stage program carries its action in its location (a
    fused location whose metadata is `"sched.action F3"`: phase F, B or W
    of micro-batch 3; CSE ignores it), and each `@pipeline_step_<s>` the
    schedule (`sched.schedule = "1f1b"`) and its stage's cost per
    micro-batch in forward FLOPs of its F, B and W ops
    (`sched.stage_cost = array<f64: F, B, W>`), which codegen writes into
    the artifact for the trace and `strata-inspect`.

    `@optimizer_step` becomes `@optimizer_step_<s>`: the updates of the
    parameters stage `s` holds, after a shared parameter's sums (or, after
    strata-partition, each rank's shards of them) are exchanged between its
    stages and added in stage order (the same bits on every copy), and with the squared gradient norm summed up the chain
    of stages and the total sent back down.
  }];
  let dependentDialects = ["::strata::graph::GraphDialect",
                           "::strata::sched::SchedDialect"];
  let options = [
    Option<"schedule", "schedule", "::strata::pipeline::ScheduleKind",
           /*default=*/"::strata::pipeline::ScheduleKind::OneFOneB",
           "1f1b or zb (zero bubble)",
           [{::llvm::cl::values(
               clEnumValN(::strata::pipeline::ScheduleKind::OneFOneB, "1f1b", ""),
               clEnumValN(::strata::pipeline::ScheduleKind::ZeroBubble, "zb", ""))}]>,
    Option<"microBatches", "micro-batches", "unsigned", /*default=*/"1",
           "Micro-batches per step (m)">,
  ];
}

def VerifyPipelinePass : Pass<"strata-verify-pipeline", "::mlir::ModuleOp"> {
  let summary = "Prove that the stage programs' sends and receives match and cannot deadlock";
  let description = [{
    Replays the `sched.send` / `sched.recv` ops of every `@pipeline_step_<s>`
    and then its `@optimizer_step_<s>` in program order under the runtime's model (a send never blocks its
    stage; a receive waits for its neighbour's send; the messages between
    two stages arrive in the order sent) and fails, naming stage,
    micro-batch and tag, when a receive would get another message than the
    one it expects, a message is never received, or stages wait on each
    other forever.
  }];
  let dependentDialects = ["::strata::sched::SchedDialect"];
}

def PartitionPass : Pass<"strata-partition", "::mlir::ModuleOp"> {
  let summary = "Shard parameters, gradients and optimizer states (ZeRO-3 / MiCS)";
  let description = [{
    Over a partition group of `partition` ranks (ranks {gP .. gP+P-1}), every
    parameter, gradient and optimizer state becomes a flat shard of
    ceil(n/P) elements (the value zero-padded to a multiple of P; argument
    attribute `graph.shards = P`). Parameters are *bucketed*: taken in order
    of first use in `@micro_step`, cut where the layer changes (the module
    path up to its first numeric component, `transformer.h.0`, else the
    module, `transformer.wte`) or where the bucket would exceed
    `bucket-bytes` (gathered size; 0 puts each parameter in its own bucket).
    Each bucket's collectives are one coalesced `sched` op.
    - `@main` and `@micro_step` all-gather each bucket before its first
      forward use, and `@micro_step` again before its first backward use
      (the members used there), so the full values need not live across
      the step;
    - `@micro_step` reduce-scatters each bucket's gradients (flattened,
      padded) over the partition group right after the last of them is
      computed, into the shard accumulator with accumulation;
    - `@optimizer_step` works on shards only: with 2-hop sync and N/P > 1
      each bucket's gradient shards are all-reduced over the replication
      group ({j, j+P, ...}) once per optimizer step; the squared norm is
      all-reduced over the partition group before its square root; the
      updates keep replicas bit-identical without a broadcast.
    `reduce-type=bf16|f16` casts the gradients to that type before each
    reduce-scatter and all-reduce and widens the sums after (DeepSpeed's
    `communication_data_type`, FSDP's `reduce_dtype`); accumulation and the
    update stay f32.
    `grad-sync=global` (DeepSpeed's default, for ablation) instead
    all-reduces the full gradients over every rank each micro-step and keeps
    this rank's shard (`sched.local_shard`); no boundary all-reduce.
    With `hierarchical`, each all-gather is MiCS's three stages: an
    all-gather among the group's ranks with the same local rank (one per
    node, "inter"), the result split into its P/K shards (the
    rearrangement), and the P/K batched intra-node all-gathers ("intra", one
    coalesced op) whose results concatenate to [C0, C1, ..., C(P-1)].
    `partition = 1` is data parallelism (replicated states, the gradients
    summed once per step); `partition = world` is ZeRO-3.

    ```mlir
    // P = 2: before
    %y = graph.linear %x, %w, %b : ...
    // after
    %g:2 = sched.all_gather partition %ws, %bs : tensor<10xf32>, tensor<3xf32> -> tensor<20xf32>, tensor<6xf32>
    %w = graph.reshape %g#0 : tensor<20xf32> -> tensor<5x4xf32>
    %b = graph.slice %g#1 {...} : (tensor<6xf32>) -> tensor<5xf32>
    %y = graph.linear %x, %w, %b : ...
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect",
                           "::strata::sched::SchedDialect"];
  let options = [
    Option<"world", "world", "unsigned", /*default=*/"1", "Ranks N">,
    Option<"ranksPerNode", "ranks-per-node", "unsigned", /*default=*/"1",
           "Ranks per node K">,
    Option<"partition", "partition", "unsigned", /*default=*/"1",
           "Partition group size P (P | N)">,
    Option<"hierarchical", "hierarchical", "bool", /*default=*/"false",
           "MiCS hierarchical all-gather (needs P > K and K | P)">,
    Option<"gradSync", "grad-sync", "::strata::GradSync",
           /*default=*/"::strata::GradSync::TwoHop",
           "2hop (reduce-scatter per micro-step, replication all-reduce per "
           "step) or global (all-reduce over every rank per micro-step)",
           [{::llvm::cl::values(
               clEnumValN(::strata::GradSync::TwoHop, "2hop", ""),
               clEnumValN(::strata::GradSync::Global, "global", ""))}]>,
    Option<"bucketBytes", "bucket-bytes", "uint64_t", /*default=*/"0",
           "Largest coalesced bucket in bytes (0: one parameter a bucket)">,
    Option<"reduceType", "reduce-type", "std::string", /*default=*/"\"f32\"",
           "The element type gradients are summed over the ranks in: f32, "
           "or bf16 / f16 (cast before each reduce-scatter or all-reduce, "
           "widened after: half the bytes, rounded at each sum)">,
  ];
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

def GroupUpdatesPass : Pass<"strata-group-updates", "::mlir::func::FuncOp"> {
  let summary = "Multi-tensor optimizer updates and gradient norms";
  let description = [{
    Merges the per-parameter `graph.adamw_update`, `graph.sgd_update` and
    `graph.sum_squares` ops of a block into multi-tensor ops, so one kernel
    launch updates many parameters (torch.optim's `foreach` / `fused`
    implementations). Ops merge when they share the op, its attributes, its
    scalar operands (lr, step, grad_scale) and the element types. The merged
    op stands where the group's first member stood: a member joins only if
    its operands are defined before that point and no other op between reads
    the state it updates in place. A group's tensor operands take at most
    `max-bytes` bytes (they are resident together); a member larger than
    that stays alone. Every element is computed as before: on the CPU the
    results are the same bit for bit. Runs first in the memory pipeline.
  }];
  let options = [
    Option<"maxBytes", "max-bytes", "uint64_t", /*default=*/"256ull << 20",
           "Largest total size of a group's tensor operands in bytes">,
  ];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

def FuseElementwisePass
    : Pass<"strata-fuse-elementwise", "::mlir::func::FuncOp"> {
  let summary = "Run chains of elementwise ops as one kernel";
  let description = [{
    Groups elementwise float ops (arithmetic, the unary activations, float
    casts, parameter-free `unary_grad`) whose results share one shape into
    `graph.fused_elementwise`: one kernel reads the chain's inputs once and
    writes only the values used outside it, so the intermediates take no
    memory and no kernel launch. A group grows along def-use edges in
    program order; an op joins its operand's group only when every use of
    the group's values outside it comes later (the fused op stands where
    the last member stood), and brings its other operands' groups along
    under the same rule (two chains that meet become one kernel). Each instruction computes what its op does: on
    the CPU the numbers are the same bit for bit. Runs on the whole
    training step, first in the memory pipeline.
  }];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

def OffloadStatePass : Pass<"strata-offload-state", "::mlir::ModuleOp"> {
  let summary = "Move persistent state to the host and SSD tiers until the step fits";
  let description = [{
    With `gpu-memory` (bytes; 0: no budget), the device holds the
    persistent state (parameters, gradients, optimizer states, inputs), the
    constants and the activation arena (measured as strata-plan-memory
    would lay it out). Over budget, the pass moves persistent state to
    slower tiers until it fits or nothing more can move, largest first:
    optimizer states to the host (while `host-memory` allows; 0: no limit),
    then optimizer states to SSD (while `ssd-memory` allows; 0: no SSD),
    then parameters to the host. A moved tensor gets `sched.tier` on its
    arguments; each op that reads it reads a `sched.reload` placed just
    before it, and a new value the function returns for it goes through a
    `sched.offload` right after it is computed, so its device copies live
    only around their uses.

    ```mlir
    // after, with the moments on the host
    func.func @optimizer_step(..., %m: tensor<256xf32> {..., sched.tier = #sched<tier host>}, ...) {
      %r = sched.reload host %m : tensor<256xf32>
      %u:3 = graph.adamw_update %w, %g, %r, ...
      %o = sched.offload host %u#1 : tensor<256xf32>
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect",
                           "::strata::sched::SchedDialect"];
  let options = [
    Option<"alignment", "alignment", "uint64_t", /*default=*/"64",
           "Every offset is a multiple of this">,
    Option<"gpuMemory", "gpu-memory", "uint64_t", /*default=*/"0",
           "Device bytes the step may use (0: no budget)">,
    Option<"hostMemory", "host-memory", "uint64_t", /*default=*/"0",
           "Host bytes for offloaded state (0: no limit)">,
    Option<"ssdMemory", "ssd-memory", "uint64_t", /*default=*/"0",
           "SSD bytes for offloaded optimizer states (0: no SSD tier)">,
  ];
}

def RecomputePass : Pass<"strata-recompute", "::mlir::ModuleOp"> {
  let summary = "Make forward activations again in backward instead of keeping them";
  let description = [{
    In `@micro_step`, a forward value that backward reads, made by an op
    that is pure, deterministic and has one result, whose operands are
    still live where backward first reads it, is made again right before
    that read; the forward copy then dies in forward. The clones carry
    `sched.recomputed`. `mode=always`: every candidate. `mode=layers`: every
    layer but the loss's is checkpointed: its inputs, outputs and what
    cannot run again are kept, its other ops that backward needs are cloned
    in order before the layer's first backward read, and the parameters
    they read are fetched again in backward (`sched.checkpointed` on the
    function lists the layers). `mode=auto`: single ops and layers, the
    fewest FLOPs per byte freed first, only while the step does not fit
    `gpu-memory` (after strata-offload-state has moved what it can).
    With pipeline stages it runs before strata-stage-programs
    (`mark-backward`: the clones and fetches it makes carry
    `sched.backward`, so each stage runs them in its backward).

    ```mlir
    // after: %t's clone right before backward reads it
    %t = graph.tanh %w : tensor<16xf32>
    ...
    %r = graph.tanh %w {sched.recomputed} : tensor<16xf32>
    %g = graph.mul %w, %r : ...
    ```
  }];
  let dependentDialects = ["::strata::sched::SchedDialect"];
  let options = [
    Option<"mode", "mode", "::strata::Recompute",
           /*default=*/"::strata::Recompute::Auto",
           "auto (under gpu-memory), always or layers",
           [{::llvm::cl::values(
               clEnumValN(::strata::Recompute::Auto, "auto", ""),
               clEnumValN(::strata::Recompute::Always, "always", ""),
               clEnumValN(::strata::Recompute::Layers, "layers", ""))}]>,
    Option<"alignment", "alignment", "uint64_t", /*default=*/"64",
           "Every offset is a multiple of this">,
    Option<"gpuMemory", "gpu-memory", "uint64_t", /*default=*/"0",
           "Device bytes the step may use (0: no budget)">,
    Option<"markBackward", "mark-backward", "bool", /*default=*/"false",
           "Mark what it makes `sched.backward` (before "
           "strata-stage-programs, which places ops by it)">,
    Option<"layersPerStage", "layers-per-stage", "int64_t", /*default=*/"-1",
           "mode=layers: checkpoint each pipeline stage's first N layers "
           "only (-1: every layer)">,
  ];
}

def OffloadActivationsPass
    : Pass<"strata-offload-activations", "::mlir::ModuleOp"> {
  let summary = "Keep the activations backward reads on the host tier between the passes";
  let description = [{
    A saved activation is a forward value that backward reads: in
    `@micro_step`, a value made at or before the loss (the op of the first
    returned value) and read after it; in a pipelined stage program
    (`@pipeline_step_<s>`), a value made by an op without `sched.backward`
    and read by one with it (each micro-batch's values are their own). Each
    one of at least `min-bytes` bytes, not returned, whose last forward
    read comes before its first backward read with ops in between, gets a
    `sched.offload activation host` right after the op that makes it (the
    copy overlaps the forward reads that follow) and one
    `sched.reload activation host` right before its first backward read,
    which every backward read then reads. The device copy dies at its last
    forward read (or at the offload), the reloaded one lives from the
    reload; strata-schedule puts the moves on the d2h and h2d streams and
    hoists the reloads (fetches) by the prefetch depth, so backward, which
    reads the values in reverse, reloads the last-saved first. The host
    copies live in the function's host activation arena, which
    strata-plan-memory plans by lifetime apart from the device arena.

    Not moved: constants, function arguments, results computed into state,
    results of collectives and moves (a gathered parameter is gathered
    again in backward), values returned. Each function that moved values
    gets `sched.offloaded` (how many, their bytes, and its device arena on
    the same order without the moves).

    ```mlir
    // after
    %h = graph.tanh %x : tensor<32x32xf32>
    %saved = sched.offload activation host %h : tensor<32x32xf32>
    %y = graph.exp %h : tensor<32x32xf32>
    ...                                        // the loss, backward
    %back = sched.reload activation host %saved : tensor<32x32xf32>
    %g = graph.tanh_grad %back, %dy : ...
    ```
  }];
  let dependentDialects = ["::strata::sched::SchedDialect"];
  let options = [
    Option<"minBytes", "min-bytes", "uint64_t", /*default=*/"4096",
           "Smallest activation moved, in bytes">,
    Option<"alignment", "alignment", "uint64_t", /*default=*/"64",
           "Every offset is a multiple of this (for the arena measured "
           "before)">,
  ];
}

def PlanMemoryPass : Pass<"strata-plan-memory", "::mlir::ModuleOp"> {
  let summary = "Place every activation in one arena by lifetime";
  let description = [{
    Each function is one program; programs run one at a time, so their
    activations share one arena. Within a function, ops are numbered in
    block order; a result lives from its op to its last user (the return
    counts as a user at the end). Results a function computes straight into
    persistent state (graph::findInPlaceStateUpdates, the rule codegen
    applies) and constants take no arena bytes. The offsets are chosen
    greedily by size: largest first, each at the best-fitting gap among the
    already placed tensors whose lifetimes overlap its own, every offset a
    multiple of `alignment`. Two results whose lifetimes overlap never share
    a byte, except that an in-place op may write its result over an operand
    that dies there.

    Results: on each op, `sched.slots` (one `#sched.slot<offset, size>` per
    result; `unit`: in its state's storage); on each function
    `sched.arena` (the planned peak and the lower bound, the most bytes live
    at once); on the module `sched.memory_plan`: the maxima over the
    functions, the page size and the bytes of each tier. The dialect
    verifies them.

    With `gpu-memory` (bytes; 0: no budget), a step that does not fit is an
    error saying how many bytes do not fit and which flags would help
    (`ssd-memory`, `recompute` and `offload-activations` say what the
    passes before could do, for that message).

    Results of `sched.offload activation` (the host copies of saved
    activations) are planned the same way in a host activation arena of
    their own: `#sched.arena<..., host = H>` on the function, `host_arena`
    on the module (and counted in its `host` bytes). With `host-memory`
    (bytes; 0: no limit), a host activation arena that does not fit beside
    the offloaded state is an error.

    ```mlir
    // after
    %0 = graph.tanh %x {sched.slots = [#sched.slot<0, 64>]} : tensor<16xf32>
    %1 = graph.exp %0 {sched.slots = [#sched.slot<64, 64>]} : tensor<16xf32>
    %2 = graph.neg %1 {sched.slots = [#sched.slot<0, 64>]} : tensor<16xf32>
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect",
                           "::strata::sched::SchedDialect"];
  let options = [
    Option<"pageSize", "page-size", "uint64_t", /*default=*/"4194304",
           "Bytes of a page, the unit the pools allocate and moves transfer">,
    Option<"alignment", "alignment", "uint64_t", /*default=*/"64",
           "Every offset is a multiple of this">,
    Option<"gpuMemory", "gpu-memory", "uint64_t", /*default=*/"0",
           "Device bytes the step may use (0: no budget)">,
    Option<"ssdMemory", "ssd-memory", "uint64_t", /*default=*/"0",
           "SSD bytes the state could use (for the message)">,
    Option<"hostMemory", "host-memory", "uint64_t", /*default=*/"0",
           "Host bytes (0: no limit): offloaded state and the host "
           "activation arena must fit them">,
    Option<"recompute", "recompute", "::strata::Recompute",
           /*default=*/"::strata::Recompute::None",
           "none, auto or always: whether activations could be recomputed "
           "(for the message)",
           [{::llvm::cl::values(
               clEnumValN(::strata::Recompute::None, "none", ""),
               clEnumValN(::strata::Recompute::Auto, "auto", ""),
               clEnumValN(::strata::Recompute::Always, "always", ""),
               clEnumValN(::strata::Recompute::Layers, "layers", ""))}]>,
    Option<"offloadActivations", "offload-activations", "bool",
           /*default=*/"false",
           "Whether strata-offload-activations ran (for the message)">,
  ];
}

//===----------------------------------------------------------------------===//
// Schedule
//===----------------------------------------------------------------------===//

def SchedulePass : Pass<"strata-schedule", "::mlir::ModuleOp"> {
  let summary = "Put every op on a stream and hoist fetches ahead of their use";
  let description = [{
    Streams (`sched.stream = #sched<stream ...>` on each op): parameter
    all-gathers on `collective`, gradient reductions (reduce-scatters,
    all-reduces) on `reduce`, reloads from the host on `h2d`, offloads to
    it on `d2h`, moves to and from SSD on `ssd`, everything else on
    `compute`. Each collective stream issues its collectives in the
    program's order on every rank, over communicators of its own, so a
    bucket's reduction never holds up the next layer's gather. A function it reorders loses its memory plan
    (`sched.slots`, `sched.arena`): strata-plan-memory plans the new order.

    Prefetch: a *fetch* is a stage-1 all-gather (partition or inter group)
    or a reload, with the ops that only rearrange what it fetched (split,
    the intra-node all-gather, concat, slice, reshape). Walking the fetches
    in order, fetch k moves up to just before the first consumer of fetch
    k - `prefetch-depth` (depth 0 leaves every fetch where it is), so its
    stream can run it while compute works on earlier layers. A move is
    taken back step by step while the fetched bytes waiting for their
    consumers would pass `prefetch-bytes` (0: no cap) or the bytes live at
    once plus the persistent state would pass `gpu-memory` (0: no budget).
    Moving changes no value: the same ops run on the same inputs.

    ```mlir
    // depth 1: the next layer's gather is issued before this layer computes
    %w1 = sched.all_gather partition %s1 {sched.stream = #sched<stream collective>} : ...
    %y0 = graph.linear %x, %w0 {sched.stream = #sched<stream compute>} : ...
    %y1 = graph.linear %y0, %w1 {sched.stream = #sched<stream compute>} : ...
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect",
                           "::strata::sched::SchedDialect"];
  let options = [
    Option<"prefetchDepth", "prefetch-depth", "unsigned", /*default=*/"1",
           "How many fetches ahead of their consumers fetches may run">,
    Option<"prefetchBytes", "prefetch-bytes", "uint64_t", /*default=*/"0",
           "Most fetched bytes waiting for their consumers (0: no cap)">,
    Option<"gpuMemory", "gpu-memory", "uint64_t", /*default=*/"0",
           "Device bytes the step may use (0: no budget)">,
  ];
}

def InsertEventsPass : Pass<"strata-insert-events", "::mlir::ModuleOp"> {
  let summary = "Order the streams: an event wherever two streams touch the same bytes";
  let description = [{
    Runs after strata-plan-memory, whose slots say which bytes each value
    occupies (activations in the arena; a state, an input, a result written
    into a state: that tensor's own storage). For every op and every other
    stream, the latest earlier op there that writes bytes this op reads or
    writes, or reads bytes this op writes, must complete first, unless the
    waits already order it (vector clocks): a `sched.record` on that op's
    stream right after it makes a `!sched.token`, and a `sched.wait` on
    this op's stream right before it waits for the tokens. `sched.streams`
    on the function lists its streams (compute first). Programs join every
    stream at their end, so nothing crosses programs.

    ```mlir
    %g = sched.all_gather partition %s {sched.stream = #sched<stream collective>, ...} : ...
    %t = sched.record on collective
    sched.wait %t on compute
    %y = graph.linear %x, %g {sched.stream = #sched<stream compute>, ...} : ...
    ```
  }];
  let dependentDialects = ["::strata::graph::GraphDialect",
                           "::strata::sched::SchedDialect"];
}

def VerifySchedulePass : Pass<"strata-verify-schedule", "::mlir::ModuleOp"> {
  let summary = "Prove the streams race-free and deadlock-free";
  let description = [{
    From `sched.stream`, the `sched.record` / `sched.wait` tokens and the
    memory plan's slots: every two ops on different streams that touch
    overlapping bytes, one of them writing (a read after its producer, a
    reuse of memory after its last reader or writer), must be ordered by
    the waits and each stream's order (tokens are SSA values, so a wait
    can only name a record that comes before it: the waits cannot form a
    cycle); the collectives off the `reduce` stream are all on one stream
    (the runtime gives `reduce` communicators of its own and shares the
    others, so every rank of a group must issue each communicator's
    collectives in the same order). A failure names the two ops. It runs at the
    end of every strata-compile.
  }];
}

def PlanExecutionPass : Pass<"strata-plan-execution", "::mlir::ModuleOp"> {
  let summary = "Decide what the runtime would otherwise infer from op names";
  let description = [{
    The last pass before codegen; the runtime reads its decisions from the
    artifact and matches no op names:

    - `sched.delayable`: the instructions `strata-run --inject-delay` may
      delay (collectives, moves, optimizer updates), so a missing event
      shows as a wrong answer;
    - `sched.rng_stream` and `sched.seed_slot` on every op that draws
      random numbers (a dropout ratio above 0): the stream its numbers come
      from (the `rng_stream` autodiff gave a forward op and its gradient,
      else the instruction's number) and its slot in the program's block of
      seeds (an asynchronous device reads its seed there when it runs, so a
      replayed CUDA graph draws each step's);
    - `sched.exact_tf32 = bf16` (or `f16`) on a linear or matmul whose two
      factors come straight from `graph.round_to`: they hold values of that
      type, so TF32 tensor cores (10 mantissa bits) round nothing and a
      backend may use them under `strata-run --tf32`.

    ```mlir
    %d, %m = graph.dropout %x {ratio = 1.0e-01 : f64, sched.rng_stream = 3 : i64, sched.seed_slot = 0 : i64} : ...
    %y = graph.linear %a, %b {sched.exact_tf32 = bf16} : ...
    ```
  }];
  let dependentDialects = ["::strata::sched::SchedDialect"];
}

#endif // STRATA_TRANSFORMS_PASSES_TD
