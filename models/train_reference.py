#!/usr/bin/env python3
"""PyTorch training trajectories that strata-run must reproduce.

For each committed model and optimizer configuration, loads the ONNX
initializers into the PyTorch module, trains it in fp32 on the batches of
docs/training.md's sampling rule (models/strata_data.py) with the same
loss, optimizer, schedule and clipping, and writes the per-step losses,
gradient norms and learning rates to tests/golden/train/<model>/<config>.json
together with the strata-compile / strata-run flags that produce the same
run. tests/training/check_trajectory.py compares a strata-run log with one.

    /usr/bin/python3 models/train_reference.py [--models mlp,gpt_tiny,...]

The eight-layer models (gpt_deep, bert_deep) get the adamw configuration
only, to keep the test suite's time down.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
from models.definitions import (  # noqa: E402
    GPT, GPTConfig, GPT_DEEP, Bert, BertConfig, BERT_DEEP, MLP, ViT, VIT_TINY)
import dataclasses  # noqa: E402
from models.forward_reference import load_onnx_weights  # noqa: E402
from models import strata_data  # noqa: E402

# name -> (module factory, [(input, shape, dtype, high)])
MODELS = {
    "mlp": (lambda: MLP(64, 128, 10, dropout=0.0),
            [("features", [32, 64], np.float32, 0)]),
    "gpt_tiny": (lambda: GPT(GPTConfig(dropout=0.0)),
                 [("input_ids", [8, 64], np.int64, 256)]),
    "bert_tiny": (lambda: Bert(BertConfig(dropout=0.0)),
                  [("input_ids", [8, 32], np.int64, 256),
                   ("token_type_ids", [8, 32], np.int64, 2),
                   ("attention_mask", [8, 32], np.int64, 2)]),
    "gpt_deep": (lambda: GPT(dataclasses.replace(GPT_DEEP, dropout=0.0)),
                 [("input_ids", [8, 32], np.int64, 256)]),
    "bert_deep": (lambda: Bert(dataclasses.replace(BERT_DEEP, dropout=0.0)),
                  [("input_ids", [8, 32], np.int64, 256),
                   ("token_type_ids", [8, 32], np.int64, 2),
                   ("attention_mask", [8, 32], np.int64, 2)]),
    "vit_tiny": (lambda: ViT(VIT_TINY),
                 [("images", [8, 3, 16, 16], np.float32, 0)]),
}

# Models trained with only some of CONFIGS (default: adamw and sgd).
MODEL_CONFIGS = {"gpt_deep": ["adamw"], "bert_deep": ["adamw"],
                 "vit_tiny": ["adamw"]}

# config -> optimizer settings; every run is fp32, seed 0.
CONFIGS = {
    "adamw": dict(optimizer="adamw", lr=1e-3, weight_decay=0.01),
    "sgd": dict(optimizer="sgd", lr=0.05, momentum=0.9, weight_decay=0.0),
    "adamw_cosine_clip": dict(optimizer="adamw", lr=1e-3, weight_decay=0.01,
                              schedule="cosine", warmup=10, clip=1.0),
}


def learning_rate(cfg, step, steps):
    lr, warmup = cfg["lr"], cfg.get("warmup", 0)
    if warmup and step <= warmup:
        return lr * step / warmup
    if cfg.get("schedule", "constant") != "cosine":
        return lr
    progress = min(1.0, (step - warmup) / max(1.0, steps - warmup))
    floor = lr * 0.1
    return floor + (lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def compile_flags(cfg, steps):
    flags = ["--optimizer", cfg["optimizer"], "--lr", repr(cfg["lr"]),
             "--weight-decay", repr(cfg["weight_decay"]), "--steps", str(steps)]
    if cfg["optimizer"] == "sgd":
        flags += ["--momentum", repr(cfg["momentum"])]
    if cfg.get("schedule"):
        flags += ["--lr-schedule", cfg["schedule"]]
    if cfg.get("warmup"):
        flags += ["--warmup-steps", str(cfg["warmup"])]
    if cfg.get("clip"):
        flags += ["--clip-norm", repr(cfg["clip"])]
    return flags


def train(model_name, config_name, steps, data=None, seed=0):
    factory, inputs = MODELS[model_name]
    cfg = CONFIGS[config_name]
    torch.manual_seed(0)
    module = load_onnx_weights(factory(),
                               os.path.join(HERE, model_name + ".onnx"))
    module.train()  # every committed model has dropout 0
    params = list(module.parameters())
    if cfg["optimizer"] == "adamw":
        opt = torch.optim.AdamW(params, lr=cfg["lr"],
                                weight_decay=cfg["weight_decay"],
                                foreach=False)
    else:
        opt = torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg["momentum"],
                              weight_decay=cfg["weight_decay"], foreach=False)
    tokens = None
    if data:
        tokens = np.fromfile(os.path.join(ROOT, data), dtype=np.uint8)
    losses, norms, lrs = [], [], []
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        if tokens is not None:
            (name, shape, _, _), = inputs
            x, y = strata_data.token_batch(tokens, shape[0], shape[1], s, 0, 1,
                                           seed)
            args, labels = [torch.from_numpy(x)], torch.from_numpy(y)
        else:
            args = [torch.from_numpy(strata_data.synthetic_input(
                name, shape, dtype, high, s, 0, 1, seed))
                for name, shape, dtype, high in inputs]
        out = module(*args)
        logits = out[0] if isinstance(out, tuple) else out
        classes = logits.shape[-1]
        if tokens is None:
            labels = torch.from_numpy(strata_data.synthetic_input(
                "labels", list(logits.shape[:-1]), np.int64, classes, s, 0, 1,
                seed))
        loss = F.cross_entropy(logits.reshape(-1, classes), labels.reshape(-1))
        loss.backward()
        with_grad = [p for p in params if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(with_grad,
                                              cfg.get("clip", float("inf")))
        lr = learning_rate(cfg, s + 1, steps)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        losses.append(loss.item())
        norms.append(norm.item())
        lrs.append(lr)
    return {
        "model": model_name, "config": config_name,
        "onnx": f"models/{model_name}.onnx",
        "data": data or "synthetic", "data_dtype": "uint8" if data else "",
        "seed": seed, "steps": steps,
        "compile_flags": compile_flags(cfg, steps),
        "losses": losses, "grad_norms": norms, "lrs": lrs,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--models",
                        default="mlp,gpt_tiny,bert_tiny,gpt_deep,bert_deep,"
                                "vit_tiny")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--out-dir",
                        default=os.path.join(ROOT, "tests", "golden", "train"))
    args = parser.parse_args()
    torch.use_deterministic_algorithms(True)
    runs = []
    for model in args.models.split(","):
        runs += [(model, config, None)
                 for config in MODEL_CONFIGS.get(model, ["adamw", "sgd"])]
        if model == "gpt_tiny":
            runs.append((model, "adamw_cosine_clip",
                         "models/data/python-docs.txt"))
    for model, config, data in runs:
        result = train(model, config, args.steps, data)
        out = os.path.join(args.out_dir, model)
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, config + ".json"), "w") as f:
            json.dump(result, f, indent=1)
        print(f"{model}/{config}: loss {result['losses'][0]:.6f} -> "
              f"{result['losses'][-1]:.6f}")


if __name__ == "__main__":
    main()
