#!/usr/bin/env python3
"""scikit-learn's digits as a Strata dataset, and a small CNN for it.

Usage (from the repository root, with Debian's Python):

    /usr/bin/python3 models/digits.py --data-dir DIR     # DIR/train, DIR/test
    /usr/bin/python3 models/digits.py --export OUT.onnx  # the CNN (torch)

--data-dir writes two dataset folders (docs/data.md): `image.npy` (float32
[N, 1, 8, 8], the 0..16 grey levels divided by 16) and `labels.npy` (int64
[N], the digit). The 1797 samples are shuffled with a fixed seed (0); the
first 1437 are `train`, the last 360 `test`. Needs python3-sklearn and
python3-numpy only.

--export writes models.definitions.DigitsCNN (torch.manual_seed(0)) with
input `image` [--batch, 1, 8, 8] and output `logits` [--batch, 10], with
models/export_models.py's settings (opset 17, training mode). The committed
models/digits_cnn.onnx is `--export models/digits_cnn.onnx` (batch 32).
"""

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_SAMPLES = 360


def write_dataset(out_dir):
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = (digits.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    labels = digits.target.astype(np.int64)
    order = np.random.RandomState(0).permutation(len(labels))
    images, labels = images[order], labels[order]
    split = len(labels) - TEST_SAMPLES
    for name, rows in (("train", slice(0, split)),
                       ("test", slice(split, None))):
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        np.save(os.path.join(folder, "image.npy"),
                np.ascontiguousarray(images[rows]))
        np.save(os.path.join(folder, "labels.npy"),
                np.ascontiguousarray(labels[rows]))
        print(f"wrote {folder}: {len(labels[rows])} samples")


def export_cnn(path, batch):
    import torch
    sys.path.insert(0, os.path.dirname(HERE))
    from models.definitions import DigitsCNN
    from models.export_models import export_settings
    torch.manual_seed(0)
    model = DigitsCNN()
    model.train()
    with torch.no_grad():
        torch.onnx.export(model, (torch.zeros(batch, 1, 8, 8),), path,
                          input_names=["image"], output_names=["logits"],
                          **export_settings())
    print(f"wrote {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", help="write DIR/train and DIR/test")
    parser.add_argument("--export", help="write the CNN's ONNX here")
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args(argv)
    if not args.data_dir and not args.export:
        parser.error("give --data-dir DIR and/or --export OUT.onnx")
    if args.data_dir:
        write_dataset(args.data_dir)
    if args.export:
        export_cnn(args.export, args.batch)


if __name__ == "__main__":
    main()
