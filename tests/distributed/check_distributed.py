#!/usr/bin/env python3
"""Distributed training equals one rank, and moves the bytes the formulas say.

For one topology (N ranks, K per node, partition group P, hierarchical
all-gather on/off, gradient sync 2hop/global, accumulation A) this compiles a
batch-dynamic model twice: once for one rank at the global batch G, once for
N ranks at the micro-batch G / (N A). It runs the second under mpirun with
--check-replicas and checks:

  * every step's loss equals the one-rank run's within 1e-6 (relative);
  * after every step the ranks of each replication group held bit-identical
    state (strata-run hashes it and logs "replicas_identical");
  * the bytes of every step, by collective and link class (summed over the
    ranks), equal the MiCS formulas (docs/distributed.md) for the gathered
    and reduced sizes the compiled IR holds, and strata-inspect's prediction
    from the plan; and the forward gathers cover every parameter exactly
    once.

    check_distributed.py --bin BUILD/bin --model gpt_tiny --world 8 \\
        --ranks-per-node 2 --partition 4 --hierarchical on --grad-sync 2hop \\
        --accum 4 [--steps 20] [--dtype bf16] [--ungrouped-reference]
    check_distributed.py --bin BUILD/bin --matrix [--models gpt_tiny,bert_tiny]
        the acceptance matrix: N=8, K=2, P in {1,2,4,8}, hierarchical on/off
        (where P > K), 2hop/global, accumulation 1/4, 20 steps, each model
    check_distributed.py --bin BUILD/bin --timeout-test
        a rank that stops participating: every rank exits within the timeout
        with a message naming the collective, the group and the missing rank
    check_distributed.py --bin BUILD/bin --replica-fault-test
        a rank whose state is perturbed is caught by --check-replicas
    check_distributed.py --bin BUILD/bin --checkpoint-test
        ...
    check_distributed.py --bin BUILD/bin --cluster --world 4 \\
        --ranks-per-node 2 --partition 4 --hierarchical on
        the same checks on an emulated cluster of N / K nodes
        (tools/cluster.sh: a network namespace per node, TCP between them),
        and: the nodes' veths carried at least half the inter-node bytes the
        log counts, and nothing of the cluster is left afterwards
        sharded checkpoints: kill and resume bit for bit, a different
        topology refused, --consolidate writes the whole weights (equal to a
        one-rank run's) and --export-onnx from them
"""
import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
CLUSTER = os.path.join(ROOT, "tools", "cluster.sh")
WIDTH = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2}


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def launcher(args, n):
    """The command prefix that starts N ranks: mpirun on this host, or
    tools/cluster.sh on an emulated cluster of N / K nodes."""
    if args.cluster:
        return [CLUSTER, "run", "-N", str(n // args.ranks_per_node), "-n",
                str(n), "--"]
    return MPIRUN + ["-np", str(n)]


def veth_bytes(stderr):
    """The bytes the nodes received over their veths, from tools/cluster.sh
    run's counters."""
    return sum(int(b) for b in re.findall(r"^cluster\.sh: node \d+ .*, "
                                          r"received (\d+) bytes$", stderr,
                                          re.M))


def cluster_leftovers():
    """What an emulated cluster left behind: namespaces, links, qdiscs."""
    left = []
    for cmd in (["ip", "netns", "list"], ["ip", "-o", "link", "show"],
                ["tc", "qdisc", "show"]):
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        left += [" ".join(cmd[:2]) + ": " + l.strip()
                 for l in out.splitlines() if "strata-" in l]
    return left


def cluster_unavailable():
    """None when tools/cluster.sh can emulate a cluster here; else its one
    line, and ctest's skip code (77) on a developer machine, a failure
    under CI (CI=true)."""
    proc = subprocess.run([CLUSTER, "check"], capture_output=True, text=True)
    if proc.returncode == 0:
        return None
    line = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else \
        "tools/cluster.sh check failed"
    print(line)
    return 1 if os.environ.get("CI") == "true" or proc.returncode != 77 \
        else 77


def read_log(path):
    return [json.loads(line) for line in open(path)]


def tensor_bytes(t):
    """'tensor<4096xf32>' -> 16384"""
    m = re.fullmatch(r"tensor<((?:\d+x)*)(\w+)>", t.strip())
    n = 1
    for d in m.group(1).split("x")[:-1]:
        n *= int(d)
    return n * WIDTH[m.group(2)]


def collectives(ir, func):
    """[(op, group, [operand bytes], position)] of @func, and the position
    of its graph.cross_entropy (the loss; later ops are the backward)."""
    body = ir.split("func.func @" + func + "(", 1)[1].split("\n  }\n", 1)[0]
    ops, loss = [], None
    for i, line in enumerate(body.splitlines()):
        if "graph.cross_entropy " in line and loss is None:
            loss = i
        m = re.search(r"sched\.(\w+) (\w+) [^:]* : (.*) -> ", line)
        if m:
            operands = re.findall(r"tensor<[^>]*>", m.group(3))
            ops.append((m.group(1), m.group(2),
                        [tensor_bytes(t) for t in operands], i))
    return ops, loss


def gathered_sizes(ir, p, func="micro_step"):
    """Padded bytes gathered per micro-step in forward and in backward, and
    the padded gradient bytes reduced per micro-step."""
    ops, loss = collectives(ir, func)
    fwd = bwd = 0
    for op, group, sizes, at in ops:
        if op == "all_gather" and group in ("partition", "inter"):
            full = sum(sizes) * p  # the stage-1 operands are the shards
            if loss is None or at < loss:
                fwd += full
            else:
                bwd += full
    grad = 0
    for op, group, sizes, at in ops:
        if op == "reduce_scatter":
            grad += sum(sizes)
        elif op == "all_reduce" and group == "world":
            grad += sum(sizes)
    if grad == 0:  # 2hop with P = 1: the boundary all-reduce holds them
        for op, group, sizes, _ in collectives(ir, "optimizer_step")[0]:
            if op == "all_reduce" and group == "replication":
                grad += sum(sizes) * p
    return fwd, bwd, grad


def parameter_bytes(summary, p):
    """Sum over the parameters of their bytes zero-padded to P slices."""
    total = 0
    for m in re.finditer(r"^    \S+\s+(tensor<[^>]*>)$", summary, re.M):
        n = tensor_bytes(m.group(1)) // 4
        total += (n + p - 1) // p * p * 4
    return total


def expected_bytes(n, k, p, hier, sync, accum, fwd, bwd, grad):
    """Bytes per optimizer step summed over the ranks, per collective as
    [intra-node, inter-node], under ring algorithms: each rank receives from
    its ring predecessor; MiCS's per-node figures (docs/distributed.md)."""
    nodes = n // k
    out = {"all_gather": [0.0, 0.0], "reduce_scatter": [0.0, 0.0],
           "all_reduce": [0.0, 0.0]}

    def add(kind, per_rank_total, inter_cluster):
        out[kind][0] += per_rank_total * n - inter_cluster
        out[kind][1] += inter_cluster

    if p > 1:
        for x in (fwd, bwd):
            # Every rank receives (P-1)/P of a gathered value in all.
            per_rank = (p - 1) / p * x
            if hier:
                # Per node: (P-K) M/P over the network (paper, section 3.3).
                per_node_inter = (p - k) / p * x
            else:
                # Per node: (P-1) M/P crosses the one node boundary of the
                # ring into the node.
                per_node_inter = (p - 1) / p * x if p > k else 0.0
            add("all_gather", accum * per_rank, accum * nodes * per_node_inter)
    if sync == "2hop":
        if p > 1:
            per_rank = (p - 1) / p * grad
            per_node_inter = per_rank if p > k else 0.0
            add("reduce_scatter", accum * per_rank, accum * nodes * per_node_inter)
        r = n // p
        if r > 1:
            # Once per step: 2 (N-P) M / (N P) per rank (a ring over N/P).
            per_rank = 2 * (n - p) / (n * p) * grad
            remote_ranks = n if p >= k else nodes * p
            add("all_reduce", per_rank, remote_ranks * per_rank)
    else:
        # Every micro-step: 2 (N-1)/N of the whole gradient per rank.
        per_rank = 2 * (n - 1) / n * grad
        add("all_reduce", accum * per_rank,
            accum * (nodes if n > k else 0) * per_rank)
    if p > 1:
        # The squared gradient norm (one f32) summed over the partition group.
        per_rank = 2 * (p - 1) / p * 4
        add("all_reduce", per_rank, (nodes if p > k else 0) * per_rank)
    return out


def check_topology(args, work, ref_cache):
    n, k, p, a = args.world, args.ranks_per_node, args.partition, args.accum
    hier = args.hierarchical == "on"
    micro = args.global_batch // (n * a)
    if micro * n * a != args.global_batch:
        sys.exit("the global batch does not split over world x accum")
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    onnx = os.path.join(ROOT, "models", args.model + "_dynamic_batch.onnx")
    topology = ["--world", str(n), "--gpus-per-node", str(k),
                "--partition-group", str(p), "--hierarchical",
                args.hierarchical, "--grad-sync", args.grad_sync,
                "--accum", str(a), "--steps", str(args.steps)]
    precision = [] if args.dtype == "fp32" else ["--dtype", args.dtype]
    # fp32: the distributed run equals one rank's on the global batch (to
    # 1e-6: the gradient sums run in another order). bf16 / fp16: the
    # narrow-storage run equals, bit for bit, the same topology in the f32
    # emulation (--precision-storage f32).
    tolerance = 1e-6 if args.dtype == "fp32" else 0.0
    # --ungrouped-reference: the reference updates one parameter per
    # instruction (--group-updates=false), the run under test many.
    grouping = ["--group-updates=false"] if args.ungrouped_reference else []
    key = (args.model, args.global_batch, args.steps, args.ungrouped_reference)
    if args.dtype != "fp32":
        ref = os.path.join(work, "ref-emulated.strata")
        run([compile_, onnx, "--batch", str(micro), "-o", ref] + topology +
            precision + ["--precision-storage", "f32"] + grouping)
        log = os.path.join(work, "ref-emulated.jsonl")
        run(launcher(args, n) + [strata_run, ref, "--quiet", "--log", log])
        ref_steps = read_log(log)
    elif key not in ref_cache:
        ref = os.path.join(work, "ref-%s.strata" % args.model)
        run([compile_, onnx, "--batch", str(args.global_batch), "-o", ref,
             "--steps", str(args.steps)] + grouping)
        log = os.path.join(work, "ref-%s.jsonl" % args.model)
        run([strata_run, ref, "--quiet", "--log", log])
        ref_cache[key] = read_log(log)
    if args.dtype == "fp32":
        ref_steps = ref_cache[key]

    dist = os.path.join(work, "dist.strata")
    run([compile_, onnx, "--batch", str(micro), "-o", dist] + topology +
        precision)
    ir = run([compile_, onnx, "--batch", str(micro), "--emit=distributed"]
             + topology + precision, capture_output=True, text=True).stdout
    summary = run([compile_, onnx, "--batch", str(micro), "--emit=summary"],
                  capture_output=True, text=True).stdout
    log = os.path.join(work, "dist.jsonl")
    proc = run(launcher(args, n) + [strata_run, dist, "--quiet",
                                    "--check-replicas", "--log", log],
               capture_output=args.cluster, text=True)
    dist_steps = read_log(log)
    wire = ""
    if args.cluster:
        sys.stderr.write(proc.stderr)
        # TCP carried the inter-node bytes: the veths saw at least half
        # of what the counters model (Open MPI's algorithms are not rings;
        # shared memory would leave the veths near 0).
        counted = sum(step["inter_node_bytes"] for step in read_log(log))
        received = veth_bytes(proc.stderr)
        if received < counted / 2:
            return (f"cluster: the nodes' veths received {received} bytes, "
                    f"the log counts {counted:.0f} inter-node bytes: the "
                    f"ranks did not talk over TCP between nodes")
        wire = (f"; {received} bytes over the nodes' veths for "
                f"{counted:.0f} inter-node bytes counted")
    name = (("cluster of %d nodes: " % (n // k) if args.cluster else "") +
            f"{args.model} N={n} K={k} P={p} hier={args.hierarchical} "
            f"sync={args.grad_sync} A={a}" +
            (f" {args.dtype}" if args.dtype != "fp32" else ""))
    reference = "one rank" if args.dtype == "fp32" else "the f32 emulation"
    if args.ungrouped_reference:
        reference += " (one update per parameter)"
    if len(dist_steps) != args.steps:
        return f"{name}: logged {len(dist_steps)} steps, expected {args.steps}"
    worst = 0.0
    for i, (d, r) in enumerate(zip(dist_steps, ref_steps)):
        err = abs(d["loss"] - r["loss"]) / abs(r["loss"])
        worst = max(worst, err)
        if err > tolerance:
            return (f"{name}: step {i + 1} loss {d['loss']} vs {reference} "
                    f"{r['loss']} (relative {err:.3g})")
        if not d.get("replicas_identical"):
            return f"{name}: step {i + 1} did not check the replicas"

    fwd, bwd, grad = gathered_sizes(ir, p)
    # The forward program (every output) gathers each parameter once: in
    # fp32 all of its bytes; in bf16 / fp16 the parameters that only feed
    # products are gathered narrow, at half their bytes.
    forward = gathered_sizes(ir, p, "main")[0]
    full = parameter_bytes(summary, p)
    if p > 1 and args.dtype == "fp32" and forward != full:
        return (f"{name}: the forward program gathers {forward} bytes, the "
                f"parameters padded to {p} slices are {full}")
    if p > 1 and args.dtype != "fp32" and not full / 2 <= forward < full:
        return (f"{name}: the forward program gathers {forward} bytes, not "
                f"between half the padded parameters' {full} and all of them")
    expected = expected_bytes(n, k, p, hier, args.grad_sync, a, fwd, bwd, grad)
    for i, step in enumerate(dist_steps):
        for kind, (intra, inter) in expected.items():
            got = step["bytes"][kind]
            for measured, formula, link in ((got[0], intra, "intra"),
                                            (got[1], inter, "inter")):
                if abs(measured - formula) > 1 + 1e-9 * formula:
                    return (f"{name}: step {i + 1} {kind} {link}-node bytes "
                            f"{measured}, the formula gives {formula:.1f} "
                            f"(forward {fwd}, backward {bwd}, gradients "
                            f"{grad})")
        # Per rank: the ranks' own counters add up to the totals.
        ranks = step["rank_bytes"]
        for link in (0, 1):
            total = sum(v[link] for v in step["bytes"].values())
            if len(ranks) != n or abs(sum(r[link] for r in ranks) - total) > n:
                return (f"{name}: step {i + 1} per-rank bytes {ranks} do not "
                        f"add up to {total}")
    # strata-inspect predicts the same bytes from the plan alone.
    inspect = os.path.join(args.bin, "strata-inspect")
    predicted = json.loads(run([inspect, dist, "--json"], capture_output=True,
                               text=True).stdout)["traffic"]
    for kind, measured in dist_steps[0]["bytes"].items():
        if any(abs(a - b) > 1 for a, b in zip(predicted[kind], measured)):
            return (f"{name}: strata-inspect predicts {kind} {predicted[kind]}, "
                    f"the run measured {measured}")
    ag = dist_steps[0]["bytes"]["all_gather"]
    print(f"{name}: {args.steps} steps equal {reference} (worst {worst:.2g}); "
          f"replicas identical; bytes match the formulas (all-gather "
          f"intra {ag[0]:.0f} inter {ag[1]:.0f} per step){wire}")
    return None


def timeout_test(args, work):
    # Rank 1 stops participating at step 2: every rank must be gone within
    # the timeout (plus the grace and start-up), with the diagnostic.
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    onnx = os.path.join(ROOT, "models", "gpt_tiny_dynamic_batch.onnx")
    art = os.path.join(work, "stall.strata")
    run([compile_, onnx, "--batch", "2", "-o", art, "--steps", "5",
         "--world", "4", "--gpus-per-node", "2", "--hierarchical", "off"])
    start = time.time()
    proc = subprocess.run(MPIRUN + ["-np", "4", "-x", "STRATA_TEST_STALL_RANK=1",
                                    strata_run, art, "--quiet", "--timeout",
                                    "2"],
                          capture_output=True, text=True, timeout=120)
    took = time.time() - start
    lines = [l for l in proc.stderr.splitlines() if "did not complete" in l]
    if proc.returncode == 0 or not lines:
        print("no timeout diagnostic; exit", proc.returncode, proc.stderr)
        return 1
    # The ranks of rank 1's partition group name it.
    expected = ("all_gather #", "on the partition group {0,1,2,3}",
                "within 2 s", "rank(s) 1 never arrived", "aborting every rank")
    named = [l for l in lines if all(e in l for e in expected)]
    if not named:
        print("no diagnostic names the collective, group and missing rank:",
              lines)
        return 1
    line = named[0]
    print(f"stalled rank: every rank exited ({proc.returncode}) after "
          f"{took:.1f} s with: {line}")
    return 0 if took < 60 else 1


def reduce_dtype_test(args, work):
    # --reduce-dtype narrow: the reduce-scatters and the 2-hop all-reduce
    # carry bf16 (half the bytes, by the artifact's own traffic count), and
    # the losses stay close to the f32 sums' (rounded, so not equal).
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    inspect = os.path.join(args.bin, "strata-inspect")
    onnx = os.path.join(ROOT, "models", "gpt_tiny_dynamic_batch.onnx")
    losses, traffic = {}, {}
    for mode in ("fp32", "narrow"):
        art = os.path.join(work, "reduce-%s.strata" % mode)
        run([compile_, onnx, "--batch", "2", "-o", art, "--steps", "8",
             "--world", "4", "--gpus-per-node", "2", "--partition-group", "2",
             "--accum", "2", "--dtype", "bf16", "--reduce-dtype", mode])
        log = os.path.join(work, "reduce-%s.jsonl" % mode)
        run(MPIRUN + ["-np", "4", strata_run, art, "--quiet", "--log", log])
        losses[mode] = [json.loads(l)["loss"] for l in open(log)
                        if '"loss"' in l]
        info = json.loads(subprocess.run([inspect, art, "--json"],
                                         capture_output=True, text=True,
                                         check=True).stdout)
        traffic[mode] = info["traffic"]
    for kind in ("reduce_scatter", "all_reduce"):
        wide = sum(traffic["fp32"][kind])
        narrow = sum(traffic["narrow"][kind])
        # The grad-norm all-reduce (one f32 scalar) stays f32.
        if not (0.49 * wide <= narrow <= 0.51 * wide + 64):
            print(f"{kind}: {narrow:.0f} bytes narrow against {wide:.0f} f32")
            return 1
    diff = max(abs(a - b) for a, b in zip(losses["fp32"], losses["narrow"]))
    print(f"--reduce-dtype narrow: reduce-scatter and all-reduce bytes "
          f"halved; losses within {diff:.2e} of the f32 sums over "
          f"{len(losses['fp32'])} steps")
    if len(losses["narrow"]) != 8 or diff > 5e-3 or diff == 0:
        print("losses", losses)
        return 1
    return 0


def replica_fault_test(args, work):
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    onnx = os.path.join(ROOT, "models", "gpt_tiny_dynamic_batch.onnx")
    art = os.path.join(work, "fault.strata")
    run([compile_, onnx, "--batch", "2", "-o", art, "--steps", "4",
         "--world", "4", "--gpus-per-node", "2", "--partition-group", "2"])
    proc = subprocess.run(MPIRUN + ["-np", "4", "-x",
                                    "STRATA_TEST_PERTURB_RANK=3", strata_run,
                                    art, "--quiet", "--check-replicas"],
                          capture_output=True, text=True, timeout=120)
    message = "step 2: rank 3's state differs from its replica rank 1"
    if proc.returncode == 0 or message not in proc.stderr:
        print("the perturbed replica was not caught:", proc.returncode,
              proc.stderr)
        return 1
    print("perturbed replica caught:", message)
    return 0


def read_state(folder):
    """{name: bytes} of a state folder (state.bin + index.json)."""
    index = json.load(open(os.path.join(folder, "index.json")))
    data = open(os.path.join(folder, "state.bin"), "rb").read()
    return {t["name"]: data[t["offset"]:t["offset"] + t["bytes"]]
            for t in index["tensors"]}, index


def checkpoint_test(args, work):
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    onnx = os.path.join(ROOT, "models", "gpt_tiny_dynamic_batch.onnx")
    art = os.path.join(work, "ckpt.strata")
    topology = ["--world", "4", "--gpus-per-node", "2", "--partition-group",
                "2", "--accum", "2", "--steps", "6"]
    run([compile_, onnx, "--batch", "1", "-o", art] + topology)
    mpi = MPIRUN + ["-np", "4"]
    # The uninterrupted run.
    full = os.path.join(work, "full")
    run(mpi + [strata_run, art, "--quiet", "--log", full + ".jsonl",
               "--save-every", "2", "--checkpoint-dir", full])
    # Killed during its second save (step 4): `latest` stays at step 2 on
    # every rank; the resumed run continues bit for bit.
    part = os.path.join(work, "part")
    subprocess.run(mpi + ["-x", "STRATA_TEST_KILL_DURING_SAVE=2", strata_run,
                          art, "--quiet", "--log", part + ".jsonl",
                          "--save-every", "2", "--checkpoint-dir", part],
                   capture_output=True)
    latest = open(os.path.join(part, "latest")).read().strip()
    if latest != "step-00000002":
        print("after a kill during the second save latest is", latest)
        return 1
    index = json.load(open(os.path.join(part, latest, "index.json")))
    if index["topology"] != {"ranks": 4, "ranks_per_node": 2, "partition": 2,
                             "stages": 1, "accum": 2}:
        print("the checkpoint index lacks the topology:", index)
        return 1
    run(mpi + [strata_run, art, "--quiet", "--log", part + ".jsonl",
               "--save-every", "2", "--checkpoint-dir", part, "--resume"])
    a = [s["loss"] for s in read_log(full + ".jsonl")]
    b = [s["loss"] for s in read_log(part + ".jsonl")][-4:]
    if a[2:] != b:
        print("resumed losses differ:", a[2:], b)
        return 1
    for r in range(4):
        x = open(os.path.join(full, "step-00000006", "rank-%05d" % r,
                              "state.bin"), "rb").read()
        y = open(os.path.join(part, "step-00000006", "rank-%05d" % r,
                              "state.bin"), "rb").read()
        if x != y:
            print(f"rank {r}'s state after resuming differs")
            return 1
    # Another topology of the same model reshards it (with a note; the
    # losses are tests/reliability/check_reshard.py's).
    other = os.path.join(work, "other.strata")
    run([compile_, onnx, "--batch", "1", "-o", other, "--world", "4",
         "--gpus-per-node", "2", "--partition-group", "4", "--accum", "2",
         "--steps", "7"])
    proc = subprocess.run(mpi + [strata_run, other, "--quiet",
                                 "--checkpoint-dir", full, "--resume"],
                          capture_output=True, text=True)
    if proc.returncode != 0 or "resharding" not in proc.stderr:
        print("a checkpoint of another topology was not resharded:",
              proc.stderr)
        return 1
    # A rank's folder swapped with another's (a copy gone wrong): refused,
    # naming both ranks, where it once trained on (loss 3.43 -> 4.05).
    swapped = os.path.join(work, "swapped")
    shutil.copytree(full, swapped)
    step6 = os.path.join(swapped, "step-00000006")
    os.rename(os.path.join(step6, "rank-00000"), os.path.join(step6, "tmp"))
    os.rename(os.path.join(step6, "rank-00001"),
              os.path.join(step6, "rank-00000"))
    os.rename(os.path.join(step6, "tmp"), os.path.join(step6, "rank-00001"))
    proc = subprocess.run(mpi + [strata_run, art, "--quiet", "--steps", "8",
                                 "--checkpoint-dir", swapped, "--resume"],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode == 0 or \
            "holds rank 1's shards, not rank 0's" not in proc.stderr:
        print("a rank's folder swapped with another's was not refused:",
              proc.stderr[-500:])
        return 1
    # One rank's shard damaged: that rank refuses it alone and ends the
    # job at once (the others used to wait in their first collective until
    # the timeout, and mpirun could hang).
    damaged = os.path.join(work, "damaged")
    shutil.copytree(full, damaged)
    state = os.path.join(damaged, "step-00000006", "rank-00002", "state.bin")
    data = bytearray(open(state, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(state, "wb").write(bytes(data))
    start = time.monotonic()
    proc = subprocess.run(mpi + [strata_run, art, "--quiet", "--steps", "8",
                                 "--timeout", "60", "--checkpoint-dir",
                                 damaged, "--resume"],
                          capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - start
    if proc.returncode == 0 or "rank-00002': '" not in proc.stderr or \
            "is truncated or corrupt" not in proc.stderr or seconds > 20:
        print("one rank's damaged shard did not end the job at once "
              "(%.1f s, exit %d): %s" % (seconds, proc.returncode,
                                         proc.stderr[-500:]))
        return 1
    # Consolidate: whole weights, equal to a one-rank run on the same
    # global batch (within float reduction order), and an ONNX export.
    out = os.path.join(work, "weights")
    onnx_out = os.path.join(work, "trained.onnx")
    run([strata_run, art, "--quiet", "--checkpoint-dir", full,
         "--consolidate", out, "--export-onnx", onnx_out])
    ref = os.path.join(work, "ref.strata")
    run([compile_, onnx, "--batch", "8", "-o", ref, "--steps", "6"])
    run([strata_run, ref, "--quiet", "--save-every", "6", "--checkpoint-dir",
         os.path.join(work, "ref")])
    whole, whole_index = read_state(out)
    one, one_index = read_state(os.path.join(work, "ref", "step-00000006"))
    shapes = {t["name"]: t["shape"] for t in one_index["tensors"]
              if t["kind"] in (0, 1) or t["name"] in whole}
    worst = 0.0
    for t in whole_index["tensors"]:
        if shapes.get(t["name"]) != t["shape"]:
            print("consolidated", t["name"], t["shape"], "vs one rank",
                  shapes.get(t["name"]))
            return 1
        x = struct.unpack("<%df" % (t["bytes"] // 4), whole[t["name"]])
        y = struct.unpack("<%df" % (t["bytes"] // 4), one[t["name"]])
        worst = max(worst, max(abs(u - v) for u, v in zip(x, y)))
    # Six AdamW steps amplify the ranks' different summation order to
    # ~1e-5; a misplaced shard would be off by the weights' own size.
    if worst > 2e-4 or len(whole) == 0:
        print("consolidated weights differ from one rank's by", worst)
        return 1
    # The exported model computes what the one-rank run's weights compute.
    exported = os.path.join(work, "exported.strata")
    run([compile_, onnx_out, "--batch", "8", "--forward-only", "-o",
         exported])
    outputs = []
    for cmd in ([strata_run, exported, "--forward", "--random-inputs", "3",
                 "--int-high", "256"],
                [strata_run, ref, "--forward", "--random-inputs", "3",
                 "--int-high", "256", "--checkpoint-dir",
                 os.path.join(work, "ref"), "--resume"]):
        text = run(cmd, capture_output=True, text=True).stdout
        outputs.append([float(v) for v in
                        re.findall(r"(?:sum|l2)=(\S+)", text)])
    diff = max(abs(u - v) / max(abs(v), 1e-6)
               for u, v in zip(*outputs)) if outputs[0] else 1.0
    if len(outputs[0]) != len(outputs[1]) or diff > 1e-4:
        print("the exported model's forward differs:", outputs)
        return 1
    print(f"checkpoints: kill at the second save resumes bit for bit on 4 "
          f"ranks; another topology refused; {len(whole)} consolidated "
          f"values equal one rank's within {worst:.2g}; the exported ONNX "
          f"computes the one-rank forward within {diff:.2g}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", default="gpt_tiny")
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--partition", type=int, default=4)
    ap.add_argument("--hierarchical", choices=["on", "off"], default="off")
    ap.add_argument("--grad-sync", choices=["2hop", "global"], default="2hop")
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default="fp32",
                    help="bf16 / fp16: compare narrow storage with the f32 "
                         "emulation on the same topology, exactly")
    ap.add_argument("--ungrouped-reference", action="store_true",
                    help="compile the reference with --group-updates=false")
    ap.add_argument("--cluster", action="store_true",
                    help="run the ranks on an emulated cluster of "
                         "world / ranks-per-node nodes (tools/cluster.sh)")
    ap.add_argument("--matrix", action="store_true")
    ap.add_argument("--models", default="gpt_tiny,bert_tiny")
    ap.add_argument("--timeout-test", action="store_true")
    ap.add_argument("--replica-fault-test", action="store_true")
    ap.add_argument("--checkpoint-test", action="store_true")
    ap.add_argument("--reduce-dtype-test", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="distributed-")
    if args.timeout_test:
        return timeout_test(args, work)
    if args.replica_fault_test:
        return replica_fault_test(args, work)
    if args.checkpoint_test:
        return checkpoint_test(args, work)
    if args.reduce_dtype_test:
        return reduce_dtype_test(args, work)
    refs = {}
    if args.cluster and (unavailable := cluster_unavailable()):
        return unavailable
    if not args.matrix:
        failure = check_topology(args, work, refs)
        if args.cluster and not failure and (left := cluster_leftovers()):
            failure = "the emulated cluster left behind: " + "; ".join(left)
        if failure:
            print(failure)
        return 1 if failure else 0
    failures = []
    runs = 0
    start = time.time()
    for model in args.models.split(","):
        for p in (1, 2, 4, 8):
            for hier in (("off", "on") if p > args.ranks_per_node else ("off",)):
                for sync in ("2hop", "global"):
                    for accum in (1, 4):
                        args.model, args.partition = model, p
                        args.hierarchical, args.grad_sync = hier, sync
                        args.accum = accum
                        failure = check_topology(args, work, refs)
                        runs += 1
                        if failure:
                            print("FAIL", failure)
                            failures.append(failure)
    print(f"{runs - len(failures)}/{runs} topologies pass "
          f"({time.time() - start:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
