#!/usr/bin/env python3
"""The pipeline bubble, measured against the prediction (not in CI: wall
clock). For p = 2 stages on `mpirun -np 2` (one rank per core on a 2-core
machine), each schedule and m micro-batches: the median over steps 6..30 of
each rank's time waiting for the other stage over its step time (strata-run
--log's "bubble"), beside `strata-compile --emit=pipeline`'s prediction
(its cost model: forward FLOPs per stage, a backward two forwards) and the
equal-stage formula (p-1)/(m+p-1).

    tests/pipeline/measure_bubble.py --bin build/bin [--model gpt_deep]
        [--stage-boundaries 3] [--schedules 1f1b,zb] [--micro-batches 2,4,8]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--model", default="gpt_deep")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--stage-boundaries", default="",
                   help="the cut (strata-compile --stage-boundaries); "
                   "default: the cost model's")
    p.add_argument("--schedules", default="1f1b,zb")
    p.add_argument("--micro-batches", default="2,4,8")
    args = p.parse_args()
    compile_ = os.path.join(args.bin, "strata-compile")
    run = os.path.join(args.bin, "strata-run")
    onnx = os.path.join(ROOT, "models", args.model + ".onnx")
    stages = 2
    print("| schedule | m | measured mean (stage 0, 1) | predicted mean (stage 0, 1) | (p-1)/(m+p-1) | step ms |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bubble-") as work:
        for schedule in args.schedules.split(","):
            for m in [int(x) for x in args.micro_batches.split(",")]:
                common = [onnx, "--pipeline-stages", str(stages),
                          "--pipeline-schedule", schedule, "--accum", str(m)]
                if args.stage_boundaries:
                    common += ["--stage-boundaries", args.stage_boundaries]
                report = subprocess.run(
                    [compile_] + common + ["--emit=pipeline"], check=True,
                    capture_output=True, text=True).stdout
                label = "1f1b" if schedule == "1f1b" else "zb  "
                found = re.search(label + r" mean ([0-9.]+) \(([0-9. ]+)\)",
                                  report)
                art = os.path.join(work, "%s-%d.strata" % (schedule, m))
                subprocess.run([compile_] + common +
                               ["--steps", str(args.steps), "-o", art],
                               check=True)
                log = os.path.join(work, "%s-%d.jsonl" % (schedule, m))
                subprocess.run(["mpirun", "--allow-run-as-root",
                                "--oversubscribe", "-np", str(stages), run,
                                art, "--quiet", "--log", log], check=True)
                steps = [json.loads(line) for line in open(log)][5:]
                ranks = [statistics.median(s["bubble"][r] for s in steps)
                         for r in range(stages)]
                ms = statistics.median(s["step_ms"] for s in steps)
                print("| %s | %d | %.3f (%s) | %s (%s) | %.3f | %.1f |" % (
                    schedule, m, sum(ranks) / stages,
                    ", ".join("%.3f" % b for b in ranks), found.group(1),
                    found.group(2).replace(" ", ", "),
                    (stages - 1) / (m + stages - 1), ms))


if __name__ == "__main__":
    main()
