#!/usr/bin/env python3
"""Pipeline stages under mpirun: each configuration trains 20 steps on one
rank per stage and must match the one-rank run on the same global batch
(--accum micro-batches) within --rtol, loss and gradient norm at every step.

    tests/pipeline/check_pipeline.py --bin build/bin --model gpt_deep \\
        --stages 4 --schedule zb --accum 4

With one rank per stage it also checks the bytes sent between stages per
step against 2(p-1)*b*s*h elements per micro-batch (each cut's bytes from
--emit=pipeline, both ways) plus the shared parameters' gradient sums and
the norm's chain.

`--matrix` runs every stage count in {2, 4, 8}, both schedules, accumulation
1 and 4, GPT and BERT. `--resume` instead saves at step 10, resumes and must reproduce the
uninterrupted run bit for bit, and --consolidate must reassemble every
parameter from the stages' ranks, within rounding of the one-rank run.
`--stall` instead stops the last stage's rank at step
2 (STRATA_TEST_STALL_RANK): the others must exit within --timeout (5 s)
plus a margin, with a line naming the stage, micro-batch and rank they
waited for.
"""
import re
import time
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (
            proc.returncode, " ".join(cmd), proc.stdout[-2000:],
            proc.stderr[-2000:]))
    return proc


def log(path):
    return [json.loads(line) for line in open(path)]


