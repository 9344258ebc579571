"""strata-inspect --json of a pipelined artifact: the per-stage figures
agree with the artifact's totals (used by strata-inspect-stages.test)."""
import json
import sys

d = json.load(open(sys.argv[1]))
stages = d["pipeline"]["stages"]
for kind, total in d["traffic"].items():
    for link in (0, 1):
        summed = sum(s["traffic"][kind][link] for s in stages)
        assert abs(summed - total[link]) <= len(stages), (kind, link, summed, total)
arena = d["memory"]["device"]["activation_arena_bytes"]
assert max(s["activation_arena_bytes"] for s in stages) == arena, arena
whole = d["memory"]["device"]["planned_peak_bytes"]
for s in stages:
    assert s["planned_peak_bytes"] == (s["state_bytes"] + s["constant_bytes"] +
                                       s["activation_arena_bytes"])
    assert s["planned_peak_bytes"] < whole, (s["planned_peak_bytes"], whole)
    assert s["bubble_zb"] < s["bubble_1f1b"], s
print("%d stages: traffic adds up, largest arena = the artifact's, peaks "
      "below the artifact's, zb < 1f1b" % len(stages))
