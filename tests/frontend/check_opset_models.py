#!/usr/bin/env python3
"""The opset 18..21 models of models/ import to the graph of their opset-17
originals and train to the same fp32 losses, bit for bit.

For each pair (original, variant) both are imported with --emit=graph (the
graphs must be equal), compiled for a few steps and trained with strata-run
on synthetic data: every step's loss and gradient norm and the final
checkpointed state must be identical. The pairs are the committed fixtures
(models/upgrade_opset.py --fixtures, which must still write exactly them)
and the models not committed at 18+ (the deep and dynamic-batch ones),
upgraded here with the same script.

    check_opset_models.py --bin BUILD/bin [--steps 3]

Exit status 0 when every pair matches, 1 naming every mismatch.
"""
import argparse
import filecmp
import hashlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
MODELS = os.path.join(ROOT, "models")
sys.path.insert(0, MODELS)
import upgrade_opset  # noqa: E402

COMMITTED = [
    ("mlp.onnx", "mlp_opset18.onnx"),
    ("mlp.onnx", "mlp_opset21.onnx"),
    ("mlp_external.onnx", "mlp_external_opset18.onnx"),
    ("mlp_external.onnx", "mlp_external_opset21.onnx"),
    ("gpt_tiny.onnx", "gpt_tiny_opset18.onnx"),
    ("gpt_tiny.onnx", "gpt_tiny_opset21.onnx"),
    ("gpt_tiny.onnx", "gpt_tiny_functions_opset18.onnx"),
    ("bert_tiny.onnx", "bert_tiny_opset18.onnx"),
    ("bert_tiny.onnx", "bert_tiny_opset21.onnx"),
    ("groupnorm_gelu_reference_opset17.onnx", "groupnorm_gelu_opset21.onnx"),
    ("groupnorm_reference_opset17.onnx", "groupnorm_opset18.onnx"),
]

# Upgraded at test time: (original, opset, extra strata-compile flags).
GENERATED = [
    ("gpt_deep.onnx", 21, []),
    ("bert_deep.onnx", 21, []),
    ("mlp_dynamic_batch.onnx", 21, ["--batch", "8"]),
    ("gpt_tiny_dynamic_batch.onnx", 18, ["--batch", "4"]),
    ("bert_tiny_dynamic_batch.onnx", 21, ["--batch", "4"]),
    ("gpt_deep_dynamic_batch.onnx", 18, ["--batch", "2"]),
    ("bert_deep_dynamic_batch.onnx", 18, ["--batch", "2"]),
    ("digits_cnn.onnx", 18, []),
    ("digits_cnn.onnx", 21, []),
]


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd[:2]),
                                       result.stderr.strip()))
    return result.stdout


def train(args, work, model, flags):
    """(graph, per-step (loss, grad_norm), sha256 of the final state)."""
    name = os.path.basename(model).replace(".onnx", "")
    compile_ = os.path.join(args.bin, "strata-compile")
    graph = run([compile_, model, "--emit=graph"] + flags)
    artifact = os.path.join(work, name + ".strata")
    run([compile_, model, "-o", artifact, "--steps", str(args.steps)] + flags)
    log = os.path.join(work, name + ".jsonl")
    checkpoints = os.path.join(work, name + "-ckpt")
    run([os.path.join(args.bin, "strata-run"), artifact, "--quiet", "--steps",
         str(args.steps), "--log", log, "--seed", "0", "--save-every",
         str(args.steps), "--checkpoint-dir", checkpoints])
    steps = [json.loads(line) for line in open(log)]
    state = os.path.join(checkpoints, "step-%08d" % args.steps, "state.bin")
    digest = hashlib.sha256(open(state, "rb").read()).hexdigest()
    return graph, [(s["loss"], s["grad_norm"]) for s in steps], digest


def compare(args, work, original, variant, flags, failures, originals):
    label = "%s vs %s" % (os.path.basename(variant),
                          os.path.basename(original))
    try:
        key = (original, tuple(flags))
        if key not in originals:
            originals[key] = train(args, work, original, flags)
        a = originals[key]
        b = train(args, work, variant, flags)
    except RuntimeError as e:
        failures.append("%s: %s" % (label, e))
        return
    if a[0] != b[0]:
        failures.append("%s: the imported graphs differ" % label)
    if a[1] != b[1]:
        failures.append("%s: losses %s, the original's %s" % (label, b[1],
                                                              a[1]))
    if a[2] != b[2]:
        failures.append("%s: the final states differ" % label)
    print("%s: %d steps, losses %s" % (label, len(a[1]),
                                       " ".join(str(l) for l, _ in b[1])))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="opset-models-")
    failures = []

    # The committed fixtures are what the script writes.
    fresh = os.path.join(work, "fresh")
    os.mkdir(fresh)
    subprocess.run([sys.executable, os.path.join(MODELS, "upgrade_opset.py"),
                    "--fixtures", "--out-dir", fresh], check=True,
                   stdout=subprocess.DEVNULL)
    for _, variant in COMMITTED:
        if not filecmp.cmp(os.path.join(fresh, variant),
                           os.path.join(MODELS, variant), shallow=False):
            failures.append("models/%s is not what upgrade_opset.py "
                            "--fixtures writes" % variant)

    originals = {}  # each original trains once
    for original, variant in COMMITTED:
        compare(args, work, os.path.join(MODELS, original),
                os.path.join(MODELS, variant), [], failures, originals)
    for original, opset, flags in GENERATED:
        variant = os.path.join(work, original.replace(".onnx",
                                                      "_opset%d.onnx" % opset))
        model = upgrade_opset.upgrade(
            upgrade_opset.load(os.path.join(MODELS, original)), opset)
        upgrade_opset.onnx.save(model, variant)
        compare(args, work, os.path.join(MODELS, original), variant, flags,
                failures, originals)

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
