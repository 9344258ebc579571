#!/usr/bin/env python3
"""A measured step against its prediction, per op kind.

    compare_traces.py MEASURED.json PREDICTED.json [--top N]

MEASURED is `strata-run --trace` (one rank's file under mpirun), PREDICTED
`strata-sim --trace` of the same artifact. Both are Chrome traces of one
step, one track per stream; this sums the compute stream's (track 0)
spans by name in each and prints, largest measured first, each kind's
total, count and time a call, and where the two differ most. Where the
measured track ends later than its spans add up to, the stream waited
(for another stream, a collective, or the host between programs).
"""

import argparse
import collections
import json
import sys


def compute_stream(path, predicted):
    """Per op kind on track 0: total microseconds and calls; the track's
    summed spans and its end."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    total, calls = collections.Counter(), collections.Counter()
    busy = end = 0.0
    for e in events:
        # strata-run's instructions carry a category; its program spans
        # (micro_step, optimizer_step) do not, and run on their own track.
        if e.get("ph") != "X" or e.get("tid") != 0:
            continue
        if not predicted and "cat" not in e:
            continue
        total[e["name"]] += e["dur"]
        calls[e["name"]] += 1
        busy += e["dur"]
        end = max(end, e["ts"] + e["dur"])
    return total, calls, busy, end


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("measured")
    ap.add_argument("predicted")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    run = compute_stream(args.measured, False)
    sim = compute_stream(args.predicted, True)
    print("compute stream: measured %.3f ms of kernels, ends at %.3f ms; "
          "predicted %.3f ms, ends at %.3f ms" %
          (run[2] / 1e3, run[3] / 1e3, sim[2] / 1e3, sim[3] / 1e3))
    names = sorted(set(run[0]) | set(sim[0]), key=lambda n: -run[0][n])
    print("%-28s %12s %12s %9s %11s %11s" % ("op", "measured ms", "predicted",
                                              "diff ms", "us a call", "predicted"))
    for name in names[:args.top]:
        m, p = run[0][name] / 1e3, sim[0][name] / 1e3
        print("%-28s %8.3f x%-3d %8.3f x%-3d %+9.3f %11.1f %11.1f" %
              (name, m, run[1][name], p, sim[1][name], p - m,
               1e3 * m / max(run[1][name], 1), 1e3 * p / max(sim[1][name], 1)))
    worst = sorted(names, key=lambda n: -abs(sim[0][n] - run[0][n]))[:5]
    print("largest differences: " + ", ".join(
        "%s %+.3f ms" % (n, (sim[0][n] - run[0][n]) / 1e3) for n in worst))
    return 0


if __name__ == "__main__":
    sys.exit(main())
