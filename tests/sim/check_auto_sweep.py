#!/usr/bin/env python3
"""strata-compile --auto's choice against a measured sweep on this machine.

Calibrates this machine for N ranks (strata-sim --calibrate under mpirun),
lets `strata-compile --auto --cluster` choose the configuration of the
committed GPT for N ranks, then compiles and runs every configuration --auto
evaluated (the ranked table it printed) with strata-run, --reps times
interleaved, and measures each (the median over its runs of each run's
median step after the first few; labels that compile to the same plan
pool their runs). Passes when the chosen
configuration's measured step is within --tolerance of the fastest measured.

    check_auto_sweep.py --bin BUILD/bin [--ranks 8] [--gpus-per-node 4]
        [--reps 3]
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, **kw)
    if r.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + r.stdout[-3000:])
    return r.stdout


def plan_key(b, art, work):
    """What makes two artifacts the same plan: strata-inspect's summary
    (less the artifact's path and its fingerprint, a hash of the compile
    options, which differ where an option changes nothing) and the planned
    order of every program's instructions on their streams."""
    summary = json.loads(run([b("strata-inspect"), art, "--json"]))
    for key in ("artifact", "fingerprint"):
        summary.pop(key, None)
    trace = os.path.join(work, "planned.json")
    run([b("strata-inspect"), art, "--trace", trace])
    with open(trace) as f:
        planned = f.read()
    return hashlib.sha256((json.dumps(summary, sort_keys=True) +
                           planned).encode()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", default="gpt_tiny_dynamic_batch")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--gpus-per-node", type=int, default=4)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("--reps", type=int, default=3,
                    help="runs of each configuration, interleaved; each "
                    "figure is the median of its runs' median steps")
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)  # mpirun resolves it elsewhere
    b = lambda tool: os.path.join(args.bin, tool)
    work = tempfile.mkdtemp(prefix="strata-auto-sweep-")
    try:
        cluster = os.path.join(work, "cpu.json")
        run(MPIRUN + ["-np", str(args.ranks), b("strata-sim"), "--calibrate",
                      "-o", cluster], cwd=work)
        onnx = os.path.join(MODELS, args.model + ".onnx")
        common = ["--batch", str(args.batch), "--world", str(args.ranks),
                  "--gpus-per-node", str(args.gpus_per_node)]
        out = run([b("strata-compile"), onnx] + common +
                  ["--auto", "--cluster", cluster, "-o",
                   os.path.join(work, "auto.strata")])
        print(out)
        chosen = re.search(r"--auto chose (.*) \(predicted", out).group(1)
        table = re.findall(r"^\s+\d+\s+(--partition-group .*?)\s{2,}[\d.]+\s+"
                           r"([\d.]+)\s+\d+$", out, re.M)
        # Every configuration compiled first, then run --reps times,
        # interleaved (each repetition in another order), so that a burst
        # of load from elsewhere spoils one repetition of several
        # configurations rather than every repetition of one.
        artifacts = {}
        for i, (label, predicted) in enumerate(table):
            art = os.path.join(work, "c%d.strata" % i)
            # A label that changes the micro-batch names its own --batch.
            flags = label.split()
            base = common if "--batch" not in flags else common[2:]
            run([b("strata-compile"), onnx] + base + flags + ["-o", art])
            artifacts[label] = art
        runs = {label: [] for label, _ in table}
        for rep in range(args.reps):
            order = list(table) if rep % 2 == 0 else list(reversed(table))
            for label, _ in order:
                log = os.path.join(work, "run.jsonl")
                run(MPIRUN + ["-np", str(args.ranks), b("strata-run"),
                              artifacts[label], "--steps", str(args.steps),
                              "--log", log, "--print-every", str(args.steps)],
                    cwd=work)
                times = [json.loads(l)["step_ms"] for l in open(log)]
                runs[label].append(statistics.median(times[4:]))
        # Labels that compile to the same plan (the flags differ where
        # they change nothing: a prefetch depth without gathers, a bucket
        # size above the gradients' bytes) are one configuration: their
        # runs are pooled, and the choice is judged among distinct plans.
        plans = {}
        for label, _ in table:
            plans.setdefault(plan_key(b, artifacts[label], work),
                             []).append(label)
        same = {label: group for group in plans.values() for label in group}
        measured = {}
        for label, predicted in table:
            pooled = [t for other in same[label] for t in runs[other]]
            measured[label] = statistics.median(pooled)
            print("%-72s predicted %8.3f ms  measured %8.3f ms  (runs %s)%s" %
                  (label, float(predicted), measured[label],
                   ", ".join("%.2f" % t for t in runs[label]),
                   "" if len(same[label]) == 1 else
                   "  [the plan of %d labels, their %d runs' median]" %
                   (len(same[label]), len(pooled))), flush=True)
        print("%d labels, %d distinct plans" % (len(table), len(plans)))
        fastest = min(measured, key=measured.get)
        ratio = measured[chosen] / measured[fastest]
        print("chosen: %s, measured %.3f ms; fastest measured: %s, %.3f ms "
              "(chosen / fastest %.3f)" % (chosen, measured[chosen], fastest,
                                           measured[fastest], ratio))
        if ratio > 1 + args.tolerance:
            sys.exit("FAILED: --auto's choice is %.0f%% slower than the "
                     "fastest measured" % (100 * (ratio - 1)))
        print("PASSED")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
