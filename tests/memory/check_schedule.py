#!/usr/bin/env python3
"""The schedule changes when things run, never what they compute: the
committed GPT trained with prefetch depths 0, 1 and 4, with its optimizer
states on the host and SSD tiers, with activations recomputed (always, and
automatically under a budget), every run under --inject-delay (random
sleeps before every collective, move and optimizer update, so a missing
event would show as a wrong answer), and again on --backend queued (the
executor's CUDA path: stream queues and events run as late as the waits
allow) with and without --cuda-graph, matches the reference run bit for
bit (losses and checkpointed state), on one rank and on four (P = 2).

    check_schedule.py --bin BUILD/bin [--steps 8] [--delay 300]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--delay", type=int, default=300)
    args = ap.parse_args()
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    inspect = os.path.join(args.bin, "strata-inspect")
    work = tempfile.mkdtemp(prefix="schedule-")
    steps = str(args.steps)

    def train(art, name, extra=(), ranks=1):
        log = os.path.join(work, name + ".jsonl")
        ckpt = os.path.join(work, name + "-ckpt")
        cmd = [strata_run, art, "--quiet", "--log", log, "--save-every", steps,
               "--checkpoint-dir", ckpt, "--ssd-dir", work] + list(extra)
        run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + cmd)
        folder = os.path.join(ckpt, "step-%08d" % args.steps)
        states = []
        for r in range(ranks):
            sub = os.path.join(folder, "rank-%05d" % r) if ranks > 1 else folder
            states.append(open(os.path.join(sub, "state.bin"), "rb").read())
        return [json.loads(l)["loss"] for l in open(log)], states

    def peak(art):
        out = run([inspect, art, "--json"], capture_output=True, text=True)
        return json.loads(out.stdout)["memory"]["device"]["planned_peak_bytes"]

    def streams(art):
        out = run([inspect, art, "--trace", os.path.join(work, "t.json")],
                  capture_output=True, text=True)
        events = json.load(open(os.path.join(work, "t.json")))["traceEvents"]
        return {e["tid"] for e in events if e["ph"] == "X"}

    delay = ["--inject-delay", str(args.delay)]
    report = []
    for label, onnx, topo, ranks in (
            ("1 rank", "gpt_tiny.onnx", [], 1),
            ("4 ranks, P = 2", "gpt_tiny_dynamic_batch.onnx",
             ["--batch", "2", "--world", "4", "--gpus-per-node", "2",
              "--partition-group", "2"], 4)):
        model = os.path.join(ROOT, "models", onnx)
        ref_art = os.path.join(work, "ref.strata")
        run([compile_, model, "-o", ref_art, "--steps", steps,
             "--prefetch-depth", "0"] + topo)
        ref = train(ref_art, "ref", ranks=ranks)
        budget = str(int(peak(ref_art) * 0.9))
        variants = [(f"depth {d}", ["--prefetch-depth", str(d)])
                    for d in (0, 1, 4)]
        variants.append(("depth 4, states on host and SSD",
                         ["--prefetch-depth", "4", "--gpu-memory", budget,
                          "--host-memory", "16K", "--ssd-memory", "64M"]))
        variants.append(("recompute always", ["--recompute", "always"]))
        # Below what moving every parameter and optimizer state off the
        # device reaches: only recomputation can close the rest.
        info = json.loads(run([inspect, ref_art, "--json"], capture_output=True,
                              text=True).stdout)
        movable = (info["persistent_bytes"]["parameters"] +
                   info["persistent_bytes"]["optimizer states"])
        tight = int(peak(ref_art) - movable -
                    0.05 * info["memory"]["device"]["activation_arena_bytes"])
        variants.append(("recompute auto under a budget moving states cannot "
                         "meet, depth 4",
                         ["--recompute", "auto", "--prefetch-depth", "4",
                          "--gpu-memory", str(tight)]))
        recomputed = 0
        for name, flags in variants:
            art = os.path.join(work, "v.strata")
            run([compile_, model, "-o", art, "--steps", steps] + flags + topo)
            if "--recompute" in flags:
                info = json.loads(run([inspect, art, "--json"],
                                      capture_output=True, text=True).stdout)
                if not info["recomputed"]:
                    print(f"{label}, {name}: nothing was recomputed")
                    return 1
                recomputed = max(recomputed, len(info["recomputed"]))
            got = train(art, "v", delay, ranks)
            if got != ref:
                print(f"{label}, {name}, --inject-delay {args.delay}: "
                      "differs from the reference run")
                return 1
            # As the CUDA backend runs it: stream queues and events, run as
            # late as the waits allow, and captured into graphs.
            for extra in (["--backend", "queued"],
                          ["--backend", "queued", "--cuda-graph"]):
                if train(art, "q", extra, ranks) != ref:
                    print(f"{label}, {name}, {' '.join(extra)}: differs from "
                          "the reference run")
                    return 1
        report.append(f"{label}: depths 0/1/4, offloading and recomputation "
                      f"(up to {recomputed} ops) under --inject-delay "
                      f"{args.delay}, and on --backend queued with and "
                      f"without --cuda-graph, equal the reference")
    print("; ".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
