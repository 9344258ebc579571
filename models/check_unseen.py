#!/usr/bin/env python3
"""Trains modules that are not among the committed models, in PyTorch and
with Strata, on the same synthetic batches (docs/training.md), and prints
the worst per-step relative loss difference. Needs torch and a build:

    /usr/bin/python3 models/check_unseen.py --bin build/bin [--steps 20]

The modules: a CNN (grouped strided conv, batch norm in training mode, max
and average pooling, SiLU, flatten) with AdamW, and a Transformer encoder
layer (nn.TransformerEncoderLayer, learned positions, mean pooling) with
SGD + momentum. Exits 1 if any difference exceeds 1e-5.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from models import strata_data  # noqa: E402


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.fc = nn.Linear(16 * 2 * 2, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.avg_pool2d(F.silu(self.c2(x)), 2)
        return self.fc(torch.flatten(x, 1))


class SmallEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.pos = nn.Parameter(torch.randn(1, 10, 32) * 0.02)
        self.enc = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                              batch_first=True,
                                              activation="gelu")
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 7)

    def forward(self, ids):
        return self.head(self.norm(self.enc(self.emb(ids) + self.pos))
                         .mean(dim=1))


# name, factory, (input, shape, dtype, high), classes, optimizer flags
CASES = [
    ("cnn", SmallCnn, ("image", [4, 3, 16, 16], np.float32, 0), 5,
     ["--optimizer", "adamw", "--lr", "0.001"]),
    ("encoder", SmallEncoder, ("ids", [6, 10], np.int64, 50), 7,
     ["--optimizer", "sgd", "--lr", "0.05", "--momentum", "0.9"]),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="unseen-")
    failed = False
    for name, factory, (inp, shape, dtype, high), classes, flags in CASES:
        torch.manual_seed(0)
        module = factory()
        example = torch.from_numpy(strata_data.synthetic_input(
            inp, shape, dtype, high, 0, 0, 1, 0))
        onnx_path = os.path.join(work, name + ".onnx")
        torch.onnx.export(module, (example,), onnx_path, input_names=[inp],
                          output_names=["logits"], opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        module.train()
        if flags[1] == "adamw":
            opt = torch.optim.AdamW(module.parameters(), lr=1e-3,
                                    foreach=False)
        else:
            opt = torch.optim.SGD(module.parameters(), lr=0.05, momentum=0.9,
                                  foreach=False)
        reference = []
        for s in range(args.steps):
            opt.zero_grad()
            x = torch.from_numpy(strata_data.synthetic_input(
                inp, shape, dtype, high, s, 0, 1, 0))
            y = torch.from_numpy(strata_data.synthetic_input(
                "labels", [shape[0]], np.int64, classes, s, 0, 1, 0))
            loss = F.cross_entropy(module(x), y)
            loss.backward()
            opt.step()
            reference.append(loss.item())
        artifact = os.path.join(work, name + ".strata")
        log = os.path.join(work, name + ".jsonl")
        subprocess.run([os.path.join(args.bin, "strata-compile"), onnx_path,
                        "-o", artifact, "--steps", str(args.steps)] + flags,
                       check=True)
        subprocess.run([os.path.join(args.bin, "strata-run"), artifact,
                        "--quiet", "--log", log], check=True)
        ours = [json.loads(line)["loss"] for line in open(log)]
        worst = max(abs(a - b) / abs(b) for a, b in zip(ours, reference))
        print(f"{name}: {args.steps} steps, worst relative loss difference "
              f"{worst:.3g}")
        failed |= worst > 1e-5
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
