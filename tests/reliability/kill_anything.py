#!/usr/bin/env python3
"""Kill anything: a 4-rank run (ZeRO-3 over pairs, checkpoints every 2
steps) is sent SIGKILL, SIGTERM or SIGSTOP on a random rank at a random
moment. The job must end within --timeout + 5 s, and `--resume` must then
reproduce the uninterrupted run's losses exactly.

    tests/reliability/kill_anything.py --bin build/bin [--cases 50] [--seed 1]

Each case draws its signal (in turn), its rank and its moment (uniform
over three quarters of the uninterrupted run). CI runs one case of each signal
(--cases 3); the sweep of docs/reliability.md runs 150.
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4"]
TIMEOUT = 5


def losses(path):
    out = {}
    for line in open(path):
        step = json.loads(line)
        out[step["step"]] = step["loss"]
    return out


def ranks_of(strata_run, marker):
    """The pids of the ranks: the strata-run processes whose command line
    starts with `strata_run` and holds `marker` (the case's checkpoint
    folder); not mpirun, whose command line holds both too."""
    found = subprocess.run(["pgrep", "-f", "^" + strata_run + " .*" + marker],
                           capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--cases", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    with tempfile.TemporaryDirectory(prefix="kill-anything-") as work:
        art = os.path.join(work, "gpt.strata")
        subprocess.run([compile_, os.path.join(ROOT, "models",
                                               "gpt_tiny_dynamic_batch.onnx"),
                        "--batch", "1", "-o", art, "--world", "4",
                        "--gpus-per-node", "2", "--partition-group", "2",
                        "--accum", "2", "--steps", "16"], check=True)
        full = os.path.join(work, "full.jsonl")
        start = time.monotonic()
        subprocess.run(MPIRUN + [strata_run, art, "--quiet", "--log", full,
                                 "--timeout", str(TIMEOUT)], check=True,
                       timeout=300)
        duration = time.monotonic() - start
        reference = losses(full)
        failures = 0
        # A rank stopped before MPI starts: the others' MPI_Init waits for
        # it with no timeout of MPI's own (this hung once); the setup
        # watchdog ends them after --timeout.
        start = time.monotonic()
        stopped = subprocess.run(
            MPIRUN + ["bash", "-c",
                      '[ "$OMPI_COMM_WORLD_RANK" = 2 ] && kill -STOP $$; '
                      'exec "$@"', "rank", strata_run, art, "--quiet",
                      "--steps", "2", "--timeout", str(TIMEOUT)],
            capture_output=True, text=True, timeout=120)
        ended = time.monotonic() - start
        ok = stopped.returncode != 0 and ended <= TIMEOUT + 5 and \
            "starting MPI and the communicators did not complete" in \
            stopped.stderr
        failures += not ok
        print("a rank stopped before MPI starts: %s in %.1f s (exit %d)" % (
            "ended" if ok else "FAILED", ended, stopped.returncode))
        signals = [signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP]
        for case in range(args.cases):
            sig = signals[case % 3]
            ckpt = os.path.join(work, "ckpt-%d" % case)
            log = os.path.join(work, "run-%d.jsonl" % case)
            cmd = MPIRUN + [strata_run, art, "--quiet", "--log", log,
                            "--timeout", str(TIMEOUT), "--save-every", "2",
                            "--checkpoint-dir", ckpt]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            at = rng.uniform(0.2, 0.75 * duration)
            time.sleep(at)
            pids = ranks_of(strata_run, ckpt)
            victim = rng.choice(pids) if pids else None
            sent = time.monotonic()
            if victim is not None:
                try:
                    os.kill(victim, sig)
                except ProcessLookupError:
                    victim = None
            try:
                _, err = proc.communicate(timeout=TIMEOUT + 5 + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
                print("case %d: %s at %.2f s: the job HUNG" % (
                    case, sig.name, at))
                failures += 1
                continue
            ended = time.monotonic() - sent
            # The job may have finished before the signal landed.
            finished = proc.returncode == 0
            in_time = finished or ended <= TIMEOUT + 5
            resumed = subprocess.run(cmd + ["--resume"], capture_output=True,
                                     text=True, timeout=300)
            got = losses(log) if os.path.exists(log) else {}
            exact = resumed.returncode == 0 and \
                all(got.get(s) == reference[s] for s in reference)
            ok = in_time and exact
            failures += not ok
            print("case %d: %s to %s at %.2f s: %s in %.1f s (exit %d); "
                  "resumed %s" % (
                      case, sig.name, "a rank" if victim else "nobody",
                      at, "finished first" if finished else "ended",
                      ended, proc.returncode,
                      "bit for bit" if exact else "DIFFERENT: " +
                      (resumed.stderr[-300:] or str(got))))
        print("%d of %d cases ended within --timeout + 5 s and resumed "
              "exactly (and the stop before MPI: %s)" % (
                  args.cases - (failures - (not ok)), args.cases,
                  "ended" if ok else "FAILED"))
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
