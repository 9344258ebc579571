#!/usr/bin/env python3
"""Imports every op `strata-compile --list-onnx-ops` lists at both ends of
the opset range it states, and one opset below the range where that is
still >= 13 (which must be refused).

The models are the per-op lit tests: tests/lit/Frontend/ops/OP.onnxtxt, or
OP-opsetN.onnxtxt where an op's meaning changes inside its range (the one
with the newest opset not above the target, else the oldest). Each is
parsed with ONNX's Python parser, moved to the target opset in that
opset's forms (models/upgrade_opset.py from 17 to 18+; otherwise only the
opset changes), written as binary ONNX and imported with --emit=graph. The
imported graph (after the importer's cleanup, which drops the constants
an opset-18 axes input leaves behind) must be the one the lit test imports
at its own opset.

    check_op_opsets.py --bin BUILD/bin

Exit status 0 when every op imports at both ends, 1 naming every failure.
"""
import argparse
import copy
import glob
import os
import subprocess
import sys
import tempfile

import onnx
import onnx.parser

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
import upgrade_opset  # noqa: E402

OPS_DIR = os.path.join(ROOT, "tests", "lit", "Frontend", "ops")


def parse(path):
    text = "".join(line for line in open(path)
                   if not line.lstrip().startswith("//"))
    return onnx.parser.parse_model(text)


def at_opset(model, opset):
    """`model` moved to `opset` (forms rewritten when crossing 17 -> 18+)."""
    model = copy.deepcopy(model)
    source = upgrade_opset.default_opset(model)
    if source <= 17 < opset:
        return upgrade_opset.upgrade(model, opset)
    if opset <= 17 < source:
        raise ValueError("no downgrade from opset %d to %d" % (source, opset))
    upgrade_opset.set_opset(model, opset)
    return model


def lit_models(op):
    """(opset, path, model) of each lit test of `op`, oldest first."""
    paths = [os.path.join(OPS_DIR, op + ".onnxtxt")]
    paths += glob.glob(os.path.join(OPS_DIR, op + "-opset*.onnxtxt"))
    found = []
    for path in paths:
        if os.path.exists(path):
            model = parse(path)
            found.append((upgrade_opset.default_opset(model), path, model))
    return sorted(found, key=lambda entry: entry[0])


def source_for(models, opset):
    """The lit test to move to `opset`."""
    older = [entry for entry in models if entry[0] <= opset]
    return older[-1] if older else models[0]


def import_graph(compile_, path):
    result = subprocess.run([compile_, path, "--emit=graph"],
                            capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    args = parser.parse_args()
    compile_ = os.path.join(args.bin, "strata-compile")
    listing = subprocess.run([compile_, "--list-onnx-ops"], check=True,
                             capture_output=True, text=True).stdout.split("\n")
    work = tempfile.mkdtemp(prefix="op-opsets-")
    failures = []
    checked = 0
    for line in filter(None, listing):
        op, span = line.split()
        low, high = (int(v) for v in span.split(".."))
        models = lit_models(op)
        if not models:
            failures.append("%s: no lit test in %s" % (op, OPS_DIR))
            continue
        references = {}
        for _, path, _ in models:
            rc, references[path], err = import_graph(compile_, path)
            if rc != 0:
                failures.append("%s: lit test %s does not import: %s"
                                % (op, path, err))
        targets = [low, high]
        if low > 13:
            targets.append(low - 1)
        for opset in targets:
            source_opset, source, model = source_for(models, opset)
            path = os.path.join(work, "%s-%d.onnx" % (op, opset))
            try:
                onnx.save(at_opset(model, opset), path)
            except ValueError:
                continue  # below the range, across 17/18: nothing to say
            rc, graph, err = import_graph(compile_, path)
            checked += 1
            if opset < low:
                if rc == 0 or "does not exist at opset %d" % opset not in err:
                    failures.append("%s at opset %d (below its range) was "
                                    "not refused as absent: %s"
                                    % (op, opset, err or "it imported"))
            elif rc != 0:
                failures.append("%s at opset %d: %s" % (op, opset, err))
            elif graph != references[source]:
                failures.append("%s at opset %d imports a graph other than "
                                "%s at opset %d" % (op, opset,
                                                    os.path.basename(source),
                                                    source_opset))
    for failure in failures:
        print("FAIL:", failure)
    print("%d ops, %d imports checked, %d failures"
          % (len(list(filter(None, listing))), checked, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
