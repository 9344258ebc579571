#!/usr/bin/env python3
"""Trains a convolutional network with strata-compile + strata-run and with
PyTorch (fp32, AdamW, the synthetic batches of models/strata_data.py) and
compares every step's loss: the check that the CPU backend's Winograd
convolutions (runtime/cpu/kernels/ConvWinograd.cpp) keep PyTorch parity.

    check_conv_parity.py --bin BUILD/bin [--model small_resnet|resnet18]
        [--optimizer sgd|adamw] [--steps 50] [--rtol 1e-5] [--im2col]
        [--verbose]

small_resnet (the ctest, a few seconds): a 3 x 3 stem, a 16-channel block
at 16 x 16 and a 32-channel stride-2 block at 8 x 8, batch 16, so that
both of its 3 x 3 stride-1 layers take the Winograd path and the stem, the
stride-2 and the 1 x 1 convolutions im2col's. resnet18: the CIFAR ResNet-18
of bench/bench_cpu.py at batch 16 (about two minutes; not in CI). --im2col
runs strata-run with STRATA_CONV_WINOGRAD=0 (im2col everywhere), for the
same comparison before the Winograd path.

The default optimizer is SGD at lr 1e-3, momentum 0.9: there both paths
stay within 1e-6 of PyTorch over 50 steps. Under AdamW (lr 1e-3) a
BatchNorm network's losses on these random labels are chaotic: the first
twelve steps agree within 1e-6, then any rounding difference grows, to
about 5e-4 by step 50 for im2col and Winograd alike; ResNet-18 is chaotic
under both optimizers (docs/performance.md, "Third round").

Exit status 0 when every loss is within rtol of PyTorch's, 1 otherwise
(the worst relative error is printed either way).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError:
    message = "check_conv_parity: python3-torch is not installed"
    if os.environ.get("CI") == "true":
        sys.exit(message + " (tools/install-deps.sh installs it)")
    print(message + "; skipped")
    sys.exit(77)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
from models import definitions, strata_data  # noqa: E402
from models.export_models import export_settings  # noqa: E402

LR, WEIGHT_DECAY = 1e-3, 0.01  # adamw
SGD_LR, MOMENTUM = 1e-3, 0.9  # sgd


def small_resnet():
    """Two CIFAR-style basic blocks, 16 and 32 channels, for 16 x 16."""
    return definitions.CifarResNet([(16, 1), (32, 2)], stem=16)


# name -> (module factory, images shape)
MODELS = {
    "small_resnet": (small_resnet, [16, 3, 16, 16]),
    "resnet18": (definitions.ResNet18, [16, 3, 32, 32]),
}


def batches(shape, steps):
    """The images and labels strata-run draws at seed 0, step by step."""
    out = []
    for s in range(steps):
        x = strata_data.synthetic_input("images", shape, np.float32, 0, s, 0,
                                        1, 0)
        y = strata_data.synthetic_input("labels", [shape[0]], np.int64, 10,
                                        s, 0, 1, 0)
        out.append((torch.from_numpy(x), torch.from_numpy(y)))
    return out


def train_pytorch(module, data, optimizer):
    module.train()
    params = list(module.parameters())
    if optimizer == "adamw":
        opt = torch.optim.AdamW(params, lr=LR, weight_decay=WEIGHT_DECAY,
                                foreach=False)
    else:
        opt = torch.optim.SGD(params, lr=SGD_LR, momentum=MOMENTUM,
                              foreach=False)
    losses, norms = [], []
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(module(x), y)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(params, float("inf"))
                     .item())
        opt.step()
        losses.append(loss.item())
    return losses, norms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--model", default="small_resnet", choices=MODELS)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--im2col", action="store_true")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adamw"])
    parser.add_argument("--threads", default="",
                        help="comma-separated thread counts "
                        "(STRATA_NUM_THREADS) to run strata-run at as well: "
                        "every run's losses and gradient norms must be "
                        "bit-identical to the first run's")
    parser.add_argument("--verbose", action="store_true",
                        help="print every step's losses and error")
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    factory, shape = MODELS[args.model]
    torch.manual_seed(0)
    module = factory()
    work = tempfile.mkdtemp(prefix="conv-parity-")
    onnx = os.path.join(work, "model.onnx")
    module.train()
    with torch.no_grad():
        torch.onnx.export(module, (torch.zeros(shape),), onnx,
                          input_names=["images"], output_names=["logits"],
                          **export_settings())
    # The export ran a forward in training mode: BatchNorm's running
    # statistics moved, which no loss reads; the weights are as exported.
    artifact = os.path.join(work, "model.strata")
    if args.optimizer == "adamw":
        flags = ["--optimizer", "adamw", "--lr", repr(LR), "--weight-decay",
                 repr(WEIGHT_DECAY)]
    else:
        flags = ["--optimizer", "sgd", "--lr", repr(SGD_LR), "--momentum",
                 repr(MOMENTUM), "--weight-decay", "0.0"]
    subprocess.run([os.path.join(args.bin, "strata-compile"), onnx, "-o",
                    artifact, "--steps", str(args.steps)] + flags, check=True)
    log = os.path.join(work, "log.jsonl")
    env = dict(os.environ)
    if args.im2col:
        env["STRATA_CONV_WINOGRAD"] = "0"
    def run(log, threads=None):
        run_env = dict(env)
        if threads:
            run_env["STRATA_NUM_THREADS"] = str(threads)
        subprocess.run([os.path.join(args.bin, "strata-run"), artifact,
                        "--quiet", "--backend", "cpu", "--steps",
                        str(args.steps), "--seed", "0", "--log", log],
                       check=True, env=run_env)
        return [json.loads(line) for line in open(log)]

    logged = run(log)
    # The kernels' blocks depend on the shapes alone (ParallelFor.cpp), so
    # the thread count changes no bit of a run.
    for threads in [int(t) for t in args.threads.split(",") if t]:
        other = run(os.path.join(work, f"log-{threads}.jsonl"), threads)
        if len(other) != len(logged):
            sys.exit(f"{threads} threads: {len(other)} steps logged, "
                     f"against {len(logged)}")
        for a, b in zip(logged, other):
            if (a["loss"], a["grad_norm"]) != (b["loss"], b["grad_norm"]):
                sys.exit(f"{threads} threads: step {a['step']} loss "
                         f"{b['loss']!r} grad norm {b['grad_norm']!r}, "
                         f"against {a['loss']!r} and {a['grad_norm']!r}")
        print(f"{threads} threads: {len(other)} steps bit-identical")
    strata = [step["loss"] for step in logged]
    reference, norms = train_pytorch(module, batches(shape, args.steps),
                                     args.optimizer)
    if len(strata) != len(reference):
        sys.exit(f"strata-run logged {len(strata)} steps, expected "
                 f"{len(reference)}")
    errors = [abs(a - b) / max(abs(b), 1e-12)
              for a, b in zip(strata, reference)]
    worst = max(range(len(errors)), key=errors.__getitem__)
    path = "im2col" if args.im2col else "default"
    print(f"{args.model} ({path} convolutions): {len(errors)} steps, worst "
          f"loss relative error {errors[worst]:.3g} at step {worst + 1} "
          f"({strata[worst]!r} against PyTorch {reference[worst]!r}), last "
          f"{strata[-1]:.6f} against {reference[-1]:.6f}; step 1 gradient "
          f"norm {logged[0]['grad_norm']!r} against {norms[0]!r} (relative "
          f"error {abs(logged[0]['grad_norm'] - norms[0]) / norms[0]:.3g})")
    if args.verbose:
        for i, (a, b, e) in enumerate(zip(strata, reference, errors)):
            print(f"step {i + 1}: {a!r} {b!r} {e:.3g}")
    return 0 if errors[worst] <= args.rtol else 1


if __name__ == "__main__":
    sys.exit(main())
