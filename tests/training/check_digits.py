#!/usr/bin/env python3
"""ctest digits.cnn: models/train_digits.sh trains the digits CNN from .npy
folders and `strata-run --eval` must score at least 95% on the 360 held-out
digits; PyTorch, from the same initial weights on the batches the sampling
rule picks (models/strata_data.py's dataset_batch), must log the same first
steps' losses.

    check_digits.py BIN_DIR SOURCE_DIR

Without python3-sklearn or python3-torch it skips (exit 77) on a developer
machine and fails under CI (CI=true), where tools/install-deps.sh installs
them.
"""

import json
import os
import subprocess
import sys
import tempfile

MIN_ACCURACY = 0.95
REFERENCE_STEPS = 20
RTOL = 1e-5

# PyTorch's AdamW with strata-compile's defaults (docs/training.md) on the
# rows strata-run samples, from the committed ONNX's initial weights.
REFERENCE = r"""
import json, sys
import numpy as np, onnx, torch, torch.nn.functional as F
from onnx import numpy_helper
from models.definitions import DigitsCNN
from models.strata_data import dataset_batch
onnx_path, folder, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = DigitsCNN()
init = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
        for i in onnx.load(onnx_path).graph.initializer}
model.load_state_dict(init)
arrays = {"image": np.load(folder + "/image.npy"),
          "labels": np.load(folder + "/labels.npy")}
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.999),
                        eps=1e-8, weight_decay=0.01, foreach=False)
losses = []
for step in range(steps):
    batch = dataset_batch(arrays, 32, step, 0, 1, 0)
    opt.zero_grad()
    loss = F.cross_entropy(model(torch.from_numpy(batch["image"])),
                           torch.from_numpy(batch["labels"]))
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(json.dumps(losses))
"""


def main(bin_dir, source_dir):
    for module, package in (("sklearn", "python3-sklearn"),
                            ("torch", "python3-torch")):
        probe = subprocess.run(["/usr/bin/python3", "-c", "import " + module],
                               capture_output=True)
        if probe.returncode != 0:
            message = f"digits.cnn: {package} is not installed"
            if os.environ.get("CI") == "true":
                sys.exit(message + " (tools/install-deps.sh installs it)")
            print(message + "; skipped")
            sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="strata-digits-") as work:
        run = subprocess.run(
            [os.path.join(source_dir, "models", "train_digits.sh"), work],
            env=dict(os.environ, STRATA_BIN=bin_dir), capture_output=True,
            text=True)
        sys.stdout.write(run.stdout)
        if run.returncode != 0:
            sys.exit("train_digits.sh failed:\n" + run.stderr)
        with open(os.path.join(work, "run.jsonl")) as log:
            records = [json.loads(line) for line in log]
        reference = subprocess.run(
            ["/usr/bin/python3", "-c", REFERENCE,
             os.path.join(source_dir, "models", "digits_cnn.onnx"),
             os.path.join(work, "train"), str(REFERENCE_STEPS)],
            env=dict(os.environ, PYTHONPATH=source_dir), capture_output=True,
            text=True)
        if reference.returncode != 0:
            sys.exit("the PyTorch reference failed:\n" + reference.stderr)
        torch_losses = json.loads(reference.stdout.strip().splitlines()[-1])
    steps = [r for r in records if "step" in r]
    evals = [r for r in records if "eval" in r]
    if len(steps) != 300 or len(evals) != 1:
        sys.exit(f"expected 300 step records and one eval record, got "
                 f"{len(steps)} and {len(evals)}")
    worst = max(abs(r["loss"] - t) / abs(t)
                for r, t in zip(steps, torch_losses))
    if worst > RTOL:
        sys.exit(f"the first {REFERENCE_STEPS} losses differ from PyTorch's "
                 f"by up to {worst:.2e} (relative; allowed {RTOL}):\n"
                 f"  strata:  {[r['loss'] for r in steps[:REFERENCE_STEPS]]}"
                 f"\n  pytorch: {torch_losses}")
    print(f"digits.cnn: the first {REFERENCE_STEPS} losses equal PyTorch's "
          f"within {worst:.2e} relative")
    result = evals[0]
    if result["samples"] != 360 or result["labels"] != 360:
        sys.exit(f"the test split should be 360 samples: {result}")
    if not result["accuracy"] >= MIN_ACCURACY:
        sys.exit(f"test accuracy {result['accuracy']:.4f} is below "
                 f"{MIN_ACCURACY}")
    print(f"digits.cnn: test accuracy {result['accuracy']:.4f} "
          f"(>= {MIN_ACCURACY}), loss {result['loss']:.4f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
