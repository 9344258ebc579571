#!/usr/bin/env python3
"""Resume on another topology: a checkpoint written by one world size,
partition group, hierarchy, accumulation or pipeline split is resharded by
`--resume` onto another, and the run continues the uninterrupted one-rank
trajectory.

    tests/reliability/check_reshard.py --bin build/bin [--models gpt_tiny]
        [--steps 20] [--only w4p2]

The hub is 8 ranks, 2 per node, partition group 4 with the hierarchical
all-gather. For every other topology X of the matrix (4 ranks P 2, 2 ranks
P 2, one rank, 8 ranks P 8, and 8 ranks in 2 pipeline stages of P 2) it
checks hub -> X and X -> hub: the first topology trains steps 1 .. S/2 and
saves, the second resumes and trains to S. The global batch (micro-batch x
accumulation x data-parallel ranks) is 8 samples throughout; every step's
loss and gradient norm must equal a one-rank run's on the global batch
within 1e-6 (relative).

Then what must be refused or warned about: a checkpoint of another model,
of another optimizer, one whose slice the resuming rank reads is corrupt
(block checksums: only the blocks a rank reads are read and checked), and
a different global batch (allowed, with one warning line).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]
GLOBAL_BATCH = 8
TOLERANCE = 1e-6

# name: (ranks, compile flags); the accumulation keeps the global batch.
TOPOLOGIES = {
    "hub": (8, ["--world", "8", "--gpus-per-node", "2", "--partition-group",
                "4", "--hierarchical", "on"]),
    "w4p2": (4, ["--world", "4", "--gpus-per-node", "2",
                 "--partition-group", "2"]),
    "w2p2": (2, ["--world", "2", "--gpus-per-node", "2",
                 "--partition-group", "2"]),
    "w1": (1, []),
    "w8p8": (8, ["--world", "8", "--gpus-per-node", "2",
                 "--partition-group", "8"]),
    "pipe2": (8, ["--world", "8", "--gpus-per-node", "2",
                  "--partition-group", "2", "--pipeline-stages", "2"]),
}


def lanes(name):
    ranks, flags = TOPOLOGIES[name]
    stages = int(flags[flags.index("--pipeline-stages") + 1]) \
        if "--pipeline-stages" in flags else 1
    return ranks // stages


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def launch(ranks, cmd):
    return (MPIRUN + ["-np", str(ranks)] + cmd) if ranks > 1 else cmd


def read_log(path):
    return [json.loads(line) for line in open(path)]


class Matrix:
    def __init__(self, args, work, model):
        self.args, self.work, self.model = args, work, model
        self.compile = os.path.join(args.bin, "strata-compile")
        self.strata_run = os.path.join(args.bin, "strata-run")
        self.onnx = os.path.join(ROOT, "models", model + "_dynamic_batch.onnx")
        self.artifacts = {}

    def artifact(self, name, extra=()):
        key = (name, tuple(extra))
        if key not in self.artifacts:
            ranks, flags = TOPOLOGIES[name]
            accum = GLOBAL_BATCH // lanes(name)
            out = os.path.join(self.work, "%s-%s%s.strata" % (
                self.model, name, "-".join([""] + [e.strip("-")
                                                   for e in extra])))
            if "--accum" not in extra:
                flags = flags + ["--accum", str(accum)]
            run([self.compile, self.onnx, "--batch", "1", "--steps",
                 str(self.args.steps), "-o", out] + flags + list(extra))
            self.artifacts[key] = out
        return self.artifacts[key]

    def train(self, name, ckpt, log, steps, resume=False, extra=(), env=None):
        ranks = TOPOLOGIES[name][0]
        cmd = [self.artifact(name, extra), "--quiet", "--steps", str(steps),
               "--checkpoint-dir", ckpt, "--log", log, "--timeout", "60"]
        cmd += ["--resume"] if resume else ["--save-every", str(steps)]
        return subprocess.run(launch(ranks, [self.strata_run] + cmd),
                              capture_output=True, text=True, env=env)

    def reference(self):
        ref = os.path.join(self.work, self.model + "-ref.strata")
        run([self.compile, self.onnx, "--batch", str(GLOBAL_BATCH), "--steps",
             str(self.args.steps), "-o", ref])
        log = os.path.join(self.work, self.model + "-ref.jsonl")
        run([self.strata_run, ref, "--quiet", "--log", log])
        return read_log(log)

    def first_half(self, name):
        """`name` trains steps 1 .. S/2 and saves: the checkpoint, the log."""
        folder = os.path.join(self.work, "%s-first-%s" % (self.model, name))
        if not os.path.isdir(folder):
            os.makedirs(folder)
            got = self.train(name, os.path.join(folder, "ckpt"),
                             os.path.join(folder, "log.jsonl"),
                             self.args.steps // 2)
            if got.returncode:
                sys.exit("%s: %s failed:\n%s" % (self.model, name, got.stderr))
        return folder

    def case(self, first, second, ref):
        """first -> second: the losses of both halves against one rank."""
        folder = self.first_half(first)
        case = os.path.join(self.work, "%s-%s-to-%s" % (self.model, first,
                                                         second))
        shutil.copytree(folder, case)
        got = self.train(second, os.path.join(case, "ckpt"),
                         os.path.join(case, "log.jsonl"), self.args.steps,
                         resume=True)
        name = "%s %s -> %s" % (self.model, first, second)
        if got.returncode:
            return "%s: the resume failed:\n%s" % (name, got.stderr)
        if "resharding" not in got.stderr:
            return "%s: no resharding note:\n%s" % (name, got.stderr)
        steps = read_log(os.path.join(case, "log.jsonl"))
        if [s["step"] for s in steps] != list(range(1, self.args.steps + 1)):
            return "%s: logged steps %s" % (name, [s["step"] for s in steps])
        worst = 0.0
        for s, r in zip(steps, ref):
            for key in ("loss", "grad_norm"):
                err = abs(s[key] - r[key]) / abs(r[key])
                worst = max(worst, err)
                if err > TOLERANCE:
                    return ("%s: step %d %s %r, one rank %r (relative %.3g)"
                            % (name, s["step"], key, s[key], r[key], err))
        print("%s: %d steps equal one rank (worst %.2g)" %
              (name, self.args.steps, worst))
        self.worst = max(getattr(self, "worst", 0.0), worst)
        return None

    def refusals(self):
        """Checkpoints that must be refused, and a warned global batch."""
        failures = []
        half = self.args.steps // 2
        hub = self.first_half("hub")

        def resume(name, extra=(), env=None, mutate=None):
            case = tempfile.mkdtemp(dir=self.work, prefix="refusal-")
            shutil.rmtree(case)
            shutil.copytree(hub, case)
            if mutate:
                mutate(os.path.join(case, "ckpt"))
            return self.train(name, os.path.join(case, "ckpt"),
                              os.path.join(case, "log.jsonl"), half + 1,
                              resume=True, extra=extra, env=env)

        def expect(what, got, text, ok=False):
            lines = [l for l in got.stderr.splitlines() if text in l]
            if (got.returncode == 0) != ok or not lines:
                failures.append("%s: expected %s '%s', got rc %d:\n%s" % (
                    what, "a line" if ok else "a refusal", text,
                    got.returncode, got.stderr))
            else:
                print("%s: %s" % (what, lines[0].strip()))

        # Another optimizer: the state means something else.
        expect("another optimizer", resume("w2p2", ["--optimizer", "sgd"]),
               "of a different model or training configuration")
        # Another global batch: allowed, said once.
        got = resume("w2p2", ["--accum", "2"])
        expect("another global batch", got, "warning: the checkpoint was "
               "trained with 8 samples a step, this run takes 4", ok=True)
        if got.stderr.count("warning:") != 1:
            failures.append("the global-batch warning is not one line:\n" +
                            got.stderr)

        # A corrupt byte in the slice a resuming rank reads; a checksum a
        # 4 KiB block, so the ranks read and check only their blocks.
        def corrupt(ckpt):
            step = open(os.path.join(ckpt, "latest")).read().strip()
            path = os.path.join(ckpt, step, "rank-00000", "state.bin")
            with open(path, "r+b") as f:
                f.seek(100)
                byte = f.read(1)
                f.seek(100)
                f.write(bytes([byte[0] ^ 0x10]))
        env = dict(os.environ, STRATA_TEST_CHECKPOINT_BLOCK="4096")
        blocked = tempfile.mkdtemp(dir=self.work, prefix="blocked-")
        got = self.train("hub", os.path.join(blocked, "ckpt"),
                         os.path.join(blocked, "log.jsonl"), half, env=env)
        if got.returncode:
            failures.append("the blocked save failed:\n" + got.stderr)
        else:
            index = open(os.path.join(blocked, "ckpt", "step-%08d" % half,
                                      "rank-00000", "index.json")).read()
            if '"blocks"' not in index:
                failures.append("no block checksums with a 4 KiB block")
            corrupt(os.path.join(blocked, "ckpt"))
            got = self.train("w1", os.path.join(blocked, "ckpt"),
                             os.path.join(blocked, "log.jsonl"), half + 1,
                             resume=True)
            expect("a corrupt slice", got, "is truncated or corrupt")
        return failures


def other_model_refused(args, work, matrices):
    """A checkpoint of another model is refused by its fingerprint."""
    if len(matrices) < 2:
        a = Matrix(args, work, "bert_tiny")
    else:
        a = matrices[1]
    b = matrices[0]
    folder = b.first_half("hub")
    case = os.path.join(work, "other-model")
    shutil.copytree(folder, case)
    got = a.train("w2p2", os.path.join(case, "ckpt"),
                  os.path.join(case, "log.jsonl"), args.steps, resume=True)
    text = "of a different model or training configuration"
    if got.returncode == 0 or text not in got.stderr:
        return ["another model: expected a refusal, got rc %d:\n%s" %
                (got.returncode, got.stderr)]
    print("another model: refused (%s)" % text)
    return []


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", default="gpt_tiny")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--only", default="",
                    help="comma-separated topologies to pair with the hub")
    ap.add_argument("--no-refusals", action="store_true")
    args = ap.parse_args()
    others = [t for t in TOPOLOGIES if t != "hub"]
    if args.only:
        others = [t for t in args.only.split(",") if t in TOPOLOGIES]
    failures = []
    with tempfile.TemporaryDirectory(prefix="reshard-") as work:
        matrices = []
        for model in args.models.split(","):
            m = Matrix(args, work, model)
            matrices.append(m)
            ref = m.reference()
            for other in others:
                for first, second in (("hub", other), (other, "hub")):
                    failure = m.case(first, second, ref)
                    if failure:
                        failures.append(failure)
            if not args.no_refusals:
                failures += m.refusals()
        if not args.no_refusals:
            failures += other_model_refused(args, work, matrices)
    for f in failures:
        print("FAIL: " + f)
    if failures:
        sys.exit(1)
    print("reshard: %d cases pass" % (2 * len(others) * len(matrices)))


if __name__ == "__main__":
    main()
