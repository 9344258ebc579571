#!/usr/bin/env python3
"""Layer checkpointing (--recompute layers, and --recompute auto under a
budget) is exact and shrinks the planned device peak. Each run below is
compiled without and with it, and the two train bit for bit alike (every
step's loss and gradient norm as logged, and every rank's checkpointed
state, byte for byte):

  - one rank: the deep GPT (8 blocks), --recompute layers, run on the
    queued backend: every block is checkpointed, and the planned device
    peak falls below --max-ratio (0.6) of the reference's (measured 0.41);
  - ZeRO-3: the deep GPT over 2 ranks, partition group 2 (mpirun -np 2),
    the same under --inject-delay, the parameters gathered again in
    backward (measured 0.46);
  - budgets: the deep GPT with --recompute auto under --gpu-memory at 50%
    and 30% of its reference peak: the plan fits, checkpoints layers,
    strata-compile says which, and strata-inspect prices the recomputation
    (FLOPs a step).

    check_layer_checkpoint.py --bin BUILD/bin [--steps 3] [--only NAME,...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
MODELS = os.path.join(ROOT, "models")

# name, model, compile flags of both, ranks (0: no mpirun), flags of the
# checkpointed compile (a budget is a fraction of the reference's peak),
# strata-run flags of the checkpointed run (the queued backend runs the
# streams as CUDA would; --inject-delay: a missing wait around the gathers
# moved up shows as a wrong answer)
RUNS = [
    ("layers", "gpt_deep.onnx", [], 0, ["--recompute", "layers"],
     ["--backend", "queued"]),
    ("zero3", "gpt_deep_dynamic_batch.onnx",
     ["--batch", "4", "--world", "2", "--partition-group", "2"], 2,
     ["--recompute", "layers"], ["--inject-delay", "200"]),
    ("budget-50", "gpt_deep.onnx", [], 0,
     ["--recompute", "auto", "--gpu-memory", 0.5], []),
    ("budget-30", "gpt_deep.onnx", [], 0,
     ["--recompute", "auto", "--gpu-memory", 0.3], []),
]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--max-ratio", type=float, default=0.6)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    inspect = os.path.join(args.bin, "strata-inspect")
    work = tempfile.mkdtemp(prefix="layer-checkpoint-")
    steps = str(args.steps)
    failures = 0

    def train(art, name, ranks, extra=()):
        log = os.path.join(work, name + ".jsonl")
        ckpt = os.path.join(work, name + "-ckpt")
        cmd = [strata_run, art, "--quiet", "--log", log, "--save-every", steps,
               "--checkpoint-dir", ckpt] + list(extra)
        run((MPIRUN + ["-np", str(ranks)] if ranks else []) + cmd)
        trajectory = [(r["loss"], r["grad_norm"])
                      for r in map(json.loads, open(log))]
        folder = os.path.join(ckpt, "step-%08d" % int(steps))
        state = {}
        for dirpath, _, files in os.walk(folder):
            for f in files:
                if f.endswith(".bin"):
                    path = os.path.join(dirpath, f)
                    state[os.path.relpath(path, folder)] = open(path, "rb").read()
        return trajectory, state

    def info(art):
        return json.loads(run([inspect, art, "--json"], capture_output=True,
                              text=True).stdout)

    references = {}
    for name, model, flags, ranks, extra, run_flags in RUNS:
        if only and name not in only:
            continue
        onnx = os.path.join(MODELS, model)
        key = (model, tuple(flags))
        if key not in references:
            art = os.path.join(work, f"ref-{len(references)}.strata")
            run([compile_, onnx, "-o", art, "--steps", steps] + flags)
            references[key] = (info(art), train(art, f"ref-{len(references)}",
                                                 ranks))
        ref_info, (ref, ref_state) = references[key]
        ref_peak = ref_info["memory"]["device"]["planned_peak_bytes"]
        budget = None
        extra = list(extra)
        for i, flag in enumerate(extra):
            if isinstance(flag, float):
                budget = int(ref_peak * flag)
                extra[i] = str(budget)
        art = os.path.join(work, name + ".strata")
        note = run([compile_, onnx, "-o", art, "--steps", steps] + flags +
                   extra, capture_output=True, text=True).stderr
        got_info = info(art)
        peak = got_info["memory"]["device"]["planned_peak_bytes"]
        layers = got_info["checkpointed_layers"]
        flops = got_info["recomputed_flops_per_step"]
        got, state = train(art, name, ranks, run_flags)
        problems = []
        if got != ref:
            problems.append(f"losses or gradient norms differ:\n  {got}\n  {ref}")
        if not ref_state or state != ref_state:
            problems.append("the checkpointed state differs")
        if not layers or flops <= 0:
            problems.append(f"no layer checkpointed ({layers}, {flops} FLOPs)")
        if budget is None and peak >= args.max_ratio * ref_peak:
            problems.append(f"the peak fell to {peak / ref_peak:.3f} of the "
                            f"reference's, not below {args.max_ratio}")
        if budget is not None and peak > budget:
            problems.append(f"the plan does not fit the budget {budget}")
        if budget is not None and (f"checkpointed {len(layers)} layers"
                                   not in note):
            problems.append(f"strata-compile did not say what it "
                            f"checkpointed: {note.strip()!r}")
        print(f"{name}: {len(got)} steps bit-identical ({len(state)} state "
              f"files); planned device peak {ref_peak} -> {peak} bytes "
              f"({peak / ref_peak:.3f})"
              + (f" under a budget of {budget}" if budget else "")
              + f"; {len(layers)} layers checkpointed, {flops:.4g} FLOPs "
              f"made again a step"
              + "".join("\n  WRONG: " + p for p in problems))
        failures += bool(problems)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
