#!/usr/bin/env python3
"""The calibrated cluster file's optional figures, each read and charged.

Writes a cluster file of round, made-up figures (a calibrated CPU's shape:
per-element tables and copy_seconds, no kernel launch cost), then predicts
the artifacts with it and with one figure changed, and prints each
figure's effect on the predicted step or on one op kind's summed spans in
strata-sim's trace. No timing: every number comes from the cost model.

    check_calibrated_costs.py --sim BIN/strata-sim --plain ART --offload ART
                              --unfused ART [--kept ART] [--sharded ART]

ART --plain: gpt_tiny (rows of 64, AdamW over parameters of at most 16K
elements); --unfused: gpt_tiny with its attention as the exporter wrote
it (--no-fuse-attention: the heads' transposes, which the fused
attention reads in place); --kept: gpt_tiny with
--keep-attention-probabilities (causal attention that keeps its
probabilities); --offload: an artifact with tier
moves on the copy streams that the compute stream waits for; --sharded:
an artifact of 2 ranks whose all-gathers and reduce-scatters run on side
streams (ZeRO-3).
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

BASE = {
    "name": "calibrated-like",
    "gpus_per_node": 1,
    "emulated_nodes": 1,
    "flops_f32": 1e11,
    "memory_bytes": 1e10,
    "host_memory_bytes": 1e11,
    "memory_bandwidth": 1e10,
    "memory_efficiency": 1,
    "pcie_bandwidth": 1e10,
    "intra_bandwidth": 1e10,
    "intra_latency": 0,
    "inter_bandwidth": 1e10,
    "inter_latency": 0,
    "kernel_launch": 0,
    "gemm_rate": [8, 1e10, 1024, 1e11],
    "copy_seconds": [1e3, 1e-10, 1e7, 1e-10],
    "op.graph.layer_norm": [1e3, 1e-9, 1e7, 1e-9],
    "op.graph.transpose": [1e3, 1e-9, 1e7, 1e-9],
    # Per operand element: flat up to 100K operands, 100 times cheaper at
    # 1M (a loop that splits over the pool).
    "op.graph.adamw_update": [1e3, 1e-8, 1e5, 1e-8, 1e6, 1e-10],
}


def write(path, cluster):
    with open(path, "w") as f:
        json.dump(cluster, f, indent=2)


def predict(sim, art, cluster, work, name):
    path = os.path.join(work, name + ".json")
    write(path, cluster)
    trace = os.path.join(work, name + ".trace.json")
    out = subprocess.run([sim, art, "--cluster", path, "--json", "--trace",
                          trace], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        sys.exit("FAILED: strata-sim: " + out.stdout)
    spans = collections.Counter()
    for e in json.load(open(trace))["traceEvents"]:
        spans[e["name"]] += e["dur"] * 1e-6
    return json.loads(out.stdout), spans


def changed(changes):
    """BASE with `changes` (a value None: the key left out)."""
    c = dict(BASE)
    for key, v in changes.items():
        if v is None:
            c.pop(key, None)
        else:
            c[key] = v
    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sim", required=True)
    ap.add_argument("--plain", required=True)
    ap.add_argument("--offload", required=True)
    ap.add_argument("--unfused", required=True)
    ap.add_argument("--kept")
    ap.add_argument("--sharded")
    ap.add_argument("--bf16", help="gpt_tiny compiled --dtype bf16")
    ap.add_argument("--fp16", help="gpt_tiny compiled --dtype fp16")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="strata-calibrated-costs-")
    _, spans = predict(args.sim, args.plain, BASE, work, "base")

    # AdamW over many small parameters: each costed at its own size (all
    # at the flat 1e-8), not the instruction's 520K operands at once (near
    # 1e-10 by the table).
    _, flatSpans = predict(args.sim, args.plain, changed(
        {"op.graph.adamw_update": [1e3, 1e-8]}), work, "flat")
    ratio = spans["graph.adamw_update"] / flatSpans["graph.adamw_update"]
    print("adamw per parameter: %.3f of the flat table's cost" % ratio)

    # Rows of 64 take the /64 table (5 times the rows-of-256 one).
    _, rows = predict(args.sim, args.plain, changed(
        {"op.graph.layer_norm/64": [1e3, 5e-9, 1e7, 5e-9]}), work, "rows")
    print("layer_norm on rows of 64: %.2f times the rows-of-256 table" %
          (rows["graph.layer_norm"] / spans["graph.layer_norm"]))
    _, wide = predict(args.sim, args.plain, changed(
        {"op.graph.layer_norm/1024": [1e3, 5e-9, 1e7, 5e-9]}), work, "wide")
    print("layer_norm with a rows-of-1024 table: %.2f times" %
          (wide["graph.layer_norm"] / spans["graph.layer_norm"]))

    # A transpose that keeps the last axis (the heads') takes
    # graph.transpose_rows.
    _, unfused = predict(args.sim, args.unfused, BASE, work, "unfused")
    _, heads = predict(args.sim, args.unfused, changed(
        {"op.graph.transpose_rows": [1e3, 2e-9, 1e7, 2e-9]}), work, "heads")
    print("transpose keeping the last axis: %.2f times the transpose table" %
          (heads["graph.transpose"] / unfused["graph.transpose"]))

    # Kept probabilities: causal attention and its gradient take the kept
    # tables when the artifact keeps them, the causal ones otherwise.
    if args.kept:
        tables = {"attention_causal_score": [32, 1e-9, 1024, 1e-9],
                  "attention_causal_mac": [32, 1e-10, 1024, 1e-10],
                  "attention_grad_causal_score": [32, 4e-9, 1024, 4e-9],
                  "attention_grad_causal_mac": [32, 4e-10, 1024, 4e-10],
                  "attention_kept_causal_score": [32, 2e-9, 1024, 2e-9],
                  "attention_kept_causal_mac": [32, 2e-10, 1024, 2e-10],
                  "attention_grad_kept_causal_score": [32, 1e-9, 1024, 1e-9],
                  "attention_grad_kept_causal_mac": [32, 1e-10, 1024, 1e-10]}
        # Every table must be there or none is read: the kept artifact
        # without the kept tables takes the causal ones.
        causal_only = {k: v for k, v in tables.items() if "kept" not in k}
        _, plain = predict(args.sim, args.kept, changed(causal_only), work,
                           "kept-causal")
        _, kept = predict(args.sim, args.kept, changed(tables), work, "kept")
        print("kept attention: forward %.2f, gradient %.2f times the causal "
              "tables" % (kept["graph.attention"] / plain["graph.attention"],
                          kept["graph.attention_grad"] /
                          plain["graph.attention_grad"]))

    # Heads read in place (heads_inner, as gpt_tiny's attention is): the
    # "heads_inner." tables where the file has them, the [H, T, D] ones
    # otherwise (above).
    if args.kept:
        inner = dict(tables)
        inner.update({"heads_inner." + k: [v[0], 3 * v[1], v[2], 3 * v[3]]
                      for k, v in tables.items()})
        _, both = predict(args.sim, args.kept, changed(inner), work,
                          "inner")
        _, plain_layout = predict(args.sim, args.plain, changed(tables),
                                  work, "plain-layout")
        _, inner_plain = predict(args.sim, args.plain, changed(inner), work,
                                 "inner-plain")
        print("heads in place: kept forward %.2f, gradient %.2f; causal "
              "forward %.2f, gradient %.2f times the [H, T, D] tables" %
              (both["graph.attention"] / kept["graph.attention"],
               both["graph.attention_grad"] / kept["graph.attention_grad"],
               inner_plain["graph.attention"] /
               plain_layout["graph.attention"],
               inner_plain["graph.attention_grad"] /
               plain_layout["graph.attention_grad"]))

    # Kept probabilities on the roofline (no attention tables: a GPU
    # preset) cost what the CUDA kernels do: the forward makes the scores
    # a second time to write them (1.5 times the products) and the
    # gradient ignores them (the same products, and it does not read
    # them). Compute-bound, then memory-bound.
    if args.kept:
        for bound, cluster in (
                ("compute-bound", changed({"memory_bandwidth": 1e18})),
                ("memory-bound", changed({"flops_f32": 1e21}))):
            _, plain = predict(args.sim, args.plain, cluster, work, bound)
            _, kept = predict(args.sim, args.kept, cluster, work,
                              bound + "-kept")
            print("kept attention on the roofline, %s: forward %.2f, "
                  "gradient %.2f times without" %
                  (bound, kept["graph.attention"] / plain["graph.attention"],
                   kept["graph.attention_grad"] /
                   plain["graph.attention_grad"]))

    # The offloaded plan: its tier moves are copies (copy_seconds), a
    # blocking wait on a copy stream costs event_wait, and each byte a
    # copy stream moves takes copy_compute_cost of the compute stream.
    off, offSpans = predict(args.sim, args.offload, BASE, work, "off")
    moves = offSpans["sched.reload"] + offSpans["sched.offload"]
    _, dearer = predict(args.sim, args.offload, changed(
        {"copy_seconds": [1e3, 3e-10, 1e7, 3e-10]}), work, "dearer")
    print("moves at copy_seconds x3: %.2f times" %
          ((dearer["sched.reload"] + dearer["sched.offload"]) / moves))
    waited, _ = predict(args.sim, args.offload, changed({"event_wait": 1e-4}), work,
                        "wait")
    print("event_wait 100 us: step %s" %
          ("longer" if waited["step_s"] > off["step_s"] + 1e-4 else
           "NOT longer (%g -> %g)" % (off["step_s"], waited["step_s"])))
    shared, _ = predict(args.sim, args.offload, changed({"copy_compute_cost": 1e-9}),
                        work, "shared")
    added = shared["critical_path"]["compute_s"] + shared[
        "critical_path"]["other_s"] - off["critical_path"]["compute_s"] - off[
            "critical_path"]["other_s"]
    print("copy_compute_cost 1 ns/byte: step %s" %
          ("longer" if shared["step_s"] > off["step_s"] and added > 0 else
           "NOT longer (%g -> %g)" % (off["step_s"], shared["step_s"])))
    # A CUDA calibration (device "cuda"): a tier move crosses PCIe, whatever
    # copy_seconds says.
    cuda = dict(BASE, device="cuda")
    _, onCuda = predict(args.sim, args.offload, cuda, work, "cuda-off")
    _, onCudaDearer = predict(args.sim, args.offload, dict(
        cuda, copy_seconds=[1e3, 3e-10, 1e7, 3e-10]), work, "cuda-dearer")
    _, onCudaPcie = predict(args.sim, args.offload, dict(
        cuda, pcie_bandwidth=5e9), work, "cuda-pcie")
    cudaMoves = onCuda["sched.reload"] + onCuda["sched.offload"]
    print("moves on a cuda file at copy_seconds x3: %.2f times; at half the "
          "pcie bandwidth: %.2f times" %
          ((onCudaDearer["sched.reload"] + onCudaDearer["sched.offload"]) /
           cudaMoves,
           (onCudaPcie["sched.reload"] + onCudaPcie["sched.offload"]) /
           cudaMoves))
    # A GPU calibration's narrow tables: the bf16 plan's bf16 products take
    # "bf16.gemm_rate" (a quarter of the f32 rate: 4 times the time), the
    # f32 plan's keep the f32 table, and an f16 plan takes the bf16 tables
    # where it has no f16 ones.
    if args.bf16:
        slow = dict(cuda, **{"bf16.gemm_rate": [8, 2.5e9, 1024, 2.5e10],
                             "bf16.op.graph.cast": [1e3, 5e-9, 1e7, 5e-9]})
        for label, art in (("bf16", args.bf16), ("fp32", args.plain),
                           ("fp16", args.fp16)):
            if not art:
                continue
            _, before = predict(args.sim, art, cuda, work, label + "-f32t")
            _, after = predict(args.sim, art, slow, work, label + "-bf16t")
            print("%s plan with bf16 tables: products %.2f times" %
                  (label, after["graph.linear"] / before["graph.linear"]))
    # A fused kernel costs its bytes and its program's instructions, the
    # transcendental ones (GELU here) at their own table where the file has
    # one; else the per-element table (above).
    if args.bf16:
        tiny = [1e3, 1e-20, 1e7, 1e-20]
        fused = dict(BASE, **{
            "op.graph.fused_elementwise.byte": [1e3, 1e-11, 1e7, 1e-11],
            "op.graph.fused_elementwise.instruction": [1e3, 1e-10, 1e7, 1e-10]})
        _, f1 = predict(args.sim, args.bf16, fused, work, "fused")
        for key, label in ((".instruction", "instruction"), (".byte", "byte")):
            other = ".byte" if key == ".instruction" else ".instruction"
            one = dict(fused, **{"op.graph.fused_elementwise" + other: tiny})
            two = dict(one, **{"op.graph.fused_elementwise" + key:
                               [v * 2 if i % 2 else v for i, v in enumerate(
                                   fused["op.graph.fused_elementwise" + key])]})
            _, a = predict(args.sim, args.bf16, one, work, "fused-" + label)
            _, b = predict(args.sim, args.bf16, two, work, "fused2-" + label)
            print("fused at twice the %s cost (the other negligible): %.2f "
                  "times" % (label, b["graph.fused_elementwise"] /
                             a["graph.fused_elementwise"]))
        same = dict(fused, **{"op.graph.fused_elementwise.transcendental":
                              [1e3, 1e-10, 1e7, 1e-10]})
        dear = dict(fused, **{"op.graph.fused_elementwise.transcendental":
                              [1e3, 1e-9, 1e7, 1e-9]})
        _, f2 = predict(args.sim, args.bf16, same, work, "fused-same")
        _, f3 = predict(args.sim, args.bf16, dear, work, "fused-dear")
        _, f0 = predict(args.sim, args.bf16, BASE, work, "fused-none")
        print("fused: transcendental at the instruction's cost %.2f times "
              "without the table; at 10x dearer: %s; without the fused "
              "tables the per-element one: %s" % (
                  f2["graph.fused_elementwise"] / f1["graph.fused_elementwise"],
                  f3["graph.fused_elementwise"] > f1["graph.fused_elementwise"],
                  abs(f0["graph.fused_elementwise"] -
                      f1["graph.fused_elementwise"]) > 1e-9))
    if args.sharded:
        # A collective on a side stream takes the compute stream's CPU: its
        # ring bytes at gather_compute_cost or reduce_compute_cost, and
        # poll_compute_cost for each call (half of it on 2 ranks: one of
        # the two waits).
        two = dict(BASE, gpus_per_node=2)
        base, _ = predict(args.sim, args.sharded, two, work, "sharded")
        for key in ("gather_compute_cost", "reduce_compute_cost"):
            dear, _ = predict(args.sim, args.sharded, dict(two, **{key: 1e-9}),
                              work, key)
            print("%s 1 ns/byte: step %s" % (key, "longer" if dear["step_s"] >
                                             base["step_s"] + 1e-6 else
                                             "NOT longer"))
        polled = [predict(args.sim, args.sharded,
                          dict(two, poll_compute_cost=p), work, "poll%d" % i)[0]
                  for i, p in enumerate((1e-4, 2e-4))]
        added = [p["step_s"] - base["step_s"] for p in polled]
        print("poll_compute_cost 100 us: step longer by %d half-calls; "
              "200 us: %.3f times that" % (round(added[0] / 5e-5),
                                           added[1] / added[0]))
        # More ranks than cores: each collective waits for its members to be
        # scheduled (collective_sync, over the host's W ranks; a group of g
        # (g - 1) / (W - 1) of it). The 2-rank plan's collectives span both
        # ranks: on gpus_per_node 2 the whole figure, on 5 a quarter.
        synced = [predict(args.sim, args.sharded,
                          dict(two, gpus_per_node=w, collective_sync=1e-3),
                          work, "sync%d" % w)[0] for w in (2, 5)]
        base5, _ = predict(args.sim, args.sharded, dict(two, gpus_per_node=5),
                           work, "sharded5")
        whole = synced[0]["step_s"] - base["step_s"]
        quarter = synced[1]["step_s"] - base5["step_s"]
        print("collective_sync 1 ms: step longer by %.1f ms; a group of 2 of "
              "5 ranks: %.2f times that" % (1e3 * whole, quarter / whole))
        # Measured by group size (collective_sync_group), the table wins: 2
        # ms for a group of 2 predicts what collective_sync 2 ms does on 2
        # ranks, whatever collective_sync says.
        table = predict(args.sim, args.sharded,
                        dict(two, collective_sync=1e-3,
                             collective_sync_group=[2, 2e-3, 4, 1e-3]),
                        work, "synctable")[0]
        scalar = predict(args.sim, args.sharded,
                         dict(two, collective_sync=2e-3), work, "sync2ms")[0]
        print("collective_sync_group 2 ms at 2 ranks: the step of "
              "collective_sync 2 ms: %s" % (table["step_s"] == scalar["step_s"]
                                             and table["step_s"] >
                                             synced[0]["step_s"]))
        # A link's bandwidth by the bytes a ring step moves
        # (*_bandwidth_by_bytes), by collective: a table at half the
        # scalar figure doubles every collective's time (latency 0); a
        # reduce-scatter table of its own at a quarter makes those 4 times
        # as long and leaves the all-gathers at the gather table's.
        def collectives(cluster, name):
            spans = predict(args.sim, args.sharded, cluster, work, name)[1]
            return [spans["sched.all_gather"], spans["sched.reduce_scatter"]]
        scalar = collectives(two, "links")
        half = collectives(dict(two, intra_bandwidth_by_bytes=[1, 5e9, 1e9, 5e9]),
                           "linkhalf")
        own = collectives(dict(two, intra_bandwidth_by_bytes=[1, 5e9, 1e9, 5e9],
                               intra_reduce_bandwidth_by_bytes=[1, 2.5e9,
                                                                1e9, 2.5e9]),
                          "linkown")
        print("link tables at half the bandwidth: all-gathers %.2f, "
              "reduce-scatters %.2f times; a reduce-scatter table at a "
              "quarter: all-gathers %.2f, reduce-scatters %.2f times" %
              (half[0] / scalar[0], half[1] / scalar[1], own[0] / scalar[0],
               own[1] / scalar[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
