#!/usr/bin/env python3
"""Checks strata-inspect --plot's SVG against the logs it drew.

    check-log-plot.py PLOT.svg LOG.jsonl...

In every panel, each log's polyline must have one point per step, x
increasing with the step, and y = a - b * value (b > 0) for the panel's
column, to within rounding (the points are written to 0.01 px).
"""

import json
import re
import sys

COLUMNS = {"loss (dots: --eval)": "loss", "learning rate": "lr",
           "gradient norm (before clipping)": "grad_norm",
           "samples/s": "samples_per_s", "tokens/s": "tokens_per_s"}


def main(svg_path, *logs):
    svg = open(svg_path).read()
    panels = re.findall(r'<g class="panel" data-panel="([^"]*)">(.*?)</g>',
                        svg, re.S)
    if len(panels) != 4:
        sys.exit(f"expected 4 panels, found {len(panels)}")
    for title, body in panels:
        column = COLUMNS[title]
        lines = dict(re.findall(r'data-log="([^"]*)" points="([^"]*)"', body))
        for log in logs:
            name = log.rsplit("/", 1)[-1]
            records = [json.loads(l) for l in open(log) if '"step"' in l]
            points = [tuple(map(float, p.split(",")))
                      for p in lines[name].split()]
            values = [r[column] for r in records]
            if len(points) != len(values):
                sys.exit(f"{title}/{name}: {len(points)} points for "
                         f"{len(values)} steps")
            xs = [x for x, _ in points]
            if xs != sorted(xs) or len(set(xs)) != len(xs):
                sys.exit(f"{title}/{name}: x does not increase with the step")
            lo, hi = min(range(len(values)), key=values.__getitem__), \
                max(range(len(values)), key=values.__getitem__)
            if values[hi] == values[lo]:
                if len({y for _, y in points}) != 1:
                    sys.exit(f"{title}/{name}: a constant drawn unevenly")
                continue
            b = (points[lo][1] - points[hi][1]) / (values[hi] - values[lo])
            if b <= 0:
                sys.exit(f"{title}/{name}: larger values are not drawn higher")
            for (x, y), v in zip(points, values):
                expected = points[lo][1] - b * (v - values[lo])
                if abs(y - expected) > 0.02:
                    sys.exit(f"{title}/{name}: {v} drawn at y={y}, expected "
                             f"{expected:.2f}")
    print(f"{len(panels)} panels x {len(logs)} logs match their columns")


if __name__ == "__main__":
    main(*sys.argv[1:])
