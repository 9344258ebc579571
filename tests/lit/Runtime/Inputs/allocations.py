"""Helper of ../kernel-threads.test: the heap allocations of every step
after the first, summed over the step logs given."""
import json
import sys

total = 0
for path in sys.argv[1:]:
    steps = [json.loads(line) for line in open(path) if line.strip()]
    total += sum(s["allocations"] for s in steps[1:])
print("allocations after step 1:", total)
