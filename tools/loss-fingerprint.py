#!/usr/bin/env python3
"""Records, or compares against a record, the exact results of a fixed set
of training runs: every step's loss (as strata-run logs it, 9 significant
digits: an f32 round-trips) and a hash of the final checkpointed state of
every rank. A refactor that claims "bit-identical" is checked with it:

    tools/loss-fingerprint.py --bin build/bin --save before.json   # old build
    tools/loss-fingerprint.py --bin build/bin --compare before.json  # new build

The runs cover the PyTorch trajectories (every golden in tests/golden/train,
full batch and 4 accumulated micro-steps), the distributed topologies
(ZeRO-3, MiCS hierarchical with 2-hop sync, global sync, bf16 and fp16 under
mpirun -np 4), the memory tiers (host, SSD, recomputation, prefetch depth
4), the queued backend with and without CUDA graphs, --inject-delay, and
the digits CNN's convolutions.

Not in CI: OpenBLAS picks kernels by CPU, so the numbers are only
comparable between two builds on one machine. About 4 minutes on 2 cores.
"""
import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def dropout_model(work):
    """A two-layer MLP with dropout in training mode, as ONNX text: the runs
    that draw random numbers."""
    path = os.path.join(work, "dropout.onnxtxt")
    state = [12345]

    def values(n):
        out = []
        for _ in range(n):
            state[0] = (state[0] * 1103515245 + 12345) % 2**31
            out.append("%.6f" % ((state[0] / 2**31 - 0.5) * 0.5))
        return ", ".join(out)

    with open(path, "w") as f:
        f.write('<ir_version: 8, opset_import: ["" : 17]>\n'
                "dropout_mlp (float[8,16] x, float[16,32] w1 = {%s}, "
                "float[32,10] w2 = {%s}) => (float[8,10] logits) {\n"
                "  h = MatMul(x, w1)\n  r = Relu(h)\n"
                "  ratio = Constant <value = float {0.25}> ()\n"
                "  on = Constant <value = bool {1}> ()\n"
                "  d = Dropout(r, ratio, on)\n"
                "  logits = MatMul(d, w2)\n}\n" % (values(512), values(320)))
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--save")
    group.add_argument("--compare")
    ap.add_argument("--only", default="", help="substring of the run names")
    args = ap.parse_args()
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    work = tempfile.mkdtemp(prefix="fingerprint-")
    models = os.path.join(ROOT, "models")

    def train(name, onnx, compile_flags, run_flags=(), ranks=1, steps=6,
              data=None):
        art = os.path.join(work, name + ".strata")
        compile_flags = list(compile_flags)
        if "PEAK90" in compile_flags:
            # 90 % of the all-device plan's peak: something must move.
            i = compile_flags.index("--gpu-memory")
            plain = compile_flags[:i] + compile_flags[i + 2:]
            run([compile_, onnx, "-o", art, "--steps", str(steps)] + plain)
            info = json.loads(subprocess.run(
                [os.path.join(args.bin, "strata-inspect"), art, "--json"],
                check=True, capture_output=True, text=True).stdout)
            peak = info["memory"]["device"]["planned_peak_bytes"]
            compile_flags = [str(int(peak * 0.9)) if f == "PEAK90" else f
                             for f in compile_flags]
        run([compile_, onnx, "-o", art, "--steps", str(steps)] +
            list(compile_flags))
        log = os.path.join(work, name + ".jsonl")
        ckpt = os.path.join(work, name + "-ckpt")
        cmd = [strata_run, art, "--quiet", "--steps", str(steps), "--log", log,
               "--save-every", str(steps), "--checkpoint-dir", ckpt,
               "--ssd-dir", work]
        cmd += list(run_flags)
        if data:
            cmd += data
        run((MPIRUN + ["-np", str(ranks)] if ranks > 1 else []) + cmd)
        folder = os.path.join(ckpt, "step-%08d" % steps)
        digest = hashlib.sha256()
        for r in range(ranks):
            sub = os.path.join(folder, "rank-%05d" % r) if ranks > 1 else folder
            digest.update(open(os.path.join(sub, "state.bin"), "rb").read())
        return {"losses": [json.loads(l)["loss"] for l in open(log)],
                "state_sha256": digest.hexdigest()}

    runs = []
    for golden in sorted(glob.glob(os.path.join(ROOT, "tests/golden/train/*/*.json"))):
        g = json.load(open(golden))
        model = os.path.basename(os.path.dirname(golden))
        config = os.path.splitext(os.path.basename(golden))[0]
        data = None
        if g["data"] != "synthetic":
            data = ["--data", os.path.join(ROOT, g["data"]), "--data-dtype",
                    g["data_dtype"], "--seed", str(g["seed"])]
        else:
            data = ["--seed", str(g["seed"])]
        onnx = os.path.join(ROOT, g["onnx"])
        runs.append((f"train.{model}.{config}", onnx, g["compile_flags"], (),
                     1, data))
        manifest = json.load(open(os.path.join(models, "manifest.json")))
        batch = manifest["models"][os.path.basename(g["onnx"])]["inputs"][0][
            "shape"][0]
        runs.append((f"train.{model}.{config}.accum4",
                     onnx.replace(".onnx", "_dynamic_batch.onnx"),
                     g["compile_flags"] + ["--batch", str(batch // 4),
                                           "--accum", "4"], (), 1, data))
    gpt = os.path.join(models, "gpt_tiny.onnx")
    gpt_dyn = os.path.join(models, "gpt_tiny_dynamic_batch.onnx")
    bert_dyn = os.path.join(models, "bert_tiny_dynamic_batch.onnx")
    topo = ["--batch", "2", "--world", "4", "--gpus-per-node", "2"]
    runs += [
        ("dist.gpt.zero3", gpt_dyn, topo + ["--partition-group", "4"], (), 4, None),
        ("dist.gpt.mics.hier.2hop.accum2", gpt_dyn,
         topo + ["--partition-group", "4", "--hierarchical", "on",
                 "--grad-sync", "2hop", "--accum", "2"], (), 4, None),
        ("dist.gpt.P2.global", gpt_dyn,
         topo + ["--partition-group", "2", "--grad-sync", "global"], (), 4, None),
        ("dist.gpt.P4.hier.bf16", gpt_dyn,
         topo + ["--partition-group", "4", "--hierarchical", "on",
                 "--dtype", "bf16"], (), 4, None),
        ("dist.bert.P4.fp16", bert_dyn,
         topo + ["--partition-group", "4", "--dtype", "fp16"], (), 4, None),
        ("dist.gpt.P2.offload", gpt_dyn,
         topo + ["--partition-group", "2", "--gpu-memory", "PEAK90",
                 "--host-memory", "16K", "--ssd-memory", "64M"], (), 4, None),
        ("mem.gpt.host", gpt, ["--gpu-memory", "PEAK90"], (), 1, None),
        ("mem.gpt.ssd", gpt, ["--gpu-memory", "PEAK90", "--host-memory", "16K",
                              "--ssd-memory", "64M"], (), 1, None),
        ("mem.gpt.recompute", gpt, ["--recompute", "always"], (), 1, None),
        ("mem.gpt.depth4.delay", gpt, ["--prefetch-depth", "4"],
         ["--inject-delay", "200"], 1, None),
        ("gpt.bf16", gpt, ["--dtype", "bf16"], (), 1, None),
        ("gpt.bf16.unfused", gpt, ["--dtype", "bf16", "--fuse-elementwise=false"],
         (), 1, None),
        ("gpt.fp16", gpt, ["--dtype", "fp16"], (), 1, None),
        ("gpt.queued", gpt, ["--dtype", "bf16"], ["--backend", "queued"], 1, None),
        ("gpt.queued.graph", gpt, ["--dtype", "bf16"],
         ["--backend", "queued", "--cuda-graph"], 1, None),
        # Convolutions (im2col, Winograd's three kernels, batch norm, max
        # pool) on synthetic batches: the digits CNN, AdamW.
        ("conv.digits_cnn", os.path.join(models, "digits_cnn.onnx"),
         ["--lr", "0.003"], (), 1, ["--seed", "0"]),
        ("mlp.dropout", dropout_model(work), [], (), 1, None),
        ("mlp.dropout.queued.graph", dropout_model(work), [],
         ["--backend", "queued", "--cuda-graph"], 1, None),
    ]
    results = {}
    for name, onnx, cflags, rflags, ranks, data in runs:
        if args.only not in name:
            continue
        if not os.path.exists(onnx):
            print(f"skip {name}: no {os.path.relpath(onnx, ROOT)}")
            continue
        results[name] = train(name, onnx, cflags, rflags, ranks, data=data)
        print(f"{name}: {results[name]['losses'][0]} -> "
              f"{results[name]['losses'][-1]}", flush=True)
    if args.save:
        json.dump(results, open(args.save, "w"), indent=1)
        print(f"saved {len(results)} runs to {args.save}")
        return 0
    reference = json.load(open(args.compare))
    bad = 0
    for name, got in results.items():
        if name not in reference:
            print(f"{name}: not in {args.compare}")
            bad += 1
        elif got != reference[name]:
            print(f"{name}: DIFFERS\n  before {reference[name]}\n  after  {got}")
            bad += 1
    print(f"{len(results) - bad} of {len(results)} runs bit-identical to "
          f"{args.compare}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
