#!/usr/bin/env python3
"""Pipeline stages under mpirun: each configuration trains 20 steps on one
rank per stage and must match the one-rank run on the same global batch
(--accum micro-batches) within --rtol, loss and gradient norm at every step.

    tests/pipeline/check_pipeline.py --bin build/bin --model gpt_deep \\
        --stages 4 --schedule zb --accum 4

With one rank per stage it also checks the bytes sent between stages per
step against 2(p-1)*b*s*h elements per micro-batch (each cut's bytes from
--emit=pipeline, both ways) plus the shared parameters' gradient sums and
the norm's chain. After the last step every copy of a tied weight (and
of its optimizer states) must equal the copy at the same position of the
other stages of its pipeline, bit for bit.

`--recompute layers` (or always) compiles the stages with it: the run must
still match the one-rank reference, and every stage's activation arena be
no larger (and all together smaller) than without it.

`--matrix` runs every stage count in {2, 4, 8}, both schedules, accumulation
1 and 4, GPT and BERT. `--resume` instead saves at step 10, resumes and must reproduce the
uninterrupted run bit for bit, and --consolidate must reassemble every
parameter from the stages' ranks, within rounding of the one-rank run.
`--bytes` instead checks the bytes a step moves inside and between the
stages on 8 ranks, 2 a node (1f1b; with --topologies (p, t, d) in
{(2,2,2), (4,1,2), (2,4,1), (4,2,1)} x accumulation {1, 4}): the step log's
counters per collective and link class equal the ring formulas on each
stage's padded parameter, gathered and gradient bytes (read from
--emit=distributed) and strata-inspect's prediction, and the thesis's
figures (2(t-1)M/t all-gather and (t-1)M/t reduce-scatter per micro-batch,
2(d-1)M/(dpt) all-reduce per step, 2(p-1)bsh elements between stages per
micro-batch) differ from them by what is printed, each term accounted for.
`--trace` instead runs --stages stages (one rank each) under both schedules
with strata-run --trace: each rank's schedule track must hold m F, m B (and
with zb m W) spans one after another in its program's order (strata-inspect
reads it from the plan; for 1f1b it is also the textbook order), and idle
spans; tools/merge-traces.py must give one process row per stage.
`--stall` instead stops the last stage's rank at step
2 (STRATA_TEST_STALL_RANK): the others must exit within --timeout (5 s)
plus a margin, with a line naming the stage, micro-batch and rank they
waited for; then kills a middle stage's rank there (STRATA_TEST_KILL_RANK,
SIGKILL): the job must end within the same bound, the launcher naming
the rank.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

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
    flags = ["--pipeline-stages", str(stages),
             "--pipeline-schedule", schedule, "--accum", str(accum),
             "--steps", str(args.steps), "--world", str(world),
             "--partition-group", str(partition), "--gpus-per-node",
             str(args.gpus_per_node), "--hierarchical", hierarchical,
             "--dtype", args.dtype]
    run([compile_, onnx, "-o", art] + flags +
        ["--recompute", args.recompute])
    arenas_ok = True
    if args.recompute != "none":
        # The stages' activation arenas against the same plan without
        # recomputation: none larger, together smaller.
        plain = os.path.join(work, name + ".plain.strata")
        run([compile_, onnx, "-o", plain] + flags)
        inspect = os.path.join(args.bin, "strata-inspect")

        def arenas(artifact):
            return [int(b) for b in re.findall(
                r"activation arena (\d+)", run([inspect, artifact]).stdout)]
        got_arenas, plain_arenas = arenas(art), arenas(plain)
        arenas_ok = (len(got_arenas) == len(plain_arenas) == stages and
                     all(a <= b for a, b in zip(got_arenas, plain_arenas)) and
                     sum(got_arenas) < sum(plain_arenas))
        print("%s: activation arenas by stage with --recompute %s %s, "
              "without %s%s" % (name, args.recompute, got_arenas,
                                plain_arenas, "" if arenas_ok else
                                " (FAILED: not smaller)"))
    path = os.path.join(work, name + ".jsonl")
    ckpt = os.path.join(work, name + ".ckpt")
    run(MPIRUN + ["-np", str(world), strata_run, art, "--quiet", "--log",
                  path, "--timeout", "120", "--check-replicas",
                  "--save-every", str(args.steps), "--checkpoint-dir", ckpt])
    ref, got = reference_cache[key], log(path)
    if len(got) != len(ref):
        print("%s: %d steps logged, expected %d" % (name, len(got), len(ref)))
        return False
    worst = {"loss": 0.0, "grad_norm": 0.0}
    for a, b in zip(ref, got):
        for field in worst:
            worst[field] = max(worst[field],
                               abs(a[field] - b[field]) / abs(a[field]))
    ok = arenas_ok and all(v <= args.rtol for v in worst.values())
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
    # A parameter on several stages (a tied weight): after the last step
    # each rank's copy and its optimizer states equal, bit for bit, those
    # of the rank at the same position of each other stage of its pipeline.
    saved = [weights(os.path.join(latest(ckpt), "rank-%05d" % r))
             for r in range(world)]
    copies, unequal = 0, []
    for r in range(world):
        group = r // (stages * partition) * stages * partition
        for q in range(r + partition, group + stages * partition, partition):
            tied = [n for n in saved[r].keys() & saved[q].keys()
                    if saved[r][n][0] == 2]  # PARAMETER
            for n in sorted(saved[r].keys() & saved[q].keys()):
                if n in tied or n.split(":", 1)[-1] in tied and \
                        not n.startswith("grad:"):
                    copies += 1
                    if saved[r][n][1] != saved[q][n][1]:
                        unequal.append("%s on ranks %d and %d" % (n, r, q))
    if unequal:
        ok = False
    print("%s: the tied weights' copies on the stages: %d pairs%s" % (
        name, copies, ", differing: " + ", ".join(unequal) if unequal
        else " bit-identical"))
    print("%s: %s, worst relative difference over %d steps: loss %.2e, "
          "grad norm %.2e (first loss %.9g, last %.9g)" % (
              name, "ok" if ok else "FAIL", len(ref), worst["loss"],
              worst["grad_norm"], got[0]["loss"], got[-1]["loss"]))
    return ok


WIDTH = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "i1": 1}
ARG = re.compile(r"%arg(\d+): tensor<((?:\d+x)*)(\w+)> \{([^}]*)\}")


def function(ir, name):
    """The text of func.func @name: (its signature line, its body)."""
    head, rest = ir.split("func.func @" + name + "(", 1)
    signature, body = rest.split("\n", 1)
    return signature, body.split("\n  }\n", 1)[0]


def arguments(signature):
    """{index: (name, role, bytes as declared, bytes of the whole value)}
    of a function's arguments (a shard's whole value: graph.full_shape)."""
    out = {}
    for m in ARG.finditer(signature):
        elements = 1
        for d in m.group(2).split("x")[:-1]:
            elements *= int(d)
        whole = elements
        full = re.search(r"graph.full_shape = array<i64: ([0-9, ]+)>", m.group(4))
        if full:
            whole = 1
            for d in full.group(1).split(","):
                whole *= int(d)
        name = re.search(r'graph.name = "([^"]*)"', m.group(4)).group(1)
        role = re.search(r"graph.role = #graph<role (\w+)>", m.group(4)).group(1)
        width = WIDTH[m.group(3)]
        out[int(m.group(1))] = (name, role, elements * width, whole * width)
    return out


def ring_link(members, rank, per_node):
    """The link `rank` receives over in a ring of `members` (group order):
    0 intra-node, 1 inter-node; None alone."""
    if len(members) < 2:
        return None
    before = members[members.index(rank) - 1]
    return 0 if before // per_node == rank // per_node else 1


def stage_bytes_formula(args, p, t, d, m, G, R, T, tied, cuts):
    """Bytes per step summed over the n = p t d ranks, per collective as
    [intra, inter], from the padded bytes each stage's step program gathers
    per micro-batch G[s], its gradient bytes R[s] and, of them, the tied
    weights' T[s]; and the bytes sent between stages (tied: the tied
    weights' (whole, padded) bytes; cuts: the bytes crossing all the cuts
    one way per micro-batch)."""
    n, k = p * t * d, args.gpus_per_node
    out = {"all_gather": [0, 0], "reduce_scatter": [0, 0], "all_reduce": [0, 0]}
    for r in range(n):
        s = r // t % p
        g, j = r // t, r % (p * t)
        partition = ring_link(list(range(g * t, g * t + t)), r, k)
        replication = ring_link(list(range(j, n, p * t)), r, k)
        if partition is not None:
            # Per micro-batch: (t-1)/t of what is gathered, of the
            # gradients reduce-scattered, but for a tied weight's: each of
            # its stages reduce-scatters its own sum once per step; per
            # step the squared norm (one f32) all-reduced over the stage
            # group.
            out["all_gather"][partition] += m * (t - 1) * G[s] // t
            out["reduce_scatter"][partition] += (
                (m * (R[s] - T[s]) + T[s]) * (t - 1) // t)
            out["all_reduce"][partition] += 2 * (t - 1) * 4 / t
        if replication is not None:
            # Per step 2(d-1)/d of the rank's gradient shard.
            out["all_reduce"][replication] += 2 * (d - 1) * R[s] / (d * t)
    # Between stages, per lane (t d of them): each cut's activations and
    # their gradients every micro-batch, 2(p-1) b s h elements; the tied
    # weight (on the first and last stage); the norm up and down the chain.
    lanes = t * d
    if t > 1:
        # Each of its stages sends the shard of its reduce-scattered sum
        # to the other once per step.
        tied_p2p = 2 * tied[1] // t
    else:
        # Each stage's sum is sent to the other once per step.
        tied_p2p = 2 * tied[0]
    p2p = lanes * (m * 2 * cuts + tied_p2p + 2 * (p - 1) * 4)
    return out, p2p


def check_bytes(args, work, stages, partition, pipelines, accum):
    """The bytes a step moves, measured, against the thesis's formulas
    (each difference accounted for) and strata-inspect's prediction."""
    p, t, d, m = stages, partition, pipelines, accum
    n = p * t * d
    compile_ = os.path.join(args.bin, "strata-compile")
    onnx = os.path.join(ROOT, "models", args.model + ".onnx")
    name = "%s.p%d.t%d.d%d.1f1b.accum%d" % (args.model, p, t, d, m)
    flags = ["--pipeline-stages", str(p), "--pipeline-schedule", "1f1b",
             "--accum", str(m), "--world", str(n), "--partition-group", str(t),
             "--gpus-per-node", str(args.gpus_per_node), "--hierarchical", "off"]
    art = os.path.join(work, name + ".strata")
    run([compile_, onnx, "-o", art, "--steps", str(args.steps)] + flags)
    ir = run([compile_, onnx, "--emit=distributed"] + flags).stdout
    report = run([compile_, onnx, "--emit=pipeline", "--pipeline-stages",
                  str(p), "--accum", str(m)]).stdout
    path = os.path.join(work, name + ".jsonl")
    run(MPIRUN + ["-np", str(n), os.path.join(args.bin, "strata-run"), art,
                  "--quiet", "--log", path, "--timeout", "120"])
    steps = log(path)
    inspect = json.loads(run([os.path.join(args.bin, "strata-inspect"), art,
                              "--json"]).stdout)

    # Per stage, from the stage programs' arguments: M, the parameters'
    # bytes zero-padded to t shards; G, what the step program gathers per
    # micro-batch (each parameter once in forward, again in backward when
    # the backward reads it); R, the gradients the stage holds.
    M, G, R, once, model, whole_bytes, grads = [], [], [], [], {}, {}, []
    unpadded = [int(b) for b in re.findall(
        r"^\s+\d+  .{40} +\d+ +(\d+) ", report, re.M)]
    for s in range(p):
        signature, body = function(ir, "pipeline_step_%d" % s)
        params = {i: a for i, a in arguments(signature).items()
                  if a[1] == "parameter"}
        M.append(sum(a[2] * t for a in params.values()))
        gathers = {i: 0 for i in params}
        for line in body.splitlines():
            g = re.search(r"sched\.all_gather \w+ ([^:{]*)", line)
            if g:
                for a in re.findall(r"%arg(\d+)", g.group(1)):
                    gathers[int(a)] += 1
        if t > 1:
            assert all(c % m == 0 for c in gathers.values()), gathers
        G.append(sum(params[i][2] * t * c // m for i, c in gathers.items()))
        once.append(sorted(params[i][0] for i, c in gathers.items()
                           if c == m))
        for a in params.values():
            model[a[0]] = a[2] * t
            whole_bytes[a[0]] = a[3]
        signature, _ = function(ir, "optimizer_step_%d" % s)
        gradients = [a for a in arguments(signature).values()
                     if a[1] == "gradient"]
        R.append(sum(a[2] * t for a in gradients))
        grads.append(set(a[0] for a in gradients))
    shared = re.findall(r"^  (\S+): stages", report, re.M)
    tied = (sum(whole_bytes[q] for q in shared), sum(model[q] for q in shared))
    # The tied weights' gradient bytes (padded) each stage holds.
    T = [sum(model[q] for q in shared if "grad:" + q in grads[s])
         for s in range(p)]
    cuts = sum(int(b) for b in re.findall(
        r"stage \d+ -> \d+: \d+ tensors?, (\d+) bytes", report))
    formula, p2p = stage_bytes_formula(args, p, t, d, m, G, R, T, tied, cuts)

    ok = True
    for i, step in enumerate(steps):
        for kind, (intra, inter) in formula.items():
            got = step["bytes"][kind]
            if abs(got[0] - intra) > 0.5 or abs(got[1] - inter) > 0.5:
                print("%s: step %d %s measured %s, the formula %s" % (
                    name, i + 1, kind, got, [intra, inter]))
                ok = False
        if step["stage_bytes"] != p2p:
            print("%s: step %d stage bytes measured %d, the formula %d" % (
                name, i + 1, step["stage_bytes"], p2p))
            ok = False
    for kind, predicted in inspect["traffic"].items():
        if any(abs(a - b) > 0.5 for a, b in zip(predicted, steps[0]["bytes"][kind])):
            print("%s: strata-inspect predicts %s %s, measured %s" % (
                name, kind, predicted, steps[0]["bytes"][kind]))
            ok = False
    sent = sum(st["sent_bytes"] for st in inspect["pipeline"]["stages"]) * t * d
    if sent != steps[0]["stage_bytes"]:
        print("%s: strata-inspect predicts %d bytes between stages, measured "
              "%d" % (name, sent, steps[0]["stage_bytes"]))
        ok = False

    # The thesis's figures (per rank: 2(t-1)M/t all-gather and (t-1)M/t
    # reduce-scatter per micro-batch, 2(d-1)M/(d p t) all-reduce per step
    # with M the whole model's bytes; 2(p-1) b s h elements per micro-batch
    # between stages), summed over the ranks, and what separates them from
    # the measurement.
    lanes = t * d
    whole = sum(model.values())
    thesis_ag = sum(d * m * 2 * (t - 1) * M[s] for s in range(p))
    thesis_rs = sum(d * m * (t - 1) * M[s] for s in range(p))
    thesis_ar = 2 * (d - 1) * whole if d > 1 else 0
    thesis_p2p = lanes * m * 2 * cuts
    total = lambda kind: sum(steps[0]["bytes"][kind])
    regather = sum(d * m * (t - 1) * (2 * M[s] - G[s]) for s in range(p))
    not_held = sum(d * m * (t - 1) * (M[s] - R[s]) for s in range(p))
    tied_once = sum(d * (m - 1) * (t - 1) * T[s] for s in range(p))
    twice = 2 * (d - 1) * (sum(R) - whole) if d > 1 else 0
    norm = n * 2 * (t - 1) * 4 / t
    print("%s: %s; per step, summed over the %d ranks, [intra-node, "
          "inter-node] bytes measured = the formula = strata-inspect: %s" % (
              name, "ok" if ok else "FAIL", n,
              ", ".join("%s %s" % (k, [int(v) for v in steps[0]["bytes"][k]])
                        for k in ("all_gather", "reduce_scatter",
                                  "all_reduce"))))
    print("  M per stage (padded to %d shards) %s bytes; padding %s; whole "
          "model %d" % (t, M, [M[s] - unpadded[s] for s in range(p)], whole))
    print("  all_gather     measured %10.0f  thesis %10.0f  - %d the backward "
          "does not gather again (%s)" % (
              total("all_gather"), thesis_ag, regather,
              "; ".join("stage %d: %d biases%s" % (
                  s, sum(q.endswith(".bias") for q in once[s]),
                  "".join(", " + q for q in once[s] if not q.endswith(".bias")))
                  for s in range(p) if once[s] and t > 1) or "none"))
    print("  reduce_scatter measured %10.0f  thesis %10.0f  - %d not held "
          "- %d the tied weight's gradient, reduce-scattered once per step "
          "on each of its stages" % (
              total("reduce_scatter"), thesis_rs, not_held, tied_once))
    print("  all_reduce     measured %10.0f  thesis %10.0f  + %d the tied "
          "weight's gradient on both its stages + %.0f the squared norm" % (
              total("all_reduce"), thesis_ar, twice, norm))
    print("  between stages measured %10d  thesis %10d  + %d the tied "
          "weight + %d the norm's chain" % (
              steps[0]["stage_bytes"], thesis_p2p,
              p2p - thesis_p2p - lanes * 2 * (p - 1) * 4,
              lanes * 2 * (p - 1) * 4))
    accounted = (abs(total("all_gather") - (thesis_ag - regather)) <= 1 and
                 abs(total("reduce_scatter") -
                     (thesis_rs - not_held - tied_once)) <= 1 and
                 abs(total("all_reduce") - (thesis_ar + twice + norm)) <= 1)
    if not accounted:
        print("  FAIL: the differences from the thesis do not add up")
    return ok and accounted


def one_f_one_b(stage, stages, m):
    """1F1B's order on a stage (the thesis's synchronized schedule)."""
    warmup = min(stages - stage - 1, m)
    order = ["F%d" % k for k in range(warmup)]
    f, b = warmup, 0
    while b < m:
        if f < m:
            order.append("F%d" % f)
            f += 1
        order.append("B%d" % b)
        b += 1
    return order


def trace(args, work):
    """strata-run --trace on --stages stages (one rank each), both
    schedules: each rank's schedule track holds m F, m B (and with zb m W)
    spans, one after another, in the order its program runs them
    (strata-inspect's, from the plan; for 1f1b also the textbook order),
    and idle spans for its receives; tools/merge-traces.py puts the ranks
    in one file, one process row per stage."""
    ok = True
    p, m = args.stages, args.accum
    for schedule in ("1f1b", "zb"):
        art = os.path.join(work, "trace-%s.strata" % schedule)
        run([os.path.join(args.bin, "strata-compile"),
             os.path.join(ROOT, "models", args.model + ".onnx"), "-o", art,
             "--pipeline-stages", str(p), "--pipeline-schedule", schedule,
             "--accum", str(m), "--steps", "2"])
        out = os.path.join(work, "trace-%s.json" % schedule)
        run(MPIRUN + ["-np", str(p), os.path.join(args.bin, "strata-run"), art,
                      "--quiet", "--trace", out])
        planned = json.loads(run([os.path.join(args.bin, "strata-inspect"),
                                  art, "--json"]).stdout)["pipeline"]["stages"]
        paths = []
        for rank in range(p):
            path = out.replace(".json", ".rank-%d.json" % rank)
            paths.append(path)
            events = json.load(open(path))["traceEvents"]
            spans = sorted((e for e in events
                            if e["ph"] == "X" and e.get("tid") == 1001),
                           key=lambda e: (e["ts"], e["dur"]))
            actions = [e for e in spans if e["cat"] != "idle"]
            names = [e["name"] for e in actions]
            phases = "FBW" if schedule == "zb" else "FB"
            counts = {ph: sum(n[0] == ph for n in names) for ph in "FBW"}
            expected = {ph: m if ph in phases else 0 for ph in "FBW"}
            # One after another: no span starts before the previous ended.
            serial = all(b["ts"] >= a["ts"] + a["dur"] - 1e-3
                         for a, b in zip(actions, actions[1:]))
            order = planned[rank]["order"]
            textbook = schedule != "1f1b" or names == one_f_one_b(rank, p, m)
            idle = sum(e["cat"] == "idle" for e in spans)
            good = (counts == expected and serial and names == order and
                    textbook and idle > 0 and
                    all(e.get("cname") for e in actions))
            ok &= good
            print("%s rank %d (stage %d): %s: %s; %d idle spans%s" % (
                schedule, rank, rank, "ok" if good else "FAIL",
                " ".join(names), idle,
                "" if names == order else "; the plan's order: " +
                " ".join(order)))
        merged = os.path.join(work, "merged-%s.json" % schedule)
        run([sys.executable, os.path.join(ROOT, "tools", "merge-traces.py"),
             merged] + paths)
        events = json.load(open(merged))["traceEvents"]
        rows = {e["pid"] for e in events if e["ph"] == "X"}
        ranks = {e["tid"] // 10000 for e in events if e["ph"] == "X"}
        if rows != set(range(p)) or ranks != set(range(p)):
            print("%s: the merged trace has process rows %s, ranks %s" % (
                schedule, sorted(rows), sorted(ranks)))
            ok = False
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
    # A rank killed mid-pipeline (a middle stage where there is one, which
    # both neighbours wait on): the launcher ends the job at once, naming it.
    killed = args.stages // 2
    env = dict(os.environ, STRATA_TEST_KILL_RANK=str(killed))
    start = time.monotonic()
    proc = subprocess.run(MPIRUN + ["-np", str(args.stages), strata_run, art,
                                    "--quiet", "--timeout", "5"],
                          capture_output=True, text=True, env=env, timeout=120)
    seconds = time.monotonic() - start
    named = re.search(r"process rank %d .*exited on signal 9" % killed,
                      proc.stdout + proc.stderr)
    dead = proc.returncode != 0 and named is not None and seconds < 5 + 30
    print("kill of rank %d: %s after %.1f s (exit %d): %s" % (
        killed, "ok" if dead else "FAIL", seconds, proc.returncode,
        named.group(0) if named else (proc.stdout + proc.stderr)[-500:]))
    return ok and dead


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
    step = latest(ckpt)
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
    """A checkpoint folder's f32 tensors: name -> (kind, values)."""
    index = json.load(open(os.path.join(folder, "index.json")))
    data = open(os.path.join(folder, "state.bin"), "rb").read()
    out = {}
    for e in index["tensors"]:
        if e["dtype"] == "f32":
            raw = data[e["offset"]:e["offset"] + e["bytes"]]
            out[e["name"]] = (e["kind"],
                              struct.unpack("<%df" % (len(raw) // 4), raw))
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
    p.add_argument("--recompute", default="none",
                   help="layers or always: compiled with it (and once "
                        "without, whose stages' activation arenas must be "
                        "larger)")
    p.add_argument("--matrix", action="store_true")
    p.add_argument("--topologies", action="store_true",
                   help="the issue's (p, t, d) on 8 ranks")
    p.add_argument("--bytes", action="store_true",
                   help="the collectives' bytes inside the stages against "
                        "the thesis's formulas and strata-inspect, 1f1b, on "
                        "--stages/--partition-group/--pipelines/--accum; "
                        "with --topologies: (2,2,2), (4,1,2), (2,4,1), "
                        "(4,2,1) x accumulation 1 and 4")
    p.add_argument("--trace", action="store_true",
                   help="strata-run --trace on --stages stages (one rank "
                        "each), 1f1b and zb: the schedule's spans")
    p.add_argument("--stall", action="store_true")
    p.add_argument("--resume", action="store_true")
    args = p.parse_args()
    if args.resume:
        with tempfile.TemporaryDirectory(prefix="pipeline-") as work:
            sys.exit(0 if resume(args, work) else 1)
    if args.bytes:
        shapes = [(args.stages, args.partition_group, args.pipelines,
                   args.accum)]
        if args.topologies:
            shapes = [(p_, t, d, a) for (p_, t, d) in
                      ((2, 2, 2), (4, 1, 2), (2, 4, 1), (4, 2, 1))
                      for a in (1, 4)]
        with tempfile.TemporaryDirectory(prefix="pipeline-") as work:
            results = [check_bytes(args, work, *shape) for shape in shapes]
        sys.exit(0 if all(results) else 1)
    if args.trace:
        with tempfile.TemporaryDirectory(prefix="pipeline-") as work:
            sys.exit(0 if trace(args, work) else 1)
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
