#!/usr/bin/env python3
"""strata-sim against strata-run on the CUDA backend.

Calibrates GPU 0 with `strata-sim --calibrate --backend cuda`
(microbenchmarks of the CUDA backend's kernels only), then runs each
artifact with `strata-run --backend cuda` (the median step after the first
two) and predicts it with strata-sim on the calibrated file. Fails when a
prediction misses the measured step by more than --tolerance.

    check_cuda_calibration.py --bin BUILD/bin [--models gpt_tiny]
        [--dtypes fp32 bf16] [--artifact A.strata ...] [--cluster FILE]
        [--steps 6] [--tolerance 0.15] [--seconds 0.05] [--rounds 3]
        [--report OUT.md] [--compare]

--models compiles the committed models (one artifact a dtype); --artifact
adds compiled ones (a GPU session's GPT sizes). --cluster predicts from a
file already calibrated instead of calibrating. Without a GPU the CUDA
emulation (STRATA_CUDA_BACKEND=.../libStrataRuntimeCUDAEmulation.so) is
the device: the backend's own kernels on the CPU, slow, but calibrated and
run alike, which is what the check needs.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

from check_calibration import MODELS, predict, run

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(bin_dir, art, steps, work):
    """The median step of one launch after the first two (seconds)."""
    log = os.path.join(work, os.path.basename(art) + ".jsonl")
    if os.path.exists(log):
        os.remove(log)
    run([os.path.join(bin_dir, "strata-run"), art, "--backend", "cuda",
         "--steps", str(steps), "--log", log, "--quiet"])
    times = [json.loads(line)["step_ms"] for line in open(log)]
    return statistics.median(times[2:] or times) / 1e3


def compare(bin_dir, art, cluster, work):
    """compare_traces.py's table of one traced step of `art` against its
    predicted timeline."""
    base = os.path.join(work, os.path.basename(art))
    run([os.path.join(bin_dir, "strata-run"), art, "--backend", "cuda",
         "--quiet", "--steps", "3", "--seed", "0", "--trace",
         base + ".run.json"])
    run([os.path.join(bin_dir, "strata-sim"), art, "--cluster", cluster,
         "--trace", base + ".sim.json"])
    return run([sys.executable, os.path.join(HERE, "compare_traces.py"),
                base + ".run.json", base + ".sim.json", "--top", "25"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", nargs="*", default=["gpt_tiny"])
    ap.add_argument("--dtypes", nargs="*", default=["fp32", "bf16"])
    ap.add_argument("--artifact", nargs="*", default=[])
    ap.add_argument("--cluster", help="a calibrated file (else calibrate)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--seconds", default="0.05",
                    help="strata-sim --calibrate --seconds")
    ap.add_argument("--rounds", default="3",
                    help="strata-sim --calibrate --rounds")
    ap.add_argument("--report", help="also write the table here (markdown)")
    ap.add_argument("--work", help="keep the artifacts and logs here")
    ap.add_argument("--compare", action="store_true",
                    help="also trace one step of each with strata-run and "
                         "strata-sim and print them side by side per op "
                         "kind (compare_traces.py)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="strata-cuda-cal-") as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        cluster = args.cluster
        if not cluster:
            cluster = os.path.join(work, "cuda-calibrated.json")
            cmd = [os.path.join(args.bin, "strata-sim"), "--calibrate",
                   "--backend", "cuda", "--seconds", args.seconds,
                   "--rounds", args.rounds, "-o", cluster]
            print("$ " + " ".join(cmd), flush=True)
            run(cmd)
        with open(cluster) as f:
            name = json.load(f).get("name", cluster)
        arts = []
        for model in args.models:
            onnx = os.path.join(MODELS, model + ".onnx")
            for dtype in args.dtypes:
                art = os.path.join(work, "%s-%s.strata" % (model, dtype))
                cmd = [os.path.join(args.bin, "strata-compile"), onnx, "-o",
                       art, "--dtype", dtype]
                print("$ " + " ".join(cmd), flush=True)
                run(cmd)
                arts.append(("%s %s" % (model, dtype), art))
        arts += [(os.path.basename(a), a) for a in args.artifact]

        rows, worst = [], 0.0
        for label, art in arts:
            measured = measure(args.bin, art, args.steps, work)
            predicted = predict(args.bin, art, cluster)
            error = predicted / measured - 1
            worst = max(worst, abs(error))
            rows.append((label, measured, predicted, error))
            print("%-28s measured %10.3f ms  predicted %10.3f ms  %+6.1f%%" %
                  (label, measured * 1e3, predicted * 1e3, error * 100),
                  flush=True)
            if args.compare:
                print(compare(args.bin, art, cluster, work), flush=True)
        table = ["calibrated on: " + name, "",
                 "| artifact | measured ms | predicted ms | error |",
                 "|---|---:|---:|---:|"]
        table += ["| %s | %.3f | %.3f | %+.1f%% |" %
                  (label, m * 1e3, p * 1e3, e * 100)
                  for label, m, p, e in rows]
        if args.report:
            with open(args.report, "w") as f:
                f.write("\n".join(table) + "\n")
        bad = [r for r in rows if abs(r[3]) > args.tolerance]
        if bad:
            print("FAILED: %d of %d predictions off by more than %.0f%%: %s" %
                  (len(bad), len(rows), args.tolerance * 100,
                   ", ".join(r[0] for r in bad)))
            return 1
        print("ok: %d predictions within %.0f%% (worst %.1f%%)" %
              (len(rows), args.tolerance * 100, worst * 100))
        return 0


if __name__ == "__main__":
    sys.exit(main())
