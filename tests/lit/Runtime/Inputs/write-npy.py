#!/usr/bin/env python3
"""Writes a .npy file without numpy, for the dataset tests.

    write-npy.py OUT.npy DESCR SHAPE FILL

DESCR is a numpy dtype string ('<f4', '<i8', '|u1', ...), SHAPE a comma list
("100,64"), FILL how element i (row-major) is chosen: `range` (i), `modK`
(i % K), `row-modK` (the sample's row % K, for labels), `constV` (V),
`mod256-skip4` (i % 256, but -100, the ignored label, where i % 4 == 0),
`wave` (a float
pattern in [-1, 1), exact in float16: ((i * 37) % 128) / 64 - 1), `bad-magic` (a file that is
not .npy at all).
"""

import struct
import sys

FORMATS = {"f2": "e", "f4": "f", "f8": "d", "i1": "b", "i2": "h", "i4": "i",
           "i8": "q", "u1": "B", "u2": "H", "u4": "I", "u8": "Q", "b1": "?"}


def main(out, descr, shape_text, fill):
    shape = [int(d) for d in shape_text.split(",") if d]
    count = 1
    for d in shape:
        count *= d
    per_row = count // shape[0] if shape and shape[0] else 1
    if fill == "bad-magic":
        open(out, "wb").write(b"not a numpy file")
        return
    values = []
    for i in range(count):
        if fill == "range":
            v = i
        elif fill == "mod256-skip4":
            v = -100 if i % 4 == 0 else i % 256
        elif fill.startswith("const"):
            v = int(fill[5:])
        elif fill.startswith("row-mod"):
            v = (i // per_row) % int(fill[7:])
        elif fill.startswith("mod"):
            v = i % int(fill[3:])
        elif fill == "wave":
            v = ((i * 37) % 128) / 64.0 - 1.0
        else:
            sys.exit(f"write-npy.py: unknown fill '{fill}'")
        values.append(v)
    dims = "".join(f"{d}, " for d in shape)
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    code = FORMATS[descr[1:]]
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<" + code * count, *values))


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
