#!/usr/bin/env python3
"""Merges the per-rank traces of `strata-run --trace OUT.json` (OUT.rank-R.json)
into one Chrome-trace file with one process row per pipeline stage, each
rank of the stage a group of threads in it (its streams, its programs and
its schedule: the F/B/W spans and the idle waits), on one time axis.

    tools/merge-traces.py merged.json /tmp/trace.rank-*.json

The ranks' times are aligned by each trace's `origin_ns` (the host's
monotonic clock), so the axis is common only for ranks of one machine; a
trace from another host keeps its own origin (its rows start at 0).
Without pipeline stages each rank is its own process row.
"""
import json
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, paths = sys.argv[1], sys.argv[2:]
    traces = [json.load(open(p)) for p in paths]
    origins = [t.get("otherData", {}).get("origin_ns") for t in traces]
    known = [o for o in origins if o is not None]
    start = min(known) if known else 0
    events, named = [], set()
    for trace, origin in zip(traces, origins):
        other = trace.get("otherData", {})
        rank = other.get("rank", 0)
        stage = other.get("stage", -1)
        pid = stage if stage >= 0 else rank
        shift = (origin - start) / 1000.0 if origin is not None else 0.0
        if pid not in named:
            named.add(pid)
            events.append({"name": "process_name", "ph": "M", "pid": pid,
                           "tid": 0, "args": {"name": "stage %d" % stage
                                              if stage >= 0 else
                                              "rank %d" % rank}})
            events.append({"name": "process_sort_index", "ph": "M",
                           "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        for e in trace["traceEvents"]:
            if e.get("name") == "process_name":
                continue
            e = dict(e)
            e["pid"] = pid
            # The rank's threads side by side: rank r's tid t is r * 10000 + t.
            e["tid"] = rank * 10000 + e.get("tid", 0)
            if e.get("name") == "thread_name":
                e["args"] = {"name": "rank %d: %s" % (rank, e["args"]["name"])}
            elif "ts" in e:
                e["ts"] = e["ts"] + shift
            events.append(e)
    with open(out, "w") as f:
        json.dump({"displayTimeUnit": "ms",
                   "otherData": {"merged_from": paths},
                   "traceEvents": events}, f)
    print("wrote %s: %d ranks, %d process rows" % (out, len(traces),
                                                   len(named)))


if __name__ == "__main__":
    main()
