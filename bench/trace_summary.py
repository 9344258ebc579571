#!/usr/bin/env python3
"""Time per op kind, summed over one step of a strata-run --trace file.

    python3 bench/trace_summary.py TRACE.json [--top N]

Prints each kind's total time, its share of the summed instruction time and
its count, largest first (compute, copy and collective events; the
micro_step / optimizer_step spans are not instructions and are left out).
"""

import argparse
import collections
import json
import sys


def summarize(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    total = collections.Counter()
    count = collections.Counter()
    for e in events:
        if e.get("ph") != "X" or "cat" not in e:
            continue
        total[e["name"]] += e["dur"]
        count[e["name"]] += 1
    return total, count


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    total, count = summarize(args.trace)
    whole = sum(total.values())
    print(f"summed instruction time {whole / 1000:.2f} ms, "
          f"{sum(count.values())} instructions")
    for name, us in total.most_common(args.top):
        print(f"{name:40s} {us / 1000:9.2f} ms {100 * us / whole:5.1f}% "
              f"x{count[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
