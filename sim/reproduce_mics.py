#!/usr/bin/env python3
"""The MiCS paper's five headline results, predicted by strata-sim.

Generates the paper's model shapes weightless (models/generate_model.py),
compiles each configuration plan-only (strata-compile --no-weights), replays
it on the paper's cluster (sim/clusters/p3dn-24xlarge.json,
p4d-24xlarge.json: public specifications, nothing fitted) and prints each
prediction beside the published figure, as the markdown table in
docs/simulation.md.

    sim/reproduce_mics.py --bin build/bin [--work DIR] [--only 1 2 ...]
        [--attention unfused|fused]

About 10 minutes on the 2-core development machine (the compiles).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GENERATE = os.path.join(ROOT, "models", "generate_model.py")
P3DN = os.path.join(HERE, "clusters", "p3dn-24xlarge.json")
P4D = os.path.join(HERE, "clusters", "p4d-24xlarge.json")

# The paper's model shapes (Table 1), and the case study's 100B model, whose
# shape the paper does not give: GPT-shaped, 80 layers of width 10240
# (12 L h^2 = 100.7B), at the paper's sequence length 512.
MODELS = {
    "bert-10b": ["--preset", "bert-10b"],
    "bert-15b": ["--preset", "bert-15b"],
    "gpt-100b": ["gpt", "--layers", "80", "--hidden", "10240", "--heads", "80",
                 "--intermediate", "40960", "--vocab", "50257", "--seq", "512"],
}


class Runner:
    def __init__(self, bin_dir, work, attention):
        self.bin, self.work, self.attention = bin_dir, work, attention
        os.makedirs(work, exist_ok=True)
        self.commands = []

    def model(self, name, batch):
        path = os.path.join(self.work, "%s-b%d.onnx" % (name, batch))
        if not os.path.exists(path):
            cmd = [sys.executable, GENERATE] + MODELS[name] + [
                "--batch", str(batch), "--weightless", "-o", path]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return path

    def predict(self, model, batch, cluster, world, partition, accum,
                hierarchical="auto", grad_sync="2hop"):
        """strata-sim's JSON for one configuration (compiled once)."""
        onnx = self.model(model, batch)
        tag = "%s-b%d-n%d-p%d-s%d-h%s-%s-rn-layers%s" % (
            model, batch, world, partition, accum, hierarchical, grad_sync,
            "-unfused" if self.attention == "unfused" else "")
        art = os.path.join(self.work, tag + ".strata")
        # The paper's runs: fp16 mixed precision with fp16 gradient
        # communication (DeepSpeed's default), activation checkpointing of
        # every layer (torch.utils.checkpoint per block).
        flags = ["--no-weights", "--dtype", "fp16", "--reduce-dtype", "narrow",
                 "--world", str(world),
                 "--gpus-per-node", "8", "--partition-group", str(partition),
                 "--accum", str(accum), "--hierarchical", hierarchical,
                 "--grad-sync", grad_sync, "--recompute", "layers"]
        # The paper's attention (Megatron-LM, PyTorch 1.11, 2021): batched
        # products around a softmax whose [B, H, T, T] probabilities are
        # written out, not one fused kernel (FlashAttention came in 2022).
        if self.attention == "unfused":
            flags.append("--no-fuse-attention")
        self.commands.append("strata-compile %s %s -o %s" % (
            os.path.basename(onnx), " ".join(flags), os.path.basename(art)))
        if not os.path.exists(os.path.join(art, "plan.pb")):
            subprocess.run([os.path.join(self.bin, "strata-compile"), onnx,
                            "-o", art] + flags, check=True,
                           stdout=subprocess.DEVNULL)
        out = subprocess.run([os.path.join(self.bin, "strata-sim"), art,
                              "--cluster", cluster, "--json"], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        return json.loads(out)

    def gather(self, cluster, mib, ranks):
        out = subprocess.run([os.path.join(self.bin, "strata-sim"), "--cluster",
                              cluster, "--all-gather",
                              "%g:%d:8" % (mib, ranks)], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        return float(out.split("(")[-1].split("%")[0]) / 100


def row(what, paper, predicted, unit=""):
    off = (predicted - paper) / paper
    return "| %s | %s%s | %s%s | %+.0f%% |" % (
        what, ("%.3g" % paper), unit, ("%.3g" % predicted), unit, 100 * off)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", default=os.path.expanduser(
        "~/.cache/strata-mics"))
    ap.add_argument("--only", type=int, nargs="*")
    ap.add_argument("--attention", choices=["unfused", "fused"],
                    default="unfused",
                    help="attention as the paper's stack ran it (products "
                    "and a softmax, the default) or as Strata's own plan "
                    "(one graph.attention kernel)")
    args = ap.parse_args()
    r = Runner(os.path.abspath(args.bin), args.work, args.attention)
    started = time.time()
    rows = []
    want = lambda n: not args.only or n in args.only

    # 1. 100B on p4d, micro-batch 16, 4 micro-steps: MiCS (P = 128,
    #    hierarchical) vs ZeRO-3 (P = N, flat) at 128 and 512 GPUs.
    if want(1):
        t = {}
        for n in (128, 512):
            t["mics", n] = r.predict("gpt-100b", 16, P4D, n, 128, 4, "on")
            t["zero3", n] = r.predict("gpt-100b", 16, P4D, n, n, 4, "off")
        tput = lambda k: t[k]["samples_per_s"] / (k[1])
        rows.append(row("1. 100B, 512 A100s: MiCS / ZeRO-3 throughput", 2.74,
                        t["mics", 512]["samples_per_s"] /
                        t["zero3", 512]["samples_per_s"], "x"))
        rows.append(row("1. MiCS weak scaling 128 -> 512 GPUs", 99.4,
                        100 * tput(("mics", 512)) / tput(("mics", 128)), "%"))
        rows.append(row("1. ZeRO-3 weak scaling 128 -> 512 GPUs", 72.0,
                        100 * tput(("zero3", 512)) / tput(("zero3", 128)),
                        "%"))
    # 2. BERT 10B, 64 V100s, micro-batch 8, global batch 8192 (16 micro-
    #    steps): partition group 8 vs 64.
    if want(2):
        p8 = r.predict("bert-10b", 8, P3DN, 64, 8, 16)
        p64 = r.predict("bert-10b", 8, P3DN, 64, 64, 16)
        rows.append(row("2. BERT 10B, 64 V100s: p = 8 / p = 64 throughput",
                        1.6, p8["samples_per_s"] / p64["samples_per_s"], "x"))
    # 3. BERT 15B, p = 16, 16 -> 128 GPUs: hierarchical all-gather on / off
    #    (global batch 8192: 8192 / (8 n) micro-steps).
    if want(3):
        gains = []
        for n in (16, 32, 64, 128):
            s = 8192 // (8 * n)
            on = r.predict("bert-15b", 8, P3DN, n, 16, s, "on")
            off = r.predict("bert-15b", 8, P3DN, n, 16, s, "off")
            gains.append(100 * (on["samples_per_s"] / off["samples_per_s"] - 1))
        rows.append(row("3. BERT 15B, hierarchical gain, least (16-128 GPUs)",
                        30.6, min(gains), "%"))
        rows.append(row("3. BERT 15B, hierarchical gain, most (16-128 GPUs)",
                        38.0, max(gains), "%"))
    # 4. BERT 10B, p = 8: 2-hop vs an all-reduce over every rank each
    #    micro-step, 16 -> 128 GPUs.
    if want(4):
        gains = []
        for n in (16, 32, 64, 128):
            s = 8192 // (8 * n)
            hop = r.predict("bert-10b", 8, P3DN, n, 8, s, "auto", "2hop")
            glob = r.predict("bert-10b", 8, P3DN, n, 8, s, "auto", "global")
            gains.append(100 * (hop["samples_per_s"] / glob["samples_per_s"] - 1))
        rows.append(row("4. BERT 10B p = 8, 2-hop gain, least (16-128 GPUs)",
                        11.0, min(gains), "%"))
        rows.append(row("4. BERT 10B p = 8, 2-hop gain, most (16-128 GPUs)",
                        24.9, max(gains), "%"))
    # 5. A 128 MB all-gather on 2 p3dn nodes: hierarchical / flat time.
    if want(5):
        rows.append(row("5. 128 MB all-gather, 2 p3dn nodes: hierarchical / "
                        "flat time", 72.1, 100 * r.gather(P3DN, 128, 16), "%"))
    print("| result | paper | predicted | off by |")
    print("|---|---:|---:|---:|")
    for line in rows:
        print(line)
    print("\n(%.0f s; artifacts in %s)" % (time.time() - started, args.work))
    print("\ncommands:")
    for c in sorted(set(r.commands)):
        print("    " + c)


if __name__ == "__main__":
    main()
