#!/usr/bin/env python3
"""Offloading is exact: the committed GPT trained with its optimizer states
on the host tier, and again on the SSD tier, matches the all-device plan bit
for bit (losses and the checkpointed state), resumes bit for bit from an SSD
checkpoint, and does the same distributed (mpirun -np 4, P = 2). A budget
nothing can meet fails at compile time with the message that says by how
much and which flags would help.

    check_offload.py --bin BUILD/bin [--steps 12]
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


def losses(path):
    return [json.loads(line)["loss"] for line in open(path)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    inspect = os.path.join(args.bin, "strata-inspect")
    work = tempfile.mkdtemp(prefix="offload-")
    onnx = os.path.join(ROOT, "models", "gpt_tiny.onnx")
    steps = str(args.steps)
    half = str(args.steps // 2)

    def summary(art):
        return json.loads(run([inspect, art, "--json"], capture_output=True,
                              text=True).stdout)

    def train(art, name, extra=(), mpi=None):
        log = os.path.join(work, name + ".jsonl")
        ckpt = os.path.join(work, name + "-ckpt")
        cmd = [strata_run, art, "--quiet", "--log", log, "--save-every", steps,
               "--checkpoint-dir", ckpt, "--ssd-dir", work] + list(extra)
        run((MPIRUN + ["-np", str(mpi)] if mpi else []) + cmd)
        return losses(log), ckpt

    def state(ckpt, rank=None):
        folder = os.path.join(ckpt, "step-%08d" % args.steps)
        if rank is not None:
            folder = os.path.join(folder, "rank-%05d" % rank)
        return open(os.path.join(folder, "state.bin"), "rb").read()

    # All on the device: the reference.
    device = os.path.join(work, "device.strata")
    run([compile_, onnx, "-o", device, "--steps", steps])
    whole = summary(device)["memory"]["device"]["planned_peak_bytes"]
    ref, ref_ckpt = train(device, "device")
    # A budget the states must leave the device for: 90 % of the peak.
    budget = str(int(whole * 0.9))
    checks = []
    for name, flags, tier in (
            ("host", ["--gpu-memory", budget], "host"),
            ("ssd", ["--gpu-memory", budget, "--host-memory", "64K",
                     "--ssd-memory", "64M"], "ssd")):
        art = os.path.join(work, name + ".strata")
        run([compile_, onnx, "-o", art, "--steps", steps] + flags)
        info = summary(art)
        peak = info["memory"]["device"]["planned_peak_bytes"]
        moved = [t for t in info["offloaded"] if t["tier"] == tier]
        if peak > int(budget) or not moved:
            print(f"{name}: planned peak {peak} against a budget of {budget}, "
                  f"{len(moved)} tensors on the {tier} tier")
            return 1
        got, ckpt = train(art, name)
        if got != ref:
            print(f"{name}: losses differ from the all-device plan:", got, ref)
            return 1
        if state(ckpt) != state(ref_ckpt):
            print(f"{name}: the checkpointed state differs from the "
                  "all-device plan's")
            return 1
        checks.append(f"{name}: {len(moved)} states on the {tier} tier, "
                      f"device peak {peak} <= {budget}")
    # Resume from the SSD run's checkpoint at half time: bit for bit.
    ssd = os.path.join(work, "ssd.strata")
    part_log = os.path.join(work, "part.jsonl")
    part = os.path.join(work, "part-ckpt")
    run([strata_run, ssd, "--quiet", "--steps", half, "--log", part_log,
         "--save-every", half, "--checkpoint-dir", part, "--ssd-dir", work])
    run([strata_run, ssd, "--quiet", "--log", part_log, "--save-every", steps,
         "--checkpoint-dir", part, "--resume", "--ssd-dir", work])
    if losses(part_log) != ref or state(part) != state(ref_ckpt):
        print("resuming the SSD run is not bit for bit")
        return 1
    # Distributed, P = 2 over 4 ranks, with and without offloading.
    dyn = os.path.join(ROOT, "models", "gpt_tiny_dynamic_batch.onnx")
    topo = ["--batch", "2", "--world", "4", "--gpus-per-node", "2",
            "--partition-group", "2", "--steps", steps]
    dist = os.path.join(work, "dist.strata")
    run([compile_, dyn, "-o", dist] + topo)
    dist_peak = summary(dist)["memory"]["device"]["planned_peak_bytes"]
    dist_ref, dist_ckpt = train(dist, "dist", mpi=4)
    dist_off = os.path.join(work, "dist-off.strata")
    run([compile_, dyn, "-o", dist_off, "--gpu-memory",
         str(int(dist_peak * 0.9)), "--host-memory", "16K", "--ssd-memory",
         "64M"] + topo)
    if not summary(dist_off)["offloaded"]:
        print("the distributed plan moved nothing off the device")
        return 1
    got, ckpt = train(dist_off, "dist-off", mpi=4)
    if got != dist_ref or any(state(ckpt, r) != state(dist_ckpt, r)
                              for r in range(4)):
        print("distributed with offloading differs:", got, dist_ref)
        return 1
    checks.append("4 ranks, P = 2: states on host and SSD, bit-identical")
    # What cannot fit fails at compile time.
    proc = subprocess.run([compile_, onnx, "-o", os.path.join(work, "x.strata"),
                           "--gpu-memory", "1MiB"], capture_output=True,
                          text=True)
    if (proc.returncode == 0 or "bytes do not fit" not in proc.stderr or
            "--gpu-memory" not in proc.stderr):
        print("an impossible budget was not refused:", proc.stderr)
        return 1
    print(f"offloading is exact over {args.steps} steps: " + "; ".join(checks) +
          "; resuming the SSD run is bit for bit; 1 MiB is refused: "
          + proc.stderr.strip().splitlines()[0][:110] + "...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
