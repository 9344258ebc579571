#!/usr/bin/env python3
"""ctest digits.cnn: models/train_digits.sh trains the digits CNN from .npy
folders and `strata-run --eval` must score at least 95% on the 360 held-out
digits.

    check_digits.py BIN_DIR SOURCE_DIR

Without python3-sklearn it skips (exit 77) on a developer machine and fails
under CI (CI=true), where tools/install-deps.sh installs it.
"""

import json
import os
import subprocess
import sys
import tempfile

MIN_ACCURACY = 0.95


def main(bin_dir, source_dir):
    probe = subprocess.run(["/usr/bin/python3", "-c", "import sklearn"],
                           capture_output=True)
    if probe.returncode != 0:
        message = "digits.cnn: python3-sklearn is not installed"
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
    steps = [r for r in records if "step" in r]
    evals = [r for r in records if "eval" in r]
    if len(steps) != 300 or len(evals) != 1:
        sys.exit(f"expected 300 step records and one eval record, got "
                 f"{len(steps)} and {len(evals)}")
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
