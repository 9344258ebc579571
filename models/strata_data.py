#!/usr/bin/env python3
"""The sampling rule of docs/training.md in Python: the batches strata-run
feeds, reproduced bit for bit, so PyTorch can train on the same data.

    python3 models/strata_data.py --self-test
"""
import argparse

import numpy as np

MASK = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for c in data:
        h = ((h ^ c) * 0x100000001b3) & MASK
    return h


def sample_index(step, micro, accum, batch, row):
    """Global index of row `row` of micro-step `micro` of step `step`."""
    return (step * accum + micro) * batch + row


def token_batch(tokens, batch, length, step, micro, accum, seed):
    """(x, labels) int64 [batch, length] windows of a 1-D token array."""
    mix = splitmix64(seed)
    windows = len(tokens) - length
    x = np.empty((batch, length), dtype=np.int64)
    y = np.empty((batch, length), dtype=np.int64)
    for b in range(batch):
        start = splitmix64(mix ^ sample_index(step, micro, accum, batch, b)) \
            % windows
        window = tokens[start:start + length + 1].astype(np.int64)
        x[b], y[b] = window[:-1], window[1:]
    return x, y


def dataset_batch(arrays, batch, step, micro, accum, seed):
    """The batch strata-run --data DIR feeds (docs/data.md): `arrays` maps
    each input (and "labels") to its .npy array, all of N rows; sample k is
    row splitmix64(splitmix64(seed) ^ k) % N of every one."""
    mix = splitmix64(seed)
    n = len(next(iter(arrays.values())))
    rows = [splitmix64(mix ^ sample_index(step, micro, accum, batch, b)) % n
            for b in range(batch)]
    return {name: array[rows] for name, array in arrays.items()}


def synthetic_input(name, shape, dtype, high, step, micro, accum, seed):
    """The synthetic values of one input: ints in [0, high), floats in
    [-1, 1)."""
    batch = shape[0] if shape else 1
    per_sample = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    base = splitmix64(splitmix64(seed) ^ fnv1a64(name.encode()))
    out = []
    for b in range(batch):
        k = sample_index(step, micro, accum, batch, b)
        for e in range(per_sample):
            h = splitmix64(base ^ ((k * per_sample + e) & MASK))
            if np.issubdtype(dtype, np.integer):
                out.append(h % max(high, 1))
            else:
                out.append((h >> 40) * 2.0 ** -24 * 2.0 - 1.0)
    return np.array(out, dtype=dtype).reshape(shape)


def self_test():
    print("splitmix64(0) =", hex(splitmix64(0)))
    print("fnv1a64(b'labels') =", hex(fnv1a64(b"labels")))
    tokens = np.arange(1000, dtype=np.uint16)
    x, y = token_batch(tokens, 2, 4, step=3, micro=1, accum=2, seed=0)
    print("token_batch start rows:", x[:, 0].tolist())
    print("synthetic labels:", synthetic_input("labels", [2, 3], np.int64,
                                                10, 0, 0, 1, 0).tolist())
    rows = dataset_batch({"x": np.arange(100)}, 12, 0, 0, 1, 7)["x"]
    print("dataset rows (N = 100, seed 7):", rows.tolist())
    assert splitmix64(0) == 0xe220a8397b1dcdaf
    # tests/runtime/ArrayDataTest.cpp pins the same rows.
    assert rows.tolist() == [21, 15, 81, 93, 34, 30, 93, 4, 84, 82, 33, 31]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--self-test", action="store_true")
    if parser.parse_args().self_test:
        self_test()
