"""Helper of ../narrow-storage.test: compares step logs, activation arenas,
or the all-gathers of @micro_step."""
import json
import re
import sys

if sys.argv[1] == "--gathers":
    def gathers(path):
        text = open(path).read()
        step = text[text.index("func.func @micro_step"):]
        step = step[:step.index("\n  }\n")]
        return step.count("sched.all_gather")
    print("micro_step all-gathers", " ".join(
        str(gathers(p)) for p in sys.argv[2:]))
elif sys.argv[1] == "--arena":
    def arena(path):
        text = open(path).read()
        return int(re.search(r"activations: arena (\d+) bytes", text).group(1))
    print("narrow arena smaller", arena(sys.argv[2]) < arena(sys.argv[3]))
else:
    directory, names = sys.argv[1], sys.argv[2:]
    logs = [[json.loads(line) for line in open(f"{directory}/{n}.jsonl")]
            for n in names]
    keys = [[(s["loss"], s["grad_norm"]) for s in log] for log in logs]
    same = all(k == keys[0] for k in keys) and None not in keys[0][0]
    print("steps", len(keys[0]), "identical", same)