def check(args, work, model, stages, schedule, accum, reference_cache,
          partition=1, pipelines=1, hierarchical="off"):
    """p stages of `partition` ranks, `pipelines` pipelines: the reference
    is one rank with accumulation accum * partition * pipelines (the lanes'
    micro-batches in the sampling rule's order)."""
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    onnx = os.path.join(ROOT, "models", model + ".onnx")
    lanes = partition * pipelines
    world = stages * lanes
    key = (model, accum * lanes)
    if key not in reference_cache:
        art = os.path.join(work, "%s-a%d-one.strata" % key)
        run([compile_, onnx, "-o", art, "--accum", str(accum * lanes),
             "--steps", str(args.steps), "--dtype", args.dtype])
        path = os.path.join(work, "%s-a%d-one.jsonl" % key)
        run([strata_run, art, "--quiet", "--log", path])
        reference_cache[key] = log(path)
    name = "%s.p%d.t%d.d%d.%s.accum%d%s" % (
        model, stages, partition, pipelines, schedule, accum,
        ".hier" if hierarchical == "on" else "")
    art = os.path.join(work, name + ".strata")
    run([compile_, onnx, "-o", art, "--pipeline-stages", str(stages),
         "--pipeline-schedule", schedule, "--accum", str(accum),
         "--steps", str(args.steps), "--world", str(world),
         "--partition-group", str(partition), "--gpus-per-node",
         str(args.gpus_per_node), "--hierarchical", hierarchical,
         "--dtype", args.dtype])
    path = os.path.join(work, name + ".jsonl")
    run(MPIRUN + ["-np", str(world), strata_run, art, "--quiet", "--log",
                  path, "--timeout", "120", "--check-replicas"])
    ref, got = reference_cache[key], log(path)
    if len(got) != len(ref):
        print("%s: %d steps logged, expected %d" % (name, len(got), len(ref)))
        return False
    worst = {"loss": 0.0, "grad_norm": 0.0}
    for a, b in zip(ref, got):
        for field in worst:
            worst[field] = max(worst[field],
                               abs(a[field] - b[field]) / abs(a[field]))
    ok = all(v <= args.rtol for v in worst.values())
    # The bytes between stages (one rank per stage): per micro-batch each
    # cut's activations forward and their gradients back, 2(p-1)*b*s*h
    # elements for a transformer (the --emit=pipeline report gives each
    # cut's bytes); per step each shared parameter's gradient sum both ways
    # between its two stages, and the squared norm up and down the chain.
    if lanes == 1 and args.dtype == "fp32":
        report = run([compile_, onnx, "--emit=pipeline", "--pipeline-stages",
                      str(stages), "--accum", str(accum)]).stdout
        cuts = sum(int(b) for b in re.findall(
            r"stage \d+ -> \d+: \d+ tensors?, (\d+) bytes", report))
        summary = run([compile_, onnx, "--emit=summary"]).stdout
        shared = 0
        for param in re.findall(r"^  (\S+): stages", report, re.M):
            shape = re.search(re.escape(param) + r"\s+tensor<([0-9x]+)xf32>",
                              summary).group(1)
            elements = 1
            for d in shape.split("x"):
                elements *= int(d)
            shared += 2 * 4 * elements
        expected = accum * 2 * cuts + shared + 2 * (stages - 1) * 4
        measured = got[-1]["stage_bytes"]
        if measured != expected:
            ok = False
        print("%s: bytes between stages per step %d, expected %d "
              "(%d x 2 x %d per micro-batch + %d shared + %d norm)" % (
                  name, measured, expected, accum, cuts, shared,
                  2 * (stages - 1) * 4))
    # Each rank allocates its own stage's tensors only: its planned device
    # bytes are strata-inspect's planned peak of its stage, and with
    # several stages below the whole plan's.
    inspect = run([os.path.join(args.bin, "strata-inspect"), art]).stdout
    per_stage = [int(b) for b in re.findall(
        r"planned device peak (\d+) bytes", inspect)]
    whole = int(re.search(r"planned peak (\d+) bytes", inspect).group(1))
    held = got[-1]["device_bytes_by_rank"]
    expected_held = [per_stage[(r // partition) % stages] for r in range(world)]
    if len(per_stage) != stages or held != expected_held or \
            max(per_stage) >= whole:
        ok = False
    print("%s: device bytes by rank %s, strata-inspect's stages %s, the "
          "whole plan %d" % (name, held, per_stage, whole))
    print("%s: %s, worst relative difference over %d steps: loss %.2e, "
          "grad norm %.2e (first loss %.9g, last %.9g)" % (
              name, "ok" if ok else "FAIL", len(ref), worst["loss"],
              worst["grad_norm"], got[0]["loss"], got[-1]["loss"]))
    return ok


def compile_stages(args, work, name, steps):
    """The model on --stages stages, one rank each: the artifact's path."""
    art = os.path.join(work, name + ".strata")
    run([os.path.join(args.bin, "strata-compile"),
         os.path.join(ROOT, "models", args.model + ".onnx"), "-o", art,
         "--pipeline-stages", str(args.stages), "--accum", str(args.accum),
         "--steps", str(steps)])
    return art


def stall(args, work):
    strata_run = os.path.join(args.bin, "strata-run")
    art = compile_stages(args, work, "stall", 10)
    env = dict(os.environ, STRATA_TEST_STALL_RANK=str(args.stages - 1))
    start = time.monotonic()
    proc = subprocess.run(MPIRUN + ["-np", str(args.stages), strata_run, art,
                                    "--quiet", "--timeout", "5"],
                          capture_output=True, text=True, env=env, timeout=120)
    seconds = time.monotonic() - start
    line = re.search(r"strata-run: error: rank \d+ \(stage \d+\): waited 5 s "
                     r"for receive of value \d+ of micro-batch \d+ from stage "
                     r"\d+ \(rank \d+\); aborting every rank", proc.stderr)
    ok = proc.returncode != 0 and line is not None and seconds < 60
    print("stall of rank %d: %s after %.1f s (exit %d): %s" % (
        args.stages - 1, "ok" if ok else "FAIL", seconds, proc.returncode,
        line.group(0) if line else proc.stderr[-500:]))
    return ok


def resume(args, work):
    strata_run = os.path.join(args.bin, "strata-run")
    art = compile_stages(args, work, "resume", 20)
    mpi = MPIRUN + ["-np", str(args.stages), strata_run, art, "--quiet"]
    full, part = os.path.join(work, "full.jsonl"), os.path.join(work, "part.jsonl")
    ckpt = os.path.join(work, "ckpt")
    run(mpi + ["--log", full])
    run(mpi + ["--log", part, "--steps", "10", "--save-every", "10",
               "--checkpoint-dir", ckpt])
    run(mpi + ["--log", part, "--checkpoint-dir", ckpt, "--resume",
               "--save-every", "10"])
    a = [s["loss"] for s in log(full)]
    b = [s["loss"] for s in log(part)]
    # --consolidate reassembles the model from the stages' ranks (each
    # holds its own stage's parameters): every parameter, equal to the
    # bytes its stage's rank saved (a tied parameter: every holder's copy
    # the same), and trained: within 1% of its movement over the run from
    # the one-rank run of the same global batch (rounding differs: a
    # key bias's gradient is zero but for rounding, and AdamW turns that
    # noise into steps of lr either way).
    whole = os.path.join(work, "whole")
    run([strata_run, art, "--checkpoint-dir", ckpt, "--consolidate", whole,
         "--export-onnx", os.path.join(work, "whole.onnx")])
    mine = weights(whole)
    step = os.path.join(ckpt, open(os.path.join(ckpt, "latest")).read().strip())
    held = [weights(os.path.join(step, "rank-%05d" % r))
            for r in range(args.stages)]
    copies, unequal = 0, []
    for n, (_, values) in mine.items():
        for r, rank in enumerate(held):
            if n in rank:
                copies += 1
                if rank[n][1] != values:
                    unequal.append("%s on rank %d" % (n, r))
    one = os.path.join(work, "one.strata")
    run([os.path.join(args.bin, "strata-compile"),
         os.path.join(ROOT, "models", args.model + ".onnx"), "-o", one,
         "--accum", str(args.accum), "--steps", "20"])
    trained, initial = os.path.join(work, "one-ckpt"), os.path.join(work, "init")
    run([strata_run, one, "--quiet", "--save-every", "20",
         "--checkpoint-dir", trained])
    # --lr must be positive: 1e-30 leaves every weight as it started.
    run([strata_run, one, "--quiet", "--steps", "1", "--lr", "1e-30",
         "--save-every", "1", "--checkpoint-dir", initial])
    theirs = weights(latest(trained))
    start = weights(latest(initial))
    params = [n for n, (kind, _) in theirs.items() if kind == 2]  # PARAMETER
    worst, missing = 0.0, [n for n in params if n not in mine]
    for n in params:
        if n in mine:
            x, y, z = mine[n][1], theirs[n][1], start[n][1]
            moved = max(abs(u - v) for u, v in zip(y, z))
            diff = max(abs(u - v) for u, v in zip(x, y)) / max(moved, 1e-30)
            worst = max(worst, diff)
    consolidated = (not missing and not unequal and len(mine) == len(params)
                    and worst <= 0.01)
    ok = a == b and len(a) == 20 and consolidated
    print("resume at step 10 of 20 on %d stages: %s (losses %s; "
          "--consolidate: %d of %d parameters from %d copies on the stages' "
          "ranks%s, worst difference from one rank %.2e of the parameter's "
          "movement%s)" % (
              args.stages, "ok" if ok else "FAIL",
              "bit-identical" if a == b else "differ: %s / %s" % (a, b),
              len(mine), len(params), copies,
              ", differing: " + ", ".join(unequal) if unequal else
              " all equal", worst,
              "; missing " + ", ".join(missing) if missing else ""))
    return ok


def latest(ckpt):
    return os.path.join(ckpt, open(os.path.join(ckpt, "latest")).read().strip())


def weights(folder):
    """A checkpoint folder's tensors: name -> (kind, f32 values)."""
    import struct
    data = open(os.path.join(folder, "state.bin"), "rb").read()
    out = {}
    for line in open(os.path.join(folder, "index.json")):
        if '"name"' not in line:
            continue
        e = json.loads(line.strip().rstrip(","))
        if e["dtype"] != "f32":
            continue
        raw = data[e["offset"]:e["offset"] + e["bytes"]]
        out[e["name"]] = (e["kind"], struct.unpack("<%df" % (len(raw) // 4), raw))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--model", default="gpt_deep")
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--schedule", default="1f1b")
    p.add_argument("--accum", type=int, default=4)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rtol", type=float, default=1e-6)
    p.add_argument("--partition-group", type=int, default=1)
    p.add_argument("--pipelines", type=int, default=1)
    p.add_argument("--hierarchical", default="off")
    p.add_argument("--gpus-per-node", type=int, default=2)
    p.add_argument("--dtype", default="fp32",
                   help="bf16: compare with --rtol at bf16's noise")
    p.add_argument("--matrix", action="store_true")
    p.add_argument("--topologies", action="store_true",
                   help="the issue's (p, t, d) on 8 ranks")
    p.add_argument("--stall", action="store_true")
    p.add_argument("--resume", action="store_true")
    args = p.parse_args()
    if args.resume:
        with tempfile.TemporaryDirectory(prefix="pipeline-") as work:
            sys.exit(0 if resume(args, work) else 1)
    if args.stall:
        with tempfile.TemporaryDirectory(prefix="pipeline-") as work:
            sys.exit(0 if stall(args, work) else 1)
    configs = [(args.model, args.stages, args.schedule, args.accum,
                args.partition_group, args.pipelines, args.hierarchical)]
    if args.matrix:
        configs = [(m, s, sch, a, 1, 1, "off")
                   for m in ("gpt_deep", "bert_deep")
                   for s in (2, 4, 8) for sch in ("1f1b", "zb")
                   for a in (1, 4)]
    if args.topologies:
        # (p, t, d) on 8 ranks, 2 per node; hierarchical where t > 2.
        shapes = [(2, 2, 2, "off"), (4, 1, 2, "off"), (2, 4, 1, "off"),
                  (2, 4, 1, "on"), (8, 1, 1, "off"), (4, 2, 1, "off")]
        configs = [(m, p_, sch, a, t, d, h)
                   for m in ("gpt_deep", "bert_deep")
                   for (p_, t, d, h) in shapes for sch in ("1f1b", "zb")
                   for a in (1, 4)]
    cache = {}
    with tempfile.TemporaryDirectory(prefix="pipeline-") as work:
        results = [check(args, work, *c[:4], cache, *c[4:]) for c in configs]
    if not all(results):
        sys.exit(1)


if __name__ == "__main__":
    main()
