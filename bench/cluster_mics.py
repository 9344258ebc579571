#!/usr/bin/env python3
"""Wall-clock ZeRO-3 vs MiCS on an emulated cluster with shaped links.

On 2 and 4 nodes of 2 ranks (tools/cluster.sh: network namespaces, TCP
between nodes over tbf-shaped veths, shared memory within a node) this
trains gpt_tiny at a fixed global batch under four schedules:

  zero3     P = N, flat all-gather (ZeRO-3 over every rank)
  mics-node P = K, partition group = one node (2-hop gradient sync)
  mics-hier P = N, MiCS's hierarchical all-gather across the nodes
  global    P = K as mics-node, but the whole gradient all-reduced over all
            N ranks every micro-step (DeepSpeed's default; mics-node's
            2-hop is the saving)

at each inter-node bandwidth, interleaved (every schedule once per round,
--rounds rounds), and prints per cell the median step time (rank 0's
step_ms over the steps after the first), the bytes the nodes' veths
received per step and the inter-node bytes the step log's ring model
counts, and the time one node's link needs for its share of those veth
bytes at the slowest bandwidth (tools/cluster.sh bandwidth's measured
rate). Not part of CI (minutes); docs/distributed.md holds its table.

    bench/cluster_mics.py --bin build/bin [--nodes 2,4] \\
        [--bandwidths 50mbit,100mbit,500mbit,unlimited] [--rounds 2]
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "tools", "cluster.sh")
K = 2
SCHEDULES = {
    # name: (partition group, hierarchical, grad sync), P = 0 meaning N
    "zero3": (0, "off", "2hop"),
    "mics-node": (K, "off", "2hop"),
    "mics-hier": (0, "on", "2hop"),
    "global": (K, "off", "global"),
}


def compile_all(args, work, nodes):
    n = nodes * K
    micro = args.global_batch // (n * args.accum)
    arts = {}
    for name, (p, hier, sync) in SCHEDULES.items():
        art = os.path.join(work, f"{name}-{nodes}.strata")
        subprocess.run([os.path.join(args.bin, "strata-compile"),
                        os.path.join(ROOT, "models",
                                     "gpt_tiny_dynamic_batch.onnx"),
                        "--batch", str(micro), "--accum", str(args.accum),
                        "--world", str(n), "--gpus-per-node", str(K),
                        "--partition-group", str(p or n), "--hierarchical",
                        hier, "--grad-sync", sync, "--steps",
                        str(args.steps), "-o", art], check=True)
        arts[name] = art
    return arts


def one_run(args, art, nodes, bandwidth, log):
    proc = subprocess.run(
        [CLUSTER, "run", "-N", str(nodes), "-n", str(nodes * K),
         "--inter-node-bandwidth", bandwidth, "--",
         os.path.join(args.bin, "strata-run"), art, "--quiet", "--log", log],
        capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{art} at {bandwidth} failed: {proc.stderr[-1500:]}")
    steps = [json.loads(l) for l in open(log)]
    received = sum(int(b) for b in re.findall(r"received (\d+) bytes",
                                              proc.stderr))
    return (statistics.median(s["step_ms"] for s in steps[1:]),
            received / len(steps),
            statistics.mean(s["inter_node_bytes"] for s in steps))


def measured_bandwidth(bandwidth):
    out = subprocess.run([CLUSTER, "bandwidth", "-N", "2",
                          "--inter-node-bandwidth", bandwidth],
                         capture_output=True, text=True).stdout
    m = re.search(r"([\d.]+) Mbit/s", out)
    return float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--nodes", default="2,4")
    ap.add_argument("--bandwidths", default="50mbit,100mbit,500mbit,unlimited")
    ap.add_argument("--global-batch", type=int, default=32)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    bandwidths = args.bandwidths.split(",")
    links = {b: measured_bandwidth(b) for b in bandwidths}
    results = {}
    with tempfile.TemporaryDirectory(prefix="cluster-mics-") as work:
        for nodes in map(int, args.nodes.split(",")):
            arts = compile_all(args, work, nodes)
            for round_ in range(args.rounds):
                for bandwidth in bandwidths:
                    for name, art in arts.items():
                        log = os.path.join(work, "log.jsonl")
                        ms, wire, model = one_run(args, art, nodes, bandwidth,
                                                  log)
                        results.setdefault((nodes, bandwidth, name),
                                           []).append((ms, wire, model))
                        print(f"round {round_ + 1}: {nodes} nodes, "
                              f"{bandwidth}, {name}: {ms:.1f} ms/step, "
                              f"{wire / 1e6:.2f} MB/step on the veths",
                              file=sys.stderr, flush=True)
    print(f"# {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC; gpt_tiny, "
          f"global batch {args.global_batch}, accumulation {args.accum}, "
          f"K = {K}, {args.steps} steps, median step time over steps 2-"
          f"{args.steps}, best of {args.rounds} interleaved rounds")
    print("# link measured (tools/cluster.sh bandwidth): " +
          ", ".join(f"{b} {links[b]:.1f} Mbit/s" for b in bandwidths))
    slowest = bandwidths[0]
    print("| nodes | schedule | " + " | ".join(f"ms/step @ {b}"
                                               for b in bandwidths) +
          " | MB/step on veths | MB/step inter-node (ring model) | "
          f"link ms/step @ {slowest} |")
    print("|---" * (5 + len(bandwidths)) + "|")
    for nodes in map(int, args.nodes.split(",")):
        for name in SCHEDULES:
            cells = [min(r[0] for r in results[(nodes, b, name)])
                     for b in bandwidths]
            wire = statistics.median(r[1] for b in bandwidths
                                     for r in results[(nodes, b, name)])
            model = results[(nodes, bandwidths[0], name)][0][2]
            # The time a node's link needs for its share of the veth bytes
            # at the slowest measured rate.
            link_ms = wire / nodes * 8 / (links[slowest] * 1e6) * 1e3
            print(f"| {nodes} | {name} | " +
                  " | ".join(f"{c:.0f}" for c in cells) +
                  f" | {wire / 1e6:.2f} | {model / 1e6:.2f} | "
                  f"{link_ms:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
