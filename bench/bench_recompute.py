#!/usr/bin/env python3
"""What recomputation and activation offload cost and save on one model:
the planned device peak, the bytes moved, the forward FLOPs made again,
and the CPU seconds a step, each variant checked bit for bit against the
plan without them.

    /usr/bin/python3 bench/bench_recompute.py --bin build/bin
        [--model gpt_6l] [--steps 4] [--reps 2] [--cache DIR]
        [--variants none,layers,auto-50,auto-30,offload-50,offload-30]

(Debian's Python: it exports the model with torch the first time, as
bench/bench_cpu.py does, into the same --cache.) Variants, by their
strata-compile flags:

  none        no budget, nothing recomputed (the reference)
  layers      --recompute layers
  auto-F      --recompute auto --gpu-memory F% of the reference's peak
              (layers, single ops and, when they are not enough, activation
              offload; strata-compile's notes say which)
  offload-F   --gpu-memory F% alone: state and then activation offload

Each variant is trained twice per repetition, at one kernel thread
(STRATA_NUM_THREADS and OpenBLAS's at 1): for --steps steps and for one;
(CPU seconds of the first - of the second) / (steps - 1) is its CPU time a
step, loading and planning cancelled. Repetitions are interleaved (every
variant, then again) and the table gives the median. On the CPU backend the
host tier is the same RAM, so an offload is a memcpy: offload is cheaper
here than over a PCIe link.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", default="gpt_6l")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--cache", default=os.path.expanduser(
        "~/.cache/strata-bench-cpu"))
    ap.add_argument("--variants",
                    default="none,layers,auto-50,auto-30,offload-50,offload-30")
    args = ap.parse_args()
    import bench_cpu
    onnx = bench_cpu.onnx_path(args.model, args.cache)
    compile_ = os.path.join(args.bin, "strata-compile")
    inspect = os.path.join(args.bin, "strata-inspect")
    strata_run = os.path.join(args.bin, "strata-run")
    env = dict(os.environ)
    for var in ("STRATA_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "OMP_NUM_THREADS"):
        env[var] = "1"
    work = os.path.join(args.cache, "recompute")
    os.makedirs(work, exist_ok=True)

    def info(art):
        return json.loads(subprocess.run([inspect, art, "--json"], check=True,
                                         capture_output=True,
                                         text=True).stdout)

    names = args.variants.split(",")
    arts, notes, plans = {}, {}, {}
    reference_peak = None
    for name in ["none"] + [n for n in names if n != "none"]:
        flags = []
        if name == "layers":
            flags = ["--recompute", "layers"]
        elif name != "none":
            kind, percent = name.split("-")
            budget = int(reference_peak * int(percent) / 100)
            flags = ["--gpu-memory", str(budget)]
            if kind == "auto":
                flags += ["--recompute", "auto"]
        art = os.path.join(work, f"{args.model}-{name}.strata")
        r = subprocess.run([compile_, onnx, "-o", art, "--steps",
                            str(args.steps)] + flags,
                           capture_output=True, text=True)
        notes[name] = r.stderr.strip()
        if r.returncode != 0:
            continue
        arts[name] = art
        plans[name] = info(art)
        if name == "none":
            reference_peak = plans[name]["memory"]["device"]["planned_peak_bytes"]

    def train(name, steps):
        log = os.path.join(work, f"{args.model}-{name}-{steps}.jsonl")
        before = cpu_seconds()
        subprocess.run([strata_run, arts[name], "--quiet", "--log", log,
                        "--steps", str(steps)], check=True, env=env)
        spent = cpu_seconds() - before
        return spent, [(r["loss"], r["grad_norm"])
                       for r in map(json.loads, open(log))]

    per_step = {n: [] for n in arts}
    trajectories = {}
    for rep in range(args.reps):
        for name in arts:
            full, trajectory = train(name, args.steps)
            one, _ = train(name, 1)
            per_step[name].append((full - one) / (args.steps - 1))
            trajectories[name] = trajectory
            print(f"rep {rep} {name}: {per_step[name][-1]:.2f} CPU s a step",
                  file=sys.stderr)

    base = statistics.median(per_step["none"])
    print(f"| variant | planned device peak | host activation arena | "
          f"recomputed GFLOP a step | layers checkpointed | CPU s a step | "
          f"change | losses |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name in arts:
        memory = plans[name]["memory"]
        peak = memory["device"]["planned_peak_bytes"]
        host = memory["host"]["activation_arena_bytes"]
        cpu = statistics.median(per_step[name])
        same = trajectories[name] == trajectories["none"]
        print(f"| {name} | {peak / 1e6:.1f} MB ({peak / reference_peak:.0%}) "
              f"| {host / 1e6:.1f} MB "
              f"| {plans[name]['recomputed_flops_per_step'] / 1e9:.1f} "
              f"| {len(plans[name]['checkpointed_layers'])} "
              f"| {cpu:.2f} | {100 * (cpu / base - 1):+.1f} % "
              f"| {'bit-identical' if same else 'DIFFER'} |")
    for name in notes:
        if notes[name]:
            print(f"\n{name}: {notes[name]}")
    return 0 if all(trajectories[n] == trajectories["none"] for n in arts) else 1


if __name__ == "__main__":
    sys.exit(main())
