#!/usr/bin/env python3
"""Whether a strata-sim trace has two collectives on one link at once.

strata-sim books each collective on the link it crosses (a calendar per
link class), so an all-gather on `collective` and a reduce-scatter on
`reduce` take turns instead of each getting the whole bandwidth. Prints
the collective streams, the spans and the largest overlap ("none").

    check_link_turns.py TRACE.json
"""
import json, sys
e = json.load(open(sys.argv[1]))['traceEvents']
spans = sorted((v['ts'], v['ts'] + v['dur'], v['tid']) for v in e
               if v['name'] in ('sched.all_gather', 'sched.reduce_scatter', 'sched.all_reduce'))
streams = {t for _, _, t in spans}
worst = 0.0
for i in range(1, len(spans)):
    # every collective against the latest-ending one before it
    end = max(s[1] for s in spans[:i])
    worst = max(worst, end - spans[i][0])
print("collective streams", len(streams), "spans", len(spans), "overlap", "none" if worst <= 1e-3 else '%.3f us' % worst)
