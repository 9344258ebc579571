#!/usr/bin/env python3
"""Models exported by PyTorch's dynamo exporter train as the committed ones.

    python3 tests/frontend/check_dynamo_export.py --bin BUILD/bin
        [--models gpt_tiny,mlp] [--steps 10] [--report FILE.md]

Since PyTorch 2.9, `torch.onnx.export` exports through torch.export (the
"dynamo" exporter) unless told `dynamo=False`; its graphs differ from the
TorchScript exporter's (opset 18 and later, model-local functions, other
decompositions). Strata's committed models come from the TorchScript
exporter of Debian's PyTorch 1.13, which has no dynamo exporter, so this
check runs where a PyTorch 2.x is (the GPU machines; tools/gpu-session.sh
runs it on their CPUs): it builds each model as models/export_models.py
does (same seed, same weights), exports it with `dynamo=True`, compiles it,
trains it on the CPU backend and compares every step's loss with the
committed TorchScript export's, trained the same way.

Prints a line per model (the strata-compile error a user would see, if
any) and exits 0 when every model imports and matches within --rtol, 1
otherwise, 77 (skipped) where this PyTorch has no dynamo exporter.
"""

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)


def build(name):
    """The model, its example inputs and names, as export_models.py
    builds them for the committed file."""
    import dataclasses
    import torch
    from models.definitions import GPT, GPT_TINY, MLP
    if name == "gpt_tiny":
        torch.manual_seed(0)
        model = GPT(dataclasses.replace(GPT_TINY, dropout=0.0))
        g = torch.Generator().manual_seed(1)
        idx = torch.randint(0, GPT_TINY.vocab_size, (8, 64), generator=g,
                            dtype=torch.long)
        return model, (idx,), ["input_ids"], ["logits"]
    if name == "mlp":
        torch.manual_seed(0)
        model = MLP(64, 128, 10, dropout=0.0)
        g = torch.Generator().manual_seed(1)
        return model, (torch.randn(32, 64, generator=g),), ["features"], ["logits"]
    raise SystemExit(f"check_dynamo_export.py: unknown model {name}")


def onnx_summary(path):
    import onnx
    m = onnx.load(path)
    opset = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")),
                default=0)
    return opset, len(m.graph.node), len(m.functions)


def train(bin_dir, model_path, work, tag, steps):
    artifact = os.path.join(work, tag + ".strata")
    log = os.path.join(work, tag + ".jsonl")
    r = subprocess.run([os.path.join(bin_dir, "strata-compile"), model_path,
                        "-o", artifact, "--steps", str(steps), "--optimizer",
                        "adamw", "--lr", "1e-3"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, "strata-compile: " + (r.stderr or r.stdout).strip()
    r = subprocess.run([os.path.join(bin_dir, "strata-run"), artifact,
                        "--backend", "cpu", "--quiet", "--seed", "0", "--log",
                        log], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return None, "strata-run: " + (r.stderr or r.stdout).strip()
    return [json.loads(line)["loss"] for line in open(log)], None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", default="gpt_tiny,mlp")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--report")
    ap.add_argument("--exporter", default="dynamo",
                    choices=["dynamo", "torchscript"],
                    help="torchscript: export with the committed models' "
                    "settings instead (the check of this script, anywhere: "
                    "the losses must then be the committed models' exactly)")
    args = ap.parse_args()
    bin_dir = os.path.abspath(args.bin)

    import torch
    dynamo = args.exporter == "dynamo"
    if dynamo and "dynamo" not in inspect.signature(torch.onnx.export).parameters:
        print(f"skipped: torch {torch.__version__} has no dynamo exporter")
        return 77
    if not dynamo:
        args.rtol = 0.0
    lines = [f"# {args.exporter} exports against the committed TorchScript "
             "exports",
             "", f"{time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}",
             "", f"| model | {args.exporter} export | imports | worst relative loss "
             f"difference over {args.steps} steps |", "|---|---|---|---|"]
    failed = False
    with tempfile.TemporaryDirectory(prefix="strata-dynamo-") as work:
        for name in args.models.split(","):
            model, inputs, in_names, out_names = build(name)
            path = os.path.join(work, f"{name}_{args.exporter}.onnx")
            try:
                model.train()
                if dynamo:
                    torch.onnx.export(model, inputs, path,
                                      input_names=in_names,
                                      output_names=out_names, dynamo=True,
                                      external_data=False)
                else:
                    from models.export_models import export_settings
                    with torch.no_grad():
                        torch.onnx.export(model, inputs, path,
                                          input_names=in_names,
                                          output_names=out_names,
                                          **export_settings())
                opset, nodes, functions = onnx_summary(path)
                exported = (f"opset {opset}, {nodes} nodes, {functions} "
                            f"functions")
            except Exception as e:  # the exporter itself failed
                row = (f"| {name} | failed: "
                       f"{str(e).strip().splitlines()[0][:200]} | | |")
                lines.append(row)
                print(row, flush=True)
                failed = True
                continue
            mine, error = train(bin_dir, path, work,
                                f"{name}-{args.exporter}", args.steps)
            ref, ref_error = train(bin_dir, os.path.join(ROOT, "models",
                                                         name + ".onnx"),
                                   work, name + "-committed", args.steps)
            if error or ref_error:
                row = f"| {name} | {exported} | no: {(error or ref_error)[:300]} | |"
                failed = True
            else:
                worst = max(abs(a - b) / max(abs(b), 1e-12)
                            for a, b in zip(mine, ref))
                ok = len(mine) == len(ref) and worst <= args.rtol
                failed |= not ok
                row = (f"| {name} | {exported} | yes | {worst:.3g} (bar "
                       f"{args.rtol:g}; loss {ref[0]:.6f} -> {ref[-1]:.6f}) "
                       f"{'' if ok else 'FAIL'} |")
            lines.append(row)
            print(row, flush=True)
    if args.report:
        with open(args.report, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
