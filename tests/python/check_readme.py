#!/usr/bin/env python3
"""ctest python.readme: the README's Python example, run as written, trains
as the command line does.

    check_readme.py BIN_DIR SOURCE_DIR

In a temporary folder: writes the digits dataset (models/digits.py), runs
the first ```python block under README.md's "## From Python" with
PYTHONPATH=python:., then

1. runs strata-run on the artifact it compiled, with the same data and
   --eval, and requires every logged loss, gradient norm and the eval
   record to equal the Python run's;
2. loads the checkpoint into a fresh DigitsCNN with strata.load_weights and
   requires PyTorch's accuracy and mean loss on the test split to be
   strata-run --eval's (accuracy within one sample, loss within 1e-4);
3. requires load_weights into a module of other parameters to fail with
   one clear StrataError;
4. compiles the tiny GPT (a tied embedding and head, a causal-mask buffer
   the artifact folds) with strata.compile, trains 2 steps and requires
   load_weights to give both tied keys the trained embedding.

Without python3-torch or python3-sklearn it skips (exit 77) on a developer
machine and fails under CI (CI=true).
"""

import json
import os
import subprocess
import sys
import tempfile

PYTHON = "/usr/bin/python3"

CHECK_WEIGHTS = r"""
import json, sys
import numpy as np, torch, torch.nn.functional as F
import strata
from models.definitions import DigitsCNN, MLP
model = DigitsCNN()
loaded = strata.load_weights(model, "ckpt")
images = torch.from_numpy(np.load("digits/test/image.npy"))
labels = torch.from_numpy(np.load("digits/test/labels.npy"))
with torch.no_grad():
    logits = model(images)
loss = F.cross_entropy(logits, labels).item()
accuracy = (logits.argmax(1) == labels).double().mean().item()
try:
    strata.load_weights(MLP(), "ckpt")
    refusal = None
except strata.StrataError as e:
    refusal = str(e)
print(json.dumps({"loaded": loaded, "loss": loss, "accuracy": accuracy,
                  "refusal": refusal}))
"""

CHECK_TIED = r"""
import json, sys, torch
import strata
from models.definitions import GPT, GPT_TINY
torch.manual_seed(0)
model = GPT(GPT_TINY)
before = model.transformer.wte.weight.detach().clone()
artifact = strata.compile(model, torch.zeros(4, 64, dtype=torch.long),
                          "gpt.strata", steps=2, input_names=["input_ids"],
                          output_names=["logits"])
steps = list(strata.train(artifact, data=sys.argv[1], data_dtype="uint8",
                          checkpoint_dir="gpt-ckpt"))
loaded = strata.load_weights(model, "gpt-ckpt", artifact)
wte, head = model.transformer.wte.weight, model.lm_head.weight
print(json.dumps({"steps": len(steps), "loaded": len(loaded),
                  "tied": bool(torch.equal(wte, head)),
                  "changed": not torch.equal(wte, before)}))
"""


def readme_example(source_dir):
    text = open(os.path.join(source_dir, "README.md")).read()
    section = text[text.index("## From Python"):]
    start = section.index("```python\n") + len("```python\n")
    return section[start:section.index("```", start)]


def records(path):
    return [json.loads(line) for line in open(path)]


def main(bin_dir, source_dir):
    for module, package in (("torch", "python3-torch"),
                            ("sklearn", "python3-sklearn")):
        probe = subprocess.run([PYTHON, "-c", "import " + module],
                               capture_output=True)
        if probe.returncode != 0:
            message = f"python.readme: {package} is not installed"
            if os.environ.get("CI") == "true":
                sys.exit(message + " (tools/install-deps.sh installs it)")
            print(message + "; skipped")
            sys.exit(77)
    example = readme_example(source_dir)
    lines = example.strip("\n").splitlines()
    if len(lines) > 10:
        sys.exit(f"the README's Python example is {len(lines)} lines, not "
                 f"at most 10")
    env = dict(os.environ, STRATA_BIN=bin_dir,
               PYTHONPATH=os.pathsep.join(
                   [os.path.join(source_dir, "python"), source_dir]))
    with tempfile.TemporaryDirectory(prefix="strata-readme-") as work:
        subprocess.run([PYTHON, os.path.join(source_dir, "models",
                                             "digits.py"),
                        "--data-dir", "digits"], cwd=work, check=True,
                       capture_output=True)
        run = subprocess.run([PYTHON, "-c", example], cwd=work, env=env,
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit("the README example failed:\n" + run.stderr)
        printed = run.stdout.strip().splitlines()
        python_log = records(os.path.join(work, "run.jsonl"))
        if len(printed) != len(python_log) or len(python_log) != 301:
            sys.exit(f"expected 300 step records and an eval record, "
                     f"printed {len(printed)}, logged {len(python_log)}")
        cli = subprocess.run(
            [os.path.join(bin_dir, "strata-run"), "cnn.strata", "--data",
             "digits/train", "--eval", "digits/test", "--log", "cli.jsonl",
             "--quiet"], cwd=work, capture_output=True, text=True)
        if cli.returncode != 0:
            sys.exit("strata-run failed:\n" + cli.stderr)
        cli_log = records(os.path.join(work, "cli.jsonl"))
        key = lambda r: (r.get("step"), r["loss"], r.get("grad_norm"),
                         r.get("accuracy"))
        if [key(r) for r in python_log] != [key(r) for r in cli_log]:
            sys.exit("the Python run's log differs from strata-run's")
        result = python_log[-1]
        print(f"python.readme: 300 steps, losses equal to strata-run's "
              f"(last {python_log[-2]['loss']}); eval accuracy "
              f"{result['accuracy']:.4f}, loss {result['loss']:.6f}")

        check = subprocess.run([PYTHON, "-c", CHECK_WEIGHTS], cwd=work,
                               env=env, capture_output=True, text=True)
        if check.returncode != 0:
            sys.exit("loading the weights failed:\n" + check.stderr)
        got = json.loads(check.stdout)
        if len(got["loaded"]) != 6:
            sys.exit(f"load_weights loaded {got['loaded']}, not the CNN's 6 "
                     f"tensors")
        if abs(got["accuracy"] - result["accuracy"]) > 1.5 / 360 or \
                abs(got["loss"] - result["loss"]) > 1e-4 * result["loss"]:
            sys.exit(f"PyTorch with the loaded weights scores "
                     f"{got['accuracy']:.4f} / {got['loss']:.6f}, strata-run "
                     f"--eval {result['accuracy']:.4f} / "
                     f"{result['loss']:.6f}")
        print(f"load_weights: PyTorch scores the test split "
              f"{got['accuracy']:.4f} / loss {got['loss']:.6f}")
        if not got["refusal"] or "\n" in got["refusal"]:
            sys.exit(f"load_weights into an MLP should refuse in one line: "
                     f"{got['refusal']!r}")
        print(f"load_weights into an MLP: {got['refusal']}")

        text = os.path.join(source_dir, "models", "data", "python-docs.txt")
        tied = subprocess.run([PYTHON, "-c", CHECK_TIED, text], cwd=work,
                              env=env, capture_output=True, text=True)
        if tied.returncode != 0:
            sys.exit("the tied GPT failed:\n" + tied.stderr)
        got = json.loads(tied.stdout.strip().splitlines()[-1])
        if got != {"steps": 2, "loaded": got["loaded"], "tied": True,
                   "changed": True}:
            sys.exit(f"the tied GPT's weights did not load as trained: {got}")
        print(f"load_weights into the tied GPT: {got['loaded']} keys, the "
              f"embedding and head equal and trained")


if __name__ == "__main__":
    main(*sys.argv[1:])
