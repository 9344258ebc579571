#!/usr/bin/env python3
"""Faults across the nodes of an emulated cluster (tools/cluster.sh).

Four ranks on two nodes (MiCS: P = 4, hierarchical all-gather, checkpoints
every 2 steps) train 20 steps while one of these happens to node 1 after
step 6:

  --fault link-down   its link goes down (`ip link set strata-v1 down`);
  --fault node-kill   every process of the node is killed (its Open MPI
                      daemon too).

Either way node 0's ranks stop within --timeout, naming the collective and
node 1 (tools/cluster.sh runs mpirun with --enable-recovery, so the lost
node does not end the job before they can); mpirun cannot end node 1's
ranks or gets stuck, so tools/cluster.sh ends the job after --grace. The
job ends within --timeout + 2 + --grace + 5 s of the fault, nothing of
the cluster is left (namespaces, links, qdiscs), and `--resume` on a fresh
cluster reproduces the uninterrupted run's losses exactly.

  --placement-test    an artifact compiled for another --gpus-per-node than
                      the launcher's ranks per node is refused in one line
                      naming both, and so are ranks dealt round-robin over
                      the nodes (mpirun --map-by node); the run first
                      cleans a 3-node cluster left up (as a crash leaves
                      one) and leaves nothing.

    check_cluster.py --bin BUILD/bin --fault link-down|node-kill
    check_cluster.py --bin BUILD/bin --placement-test

Exits 77 (ctest's skip) with tools/cluster.sh's one line where this machine
cannot create network namespaces, unless CI=true, where that fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_distributed import (CLUSTER, ROOT, cluster_leftovers,  # noqa: E402
                               cluster_unavailable)

TIMEOUT = 4  # strata-run --timeout
# tools/cluster.sh run --grace: more than the timeout and strata-run's 2 s
# of listening for the missing ranks, so the survivors name them first.
GRACE = 8
STEPS = 20
FAULT_AFTER = 6


def losses(path):
    out = {}
    if os.path.exists(path):
        for line in open(path):
            step = json.loads(line)
            out[step["step"]] = step["loss"]
    return out


def compile_artifact(bin_dir, work, gpus_per_node=2):
    art = os.path.join(work, "gpt-k%d.strata" % gpus_per_node)
    subprocess.run([os.path.join(bin_dir, "strata-compile"),
                    os.path.join(ROOT, "models", "gpt_tiny_dynamic_batch.onnx"),
                    "--batch", "2", "-o", art, "--world", "4",
                    "--gpus-per-node", str(gpus_per_node),
                    "--partition-group", "4", "--hierarchical",
                    "on" if gpus_per_node == 2 else "off", "--steps",
                    str(STEPS)], check=True)
    return art


def cluster_run(bin_dir, art, work, name, extra=(), during=None,
                mpirun=()):
    """Runs ART on 2 nodes of 2 ranks; `during(log)` runs beside the job.
    Returns (exit status, stderr, seconds)."""
    log = os.path.join(work, name + ".jsonl")
    cmd = [CLUSTER, "run", "-N", "2", "-n", "4", "--grace", str(GRACE)]
    for arg in mpirun:
        cmd += ["--mpirun-arg", arg]
    cmd += ["--",
           os.path.join(bin_dir, "strata-run"), art, "--quiet", "--log", log,
           "--timeout", str(TIMEOUT), "--save-every", "2", "--checkpoint-dir",
           os.path.join(work, name)] + list(extra)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    helper = None
    if during:
        helper = threading.Thread(target=during, args=(log, proc))
        helper.start()
    _, err = proc.communicate(timeout=240)
    if helper:
        helper.join()
    return proc.returncode, err, time.monotonic() - start


def fault_test(args, work):
    art = compile_artifact(args.bin, work)
    code, err, _ = cluster_run(args.bin, art, work, "full")
    full = losses(os.path.join(work, "full.jsonl"))
    if code != 0 or len(full) != STEPS:
        print(f"the uninterrupted run failed ({code}):", err[-2000:])
        return 1
    injected = {}

    def inject(log, proc):
        # After step FAULT_AFTER, the fault on node 1.
        while proc.poll() is None and len(losses(log)) < FAULT_AFTER:
            time.sleep(0.05)
        if proc.poll() is not None:
            return
        injected["at"] = time.monotonic()
        cmd = [CLUSTER, "link", "1", "down"] if args.fault == "link-down" \
            else [CLUSTER, "kill", "1"]
        injected["out"] = subprocess.run(cmd, capture_output=True,
                                         text=True).stderr.strip()

    code, err, _ = cluster_run(args.bin, art, work, "part", during=inject)
    ended = time.monotonic()
    if "at" not in injected:
        print("the run ended before the fault could be injected:", err[-2000:])
        return 1
    took = ended - injected["at"]
    lines = [l for l in err.splitlines() if l.strip()]
    if code == 0:
        print(f"the job survived the {args.fault} ({injected['out']})")
        return 1
    # Node 0's ranks name the collective and node 1 (with node 0 as well
    # when the fault caught its two ranks in different collectives).
    named = [l for l in lines if "did not complete within" in l and
             "node 1 on strata-n1" in l]
    bound = TIMEOUT + 2 + GRACE + 5
    if not named:
        print(f"no message names node 1 after the {args.fault}:",
              "\n".join(lines[-30:]))
        return 1
    if took > bound:
        print(f"the job ended {took:.1f} s after the {args.fault}, over "
              f"{bound} s")
        return 1
    left = cluster_leftovers()
    if left:
        print("the emulated cluster left behind:", "; ".join(left))
        return 1
    part_dir = os.path.join(work, "part")
    latest = open(os.path.join(part_dir, "latest")).read().strip()
    # Resume on a fresh cluster: the losses after the checkpoint are the
    # uninterrupted run's, bit for bit.
    before = losses(os.path.join(work, "part.jsonl"))
    os.rename(os.path.join(work, "part.jsonl"),
              os.path.join(work, "part-before.jsonl"))
    code, err2, _ = cluster_run(args.bin, art, work, "part",
                                extra=["--resume"])
    after = losses(os.path.join(work, "part.jsonl"))
    resumed = int(latest.split("-")[1])
    if code != 0 or sorted(after) != list(range(resumed + 1, STEPS + 1)):
        print(f"the resumed run from {latest} failed ({code}) or logged "
              f"steps {sorted(after)}:", err2[-2000:])
        return 1
    differ = [s for s in after if after[s] != full[s]]
    differ += [s for s in before if before[s] != full[s]]
    if differ:
        print("losses differ from the uninterrupted run at steps", differ)
        return 1
    if cluster_leftovers():
        print("the resumed run's cluster left behind:", cluster_leftovers())
        return 1
    print(f"{args.fault} on node 1 after step {FAULT_AFTER}: the job ended "
          f"{took:.1f} s later with: {named[0].strip()}; nothing left "
          f"behind; resumed from {latest}, steps {resumed + 1}-{STEPS} equal "
          f"the uninterrupted run's losses exactly")
    return 0


def placement_test(args, work):
    art = compile_artifact(args.bin, work, gpus_per_node=4)
    # A cluster of 3 nodes left up, as a crashed run would leave it: the
    # next run's `up` removes it (the check of leftovers below sees
    # strata-n2 otherwise).
    subprocess.run([CLUSTER, "up", "-N", "3", "--inter-node-bandwidth",
                    "1gbit"], check=True)
    code, err, _ = cluster_run(args.bin, art, work, "placement")
    expected = ("the launcher placed 2 ranks on this node "
                "(OMPI_COMM_WORLD_LOCAL_SIZE=2) but the artifact was compiled "
                "with --gpus-per-node 4")
    if code == 0 or expected not in err:
        print("a placement of 2 ranks per node was not refused for "
              "--gpus-per-node 4:", code, err[-2000:])
        return 1
    if cluster_leftovers():
        print("the emulated cluster left behind:", cluster_leftovers())
        return 1
    line = next(l for l in err.splitlines() if expected in l)
    # The right count per node, but ranks dealt round-robin over the nodes
    # (rank 1 on node 1): the groups assume node-major numbering.
    art = compile_artifact(args.bin, work)
    code, err, _ = cluster_run(args.bin, art, work, "round-robin",
                               mpirun=["--map-by", "node"])
    expected = ("rank 1 is local rank 0 of its node "
                "(OMPI_COMM_WORLD_LOCAL_RANK) but --gpus-per-node 2 numbers "
                "ranks node-major (local rank 1)")
    if code == 0 or expected not in err:
        print("ranks dealt round-robin over the nodes were not refused:",
              code, err[-2000:])
        return 1
    if cluster_leftovers():
        print("the emulated cluster left behind:", cluster_leftovers())
        return 1
    print("refused:", line)
    print("refused:", next(l for l in err.splitlines() if expected in l))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--fault", choices=["link-down", "node-kill"])
    ap.add_argument("--placement-test", action="store_true")
    args = ap.parse_args()
    unavailable = cluster_unavailable()
    if unavailable:
        return unavailable
    with tempfile.TemporaryDirectory(prefix="cluster-") as work:
        if args.placement_test:
            return placement_test(args, work)
        if args.fault:
            return fault_test(args, work)
    ap.error("one of --fault or --placement-test")


if __name__ == "__main__":
    sys.exit(main())
