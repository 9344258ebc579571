#!/usr/bin/env python3
"""--auto's kept-probabilities candidates against the same plan without.

    strata-compile ... --auto ... | check_auto_kept.py

Reads --auto's ranked table on standard input. For each fitting row whose
label carries --keep-attention-probabilities and that has a row with the
same label without it (its twin), prints how many there are and whether each is ranked
behind or ahead of its twin (where the cluster's kernels make the
probabilities again anyway, as the CUDA kernels do, keeping them can only
cost).
"""

import re
import sys

FLAG = " --keep-attention-probabilities"


def main():
    rows = {}
    for line in sys.stdin:
        m = re.match(r"^\s*(\d+)\s+(--.*?)\s+([0-9.]+)\s+([0-9.]+)\s+(\d+)\s*$",
                     line)
        if m:
            rows[m.group(2)] = (int(m.group(1)), float(m.group(4)))
    # Round 3 varies the best one knob at a time: a kept best's variants
    # have no twin.
    kept = [label for label in rows
            if FLAG in label and label.replace(FLAG, "") in rows]
    behind = ahead = 0
    for label in kept:
        twin = rows[label.replace(FLAG, "")]
        if rows[label][0] > twin[0]:
            behind += 1
        else:
            ahead += 1
    print("kept probabilities: %d candidates with a twin, %d behind it, "
          "%d ahead" % (len(kept), behind, ahead))


if __name__ == "__main__":
    main()
