#!/usr/bin/env python3
"""Offloading activations is exact and shrinks the device arena: each run
below is compiled twice, without and with --offload-activations, and the
two train bit for bit alike (every step's loss and gradient norm as logged,
and every rank's checkpointed state, byte for byte). The offloaded plan
must move bytes (a host activation arena) and plan a smaller device arena.

  - one rank: the committed GPT with accumulation (2 micro-steps), and BERT;
  - the GPT again under --inject-delay, and on the queued backend (the CPU
    run as CUDA runs it: a missing wait shows as a wrong answer), and both
    plans on the CUDA backend's own code under the CUDA emulation, when it
    is built;
  - ZeRO-3: the GPT over 2 ranks, partition group 2 (mpirun -np 2);
  - pipeline stages: the deep GPT in 2 stages, 4 micro-batches, 1F1B
    (mpirun -np 2), also under --inject-delay;
  - the plan of the deep GPT in 4 stages, 8 micro-batches (--emit=memory):
    every stage program moves activations, its device arena shrinks, and
    its lower bound falls by at most the moved bytes live at its old peak
    (#sched.offloaded's at_peak), the arena before the moves being the
    reference compile's.

    check_offload_activations.py --bin BUILD/bin [--steps 6] [--only NAME,...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
MODELS = os.path.join(ROOT, "models")

# name, model, compile flags, ranks (0: no mpirun), strata-run flags of the
# offloaded run, strata-run flags of both runs
RUNS = [
    ("gpt", "gpt_tiny.onnx", ["--accum", "2"], 0, [], []),
    ("bert", "bert_tiny.onnx", [], 0, [], []),
    ("gpt-delay", "gpt_tiny.onnx", [], 0, ["--inject-delay", "200"], []),
    ("gpt-queued", "gpt_tiny.onnx", [], 0, ["--backend", "queued"], []),
    ("gpt-cuda-emulation", "gpt_tiny.onnx", [], 0, [],
     ["--backend", "cuda", "--steps", "2"]),
    ("zero3", "gpt_tiny_dynamic_batch.onnx",
     ["--batch", "4", "--world", "2", "--partition-group", "2"], 2, [], []),
    ("pipeline", "gpt_deep.onnx",
     ["--pipeline-stages", "2", "--accum", "4"], 2, [], []),
    ("pipeline-delay", "gpt_deep.onnx",
     ["--pipeline-stages", "2", "--accum", "4"], 2, ["--inject-delay", "200"],
     []),
]

ARENA = re.compile(r"func\.func @(pipeline_step_\d+)\(.*?sched\.arena = "
                   r"#sched\.arena<size = (\d+), live = (\d+)(?:, host = (\d+))?>"
                   r"(?:, sched\.offloaded = #sched\.offloaded<values = (\d+), "
                   r"bytes = (\d+), arena_before = (\d+), live_before = (\d+), "
                   r"at_peak = (\d+)>)?")


def stage_plans(compile_, flags):
    """Each stage program's arena (and what it offloaded) in --emit=memory."""
    out = run([compile_, os.path.join(MODELS, "gpt_deep.onnx"), "--emit=memory",
               "--pipeline-stages", "4", "--accum", "8"] + flags,
              capture_output=True, text=True).stdout
    plans = {}
    for line in out.splitlines():
        m = ARENA.search(line)
        if m:
            plans[m.group(1)] = [int(g) if g else 0 for g in m.groups()[1:]]
    return plans


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    inspect = os.path.join(args.bin, "strata-inspect")
    work = tempfile.mkdtemp(prefix="offload-activations-")
    steps = str(args.steps)
    failures = 0
    held = {}  # each run's step log: the device bytes each rank laid out

    def train(art, name, ranks, extra, env=None):
        log = os.path.join(work, name + ".jsonl")
        ckpt = os.path.join(work, name + "-ckpt")
        save = extra[extra.index("--steps") + 1] if "--steps" in extra else steps
        cmd = [strata_run, art, "--quiet", "--log", log, "--save-every", save,
               "--checkpoint-dir", ckpt] + extra
        run((MPIRUN + ["-np", str(ranks)] if ranks else []) + cmd, env=env)
        records = [json.loads(line) for line in open(log)]
        trajectory = [(r["loss"], r["grad_norm"]) for r in records]
        held[name] = records[-1].get("device_bytes_by_rank")
        # Every rank's state files, byte for byte.
        folder = os.path.join(ckpt, "step-%08d" % int(save))
        state = {}
        for dirpath, _, files in os.walk(folder):
            for f in files:
                if f.endswith(".bin"):
                    path = os.path.join(dirpath, f)
                    state[os.path.relpath(path, folder)] = open(path, "rb").read()
        return trajectory, state

    def memory(art):
        info = json.loads(run([inspect, art, "--json"], capture_output=True,
                              text=True).stdout)["memory"]
        return (info["device"]["activation_arena_bytes"],
                info["host"]["activation_arena_bytes"])

    emulation = os.path.join(os.path.dirname(os.path.abspath(args.bin)), "lib",
                             "libStrataRuntimeCUDAEmulation.so")
    for name, model, flags, ranks, run_flags, both in RUNS:
        if only and name not in only:
            continue
        env = None
        if "cuda" in both:
            if not os.path.exists(emulation):
                print(f"{name}: skipped, no CUDA emulation at {emulation}")
                continue
            env = dict(os.environ, STRATA_CUDA_BACKEND=emulation)
        onnx = os.path.join(MODELS, model)
        arts = {}
        for variant, extra in (("ref", []), ("off", ["--offload-activations"])):
            art = os.path.join(work, f"{name}-{variant}.strata")
            run([compile_, onnx, "-o", art, "--steps", steps] + flags + extra)
            arts[variant] = art
        (ref_arena, ref_host), (arena, host) = memory(arts["ref"]), memory(arts["off"])
        if ref_host != 0 or host == 0 or arena >= ref_arena:
            print(f"{name}: device arena {ref_arena} -> {arena}, host activation "
                  f"arena {ref_host} -> {host}: nothing was offloaded")
            failures += 1
            continue
        ref, ref_state = train(arts["ref"], name + "-ref", ranks, both, env)
        got, state = train(arts["off"], name + "-off", ranks, run_flags + both,
                           env)
        if got != ref:
            print(f"{name}: losses or gradient norms differ with "
                  f"--offload-activations:\n  {got}\n  {ref}")
            failures += 1
            continue
        if not ref_state or state != ref_state:
            print(f"{name}: the checkpointed state differs with "
                  f"--offload-activations ({sorted(state)} vs {sorted(ref_state)})")
            failures += 1
            continue
        if held[name + "-off"] is not None:
            # A stage's rank lays out what strata-inspect plans for its
            # stage, less than without the flag.
            inspect_text = run([inspect, arts["off"]], capture_output=True,
                               text=True).stdout
            per_stage = [int(b) for b in re.findall(
                r"planned device peak (\d+) bytes", inspect_text)]
            want = [per_stage[r % len(per_stage)] for r in range(ranks)]
            if (held[name + "-off"] != want or
                    any(a >= b for a, b in zip(held[name + "-off"],
                                               held[name + "-ref"]))):
                print(f"{name}: device bytes by rank {held[name + '-off']}, "
                      f"strata-inspect's stages {per_stage}, without the "
                      f"flag {held[name + '-ref']}")
                failures += 1
                continue
        print(f"{name}: {len(got)} steps bit-identical ({len(state)} state "
              f"files); device arena {ref_arena} -> {arena} bytes, host "
              f"activation arena {host} bytes" +
              (f"; device bytes by rank {held[name + '-ref']} -> "
               f"{held[name + '-off']}" if held[name + "-off"] else ""))
    if not only or "budget" in only:
        onnx = os.path.join(MODELS, "gpt_deep.onnx")
        ref_art = os.path.join(work, "budget-ref.strata")
        run([compile_, onnx, "-o", ref_art, "--steps", steps])
        def peak(art):
            info = json.loads(run([inspect, art, "--json"], capture_output=True,
                                  text=True).stdout)["memory"]
            return (info["device"]["planned_peak_bytes"],
                    info["host"]["activation_arena_bytes"])
        whole = peak(ref_art)[0]
        ref, ref_state = train(ref_art, "budget-ref", 0, [])
        moved = {}
        for fraction in (0.5, 0.3):
            budget = int(whole * fraction)
            art = os.path.join(work, f"budget-{fraction}.strata")
            proc = run([compile_, onnx, "-o", art, "--steps", steps,
                        "--gpu-memory", str(budget)], capture_output=True,
                       text=True)
            planned, host = peak(art)
            got, state = train(art, f"budget-{fraction}", 0, [])
            ok = ("offloaded to the host as well" in proc.stderr and
                  planned <= budget and host > 0 and got == ref and
                  state == ref_state)
            print(f"budget {fraction:.0%} of {whole}: planned peak {planned} "
                  f"<= {budget}, host activation arena {host}; "
                  f"{len(got)} steps bit-identical"
                  + ("" if ok else f": WRONG ({proc.stderr.strip()})"))
            failures += not ok
            moved[fraction] = host
        # The looser budget moves less: the largest activations go first.
        if not moved[0.5] < moved[0.3]:
            print(f"budget: 50% moves {moved[0.5]} bytes of activations, 30% "
                  f"{moved[0.3]}: the looser budget should move fewer")
            failures += 1
    if not only or "stages" in only:
        ref = stage_plans(compile_, [])
        off = stage_plans(compile_, ["--offload-activations"])
        if len(ref) != 4 or sorted(ref) != sorted(off):
            print(f"stages: expected 4 stage programs, got {sorted(ref)} and "
                  f"{sorted(off)}")
            failures += 1
        for name in sorted(off):
            size0, live0 = ref[name][:2]
            size, live, host, values, moved, before, live_before, at_peak = off[name]
            ok = (values > 0 and host > 0 and size < size0 and
                  before == size0 and live_before == live0 and
                  0 < live0 - live <= at_peak <= moved)
            print(f"stages: {name}: device arena {size0} -> {size} bytes, lower "
                  f"bound {live0} -> {live} (-{live0 - live}, moved bytes live "
                  f"at the old peak {at_peak}); {values} values, {moved} bytes "
                  f"each way; host arena {host}" + ("" if ok else ": WRONG"))
            failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
