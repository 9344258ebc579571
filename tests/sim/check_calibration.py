#!/usr/bin/env python3
"""strata-sim against strata-run on this machine.

Calibrates this machine with `strata-sim --calibrate` (microbenchmarks only,
launched with as many ranks as the runs it will predict), then compiles the
committed models in the configurations below, runs each with strata-run
(the median step time of the steps after the first few) and predicts it with
strata-sim on the calibrated file. Fails when a prediction at a rank count
in --check-ranks misses the measured step by more than --tolerance; reports
the others.

    check_calibration.py --bin BUILD/bin [--ranks 1 2] [--check-ranks 1 2]
                         [--tolerance 0.15] [--max-ratio R [--ratio-ranks N..]]
                         [--models gpt_tiny bert_tiny] [--steps 24]
                         [--launches 3] [--calibrations 3]

Each configuration is launched --launches times, one launch of every
configuration a round, and each rank count is calibrated --calibrations
times, spread evenly between the rounds (one before the first), and the
figures merged, each the median of the calibrations': on a shared machine the speed of the kernels and of the
links moves by 30% and more from one minute to the next (a calibration's
2-thread GEMM rate read 98 and 188 GFLOP/s a minute apart), and a
calibration taken at one moment predicts the runs of another.

--max-mean also fails a rank count whose mean |error| over its
configurations is above it.

--max-ratio alone checks the --check-ranks by the ratio instead; with
--ratio-ranks it checks those rank counts by the ratio and the
--check-ranks by --tolerance.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")


CLUSTER = os.path.join(HERE, "..", "..", "tools", "cluster.sh")
NODES = None  # (nodes, bandwidth): launch on tools/cluster.sh's nodes


def mpirun(n):
    if n == 1:
        return []
    if NODES:
        return [CLUSTER, "run", "-N", str(NODES[0]), "-n", str(n),
                "--inter-node-bandwidth", NODES[1], "--"]
    return ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(n)]


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, **kw)
    if r.returncode != 0:
        sys.exit("FAILED: " + " ".join(cmd) + "\n" + r.stdout[-3000:])
    return r.stdout


def configurations(ranks):
    """(name, strata-compile flags) for a world of `ranks`, one rank a core."""
    if ranks == 1:
        return [
            ("one rank", []),
            ("offload (half the memory)", ["--gpu-memory", "@half",
                                           "--host-memory", "1G"]),
        ]
    n = str(ranks)
    # K: on real nodes the ranks a node, on one host two emulated nodes.
    k = str(ranks // NODES[0]) if NODES else str(max(ranks // 2, 1))
    topo = ["--world", n]
    if NODES:
        # ZeRO-3's partition group spans the nodes.
        zero3 = [("ZeRO-3 P=%s flat" % n,
                  topo + ["--gpus-per-node", k, "--partition-group", n,
                          "--hierarchical", "off"])]
        hierarchical = "MiCS hierarchical P=%s" % n
    else:
        flat = topo + ["--gpus-per-node", n, "--partition-group", n,
                       "--hierarchical", "off"]
        zero3 = [("ZeRO-3 P=%s" % n, flat),
                 ("ZeRO-3 P=%s prefetch 2" % n,
                  flat + ["--prefetch-depth", "2"])]
        hierarchical = "MiCS hierarchical P=%s K=%s" % (n, k)
    # MiCS: the partition group over the nodes, gathered hierarchically, and
    # node-sized, its gradients synced by 2-hop or globally.
    node = topo + ["--gpus-per-node", k, "--partition-group", k]
    return zero3 + [
        (hierarchical, topo + ["--gpus-per-node", k, "--partition-group", n,
                               "--hierarchical", "on"]),
        ("MiCS P=%s 2-hop" % k, node + ["--grad-sync", "2hop", "--accum", "2"]),
        ("MiCS P=%s global sync" % k,
         node + ["--grad-sync", "global", "--accum", "2"]),
    ]


def load_average():
    """The machine's 1-minute load average (other jobs slow the calibration
    and the runs alike, or unalike)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def peak_bytes(bin_dir, art):
    out = run([os.path.join(bin_dir, "strata-inspect"), art, "--json"])
    info = json.loads(out)
    return int(info["memory"]["device"]["planned_peak_bytes"])


def measure(bin_dir, art, ranks, steps, work):
    """The median step (after the first four) of one launch. The measured
    step is the median of these over the rounds: with ranks sharing the
    cores, one launch's steps can all run slow or all fast (where the
    threads landed, what else ran), by 20% at 2 ranks here."""
    log = os.path.join(work, "run.jsonl")
    run(mpirun(ranks) + [os.path.join(bin_dir, "strata-run"), art,
                         "--steps", str(steps), "--log", log,
                         "--print-every", str(steps)], cwd=work)
    times = [json.loads(line)["step_ms"] for line in open(log)]
    return statistics.median(times[4:]) / 1e3


def merge_figures(values):
    """One cluster file's value from several calibrations': numbers (and
    lists of numbers of one length, element by element) their median;
    anything else the first's."""
    first = values[0]
    if isinstance(first, dict):
        return {key: merge_figures([v[key] for v in values if key in v])
                for key in first}
    numeric = (int, float)
    if isinstance(first, list) and all(
            isinstance(v, list) and len(v) == len(first) and
            all(isinstance(x, numeric) for x in v) for v in values):
        return [statistics.median(column) for column in zip(*values)]
    if isinstance(first, numeric) and not isinstance(first, bool) and all(
            isinstance(v, numeric) for v in values):
        median = statistics.median(values)
        return int(median) if isinstance(first, int) and \
            median == int(median) else median
    return first


def self_test():
    """merge_figures on made-up calibrations (ctest sim.calibration.merge)."""
    files = [
        {"name": "a", "flops_f32": 1.0e11, "gpus_per_node": 1,
         "gemm_rate": [8, 1.0, 64, 9.0], "links": {"alpha": 3.0},
         "notes": ["x"]},
        {"name": "b", "flops_f32": 3.0e11, "gpus_per_node": 1,
         "gemm_rate": [8, 2.0, 64, 4.0], "links": {"alpha": 1.0},
         "notes": ["y"]},
        {"name": "c", "flops_f32": 2.0e11, "gpus_per_node": 1,
         "gemm_rate": [8, 30.0, 64, 5.0], "links": {"alpha": 2.0},
         "notes": ["z"]},
    ]
    merged = merge_figures(files)
    expected = {"name": "a", "flops_f32": 2.0e11, "gpus_per_node": 1,
                "gemm_rate": [8, 2.0, 64, 5.0], "links": {"alpha": 2.0},
                "notes": ["x"]}
    if merged != expected:
        sys.exit("FAILED: merge_figures gave %r, expected %r" %
                 (merged, expected))
    if not isinstance(merged["gpus_per_node"], int):
        sys.exit("FAILED: an integer figure came back as %r" %
                 merged["gpus_per_node"])
    print("PASSED")


# Tables every CPU calibration writes (besides the figures the predictions
# here read): a --dtype bf16 plan's products, casts and fused kernels, and
# the fused kernels' costs by program.
EXPECTED_TABLES = ["gemm_rate", "bf16.gemm_rate", "bf16.gemm_grad_rate",
                   "op.graph.cast", "bf16.op.graph.cast",
                   "op.graph.fused_elementwise.byte",
                   "op.graph.fused_elementwise.instruction",
                   "op.graph.fused_elementwise.transcendental",
                   "bf16.op.graph.fused_elementwise.instruction"]


def calibrate(bin_dir, ranks, seconds, work, path):
    run(mpirun(ranks) + [os.path.join(bin_dir, "strata-sim"), "--calibrate",
                         "-o", path, "--seconds", str(seconds)], cwd=work)
    with open(path) as f:
        cluster = json.load(f)
    missing = [k for k in EXPECTED_TABLES if k not in cluster]
    if missing:
        sys.exit("FAILED: the calibration of %d rank(s) lacks %s" %
                 (ranks, ", ".join(missing)))


def predict(bin_dir, art, cluster):
    out = run([os.path.join(bin_dir, "strata-sim"), art, "--cluster", cluster,
               "--json"])
    return json.loads(out)["step_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--check-ranks", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--models", nargs="+", default=["gpt_tiny", "bert_tiny"])
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--launches", type=int, default=3,
                    help="runs of each configuration, one a round over all "
                         "of them (the median of their median steps is the "
                         "measured step)")
    ap.add_argument("--tolerance", type=float, default=0.15,
                    help="largest |predicted - measured| / measured")
    ap.add_argument("--max-ratio", type=float,
                    help="instead: fail only when predicted / measured is "
                         "above this or below its inverse")
    ap.add_argument("--ratio-ranks", type=int, nargs="*",
                    help="with --max-ratio: the rank counts it checks, the "
                         "--check-ranks keeping --tolerance (default: "
                         "--max-ratio checks the --check-ranks instead)")
    ap.add_argument("--max-mean", type=float,
                    help="also fail when a rank count's mean |error| over "
                         "its configurations is above this")
    ap.add_argument("--calibrations", type=int, default=3,
                    help="calibrations a rank count, spread over its runs "
                         "and merged (each figure their median)")
    ap.add_argument("--seconds", type=float, default=0.05,
                    help="each calibration benchmark's time")
    ap.add_argument("--keep", help="keep the calibrated files in this folder")
    ap.add_argument("--cluster", metavar="NODES:BANDWIDTH",
                    help="calibrate and run on tools/cluster.sh's emulated "
                         "nodes (e.g. 2:100mbit): TCP links between them")
    if "--self-test" in sys.argv[1:]:  # before --bin is required
        return self_test()
    args = ap.parse_args()
    # The runs start in a scratch folder (cwd=work); mpirun looks a
    # relative path up there.
    args.bin = os.path.abspath(args.bin)
    global NODES
    if args.cluster:
        nodes, bandwidth = args.cluster.split(":")
        NODES = (int(nodes), bandwidth)
        check = subprocess.run([CLUSTER, "check"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        if check.returncode != 0:
            print(check.stdout.strip())
            # A developer's machine without the privileges skips (77);
            # CI, where they exist, fails.
            sys.exit(1 if os.environ.get("CI") == "true" else 77)
    work = tempfile.mkdtemp(prefix="strata-calibration-")
    rows, failures, spreads = [], [], []
    try:
        for ranks in args.ranks:
            cluster = os.path.join(work, "cpu-%d.json" % ranks)
            runs = [(model, name, flags) for model in args.models
                    for name, flags in configurations(ranks)]
            # Every configuration compiled first; then the calibrations and
            # the launches alternate: round r launches every configuration
            # once, and the calibrations are spread evenly between the
            # rounds (before the first, ..., after the last where there are
            # more calibrations than rounds). So each configuration's
            # launches and the calibrations sample the same minutes of a
            # machine whose speed moves from one minute to the next.
            arts = []
            for index, (model, name, flags) in enumerate(runs):
                onnx = os.path.join(MODELS, model + ".onnx")
                art = os.path.join(work, "art-%d-%d" % (ranks, index))
                if "@half" in flags:
                    base = os.path.join(work, "base")
                    shutil.rmtree(base, ignore_errors=True)
                    run([os.path.join(args.bin, "strata-compile"), onnx,
                         "-o", base])
                    half = peak_bytes(args.bin, base) // 2
                    flags = [str(half) if f == "@half" else f for f in flags]
                run([os.path.join(args.bin, "strata-compile"), onnx, "-o",
                     art] + flags)
                arts.append(art)
            count = max(1, args.calibrations)
            rounds = max(1, args.launches)
            # Calibration c runs before round at[c] (after the last round
            # where at[c] is past it).
            at = [round(c * rounds / count) for c in range(count)]
            calibrations = []

            def calibrate_until(index):
                while len(calibrations) < count and \
                        at[len(calibrations)] <= index:
                    path = os.path.join(work, "cpu-%d-%d.json" %
                                        (ranks, len(calibrations)))
                    calibrate(args.bin, ranks, args.seconds, work, path)
                    calibrations.append(path)
                    print("%d rank%s  calibrated (%d of %d; load average "
                          "%.1f after it)" %
                          (ranks, " " if ranks == 1 else "s",
                           len(calibrations), count, load_average()),
                          flush=True)

            medians = [[] for _ in runs]
            loads = [[] for _ in runs]
            for r in range(rounds):
                calibrate_until(r)
                for index, art in enumerate(arts):
                    medians[index].append(
                        measure(args.bin, art, ranks, args.steps, work))
                    loads[index].append(load_average())
            calibrate_until(rounds)
            # (model, configuration, artifact, measured step, load average)
            measured = [(model, name, arts[i], statistics.median(medians[i]),
                         statistics.mean(loads[i]))
                        for i, (model, name, _) in enumerate(runs)]
            # The noise floor: how far each launch's median step lies from
            # its configuration's median over the launches (a prediction
            # that knew that median exactly would be this far from a
            # single launch).
            for i, (model, name, _) in enumerate(runs):
                middle = statistics.median(medians[i])
                spreads.append((ranks, model, name, [
                    (m - middle) / middle for m in medians[i]]))
            figures = [json.load(open(path)) for path in calibrations]
            with open(cluster, "w") as f:
                json.dump(merge_figures(figures), f, indent=2)
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                for path in calibrations + [cluster]:
                    shutil.copy(path, args.keep)
            for model, name, art, step, load in measured:
                predicted = predict(args.bin, art, cluster)
                error = (predicted - step) / step
                rows.append((ranks, model, name, step, predicted, error))
                print("%d rank%s  %-10s %-30s measured %8.3f ms  "
                      "predicted %8.3f ms  error %+6.1f%%  (load %.1f)" %
                      (ranks, " " if ranks == 1 else "s", model, name,
                       step * 1e3, predicted * 1e3, 100 * error, load),
                      flush=True)
                ratio = predicted / step
                by_ratio = args.max_ratio and (
                    ranks in args.ratio_ranks if args.ratio_ranks
                    is not None else ranks in args.check_ranks)
                if by_ratio and max(ratio, 1 / ratio) > args.max_ratio:
                    failures.append("%d ranks %s %s: %+.1f%% (past a "
                                    "factor %g)" % (ranks, model, name,
                                                    100 * error,
                                                    args.max_ratio))
                elif (not by_ratio and ranks in args.check_ranks and
                      (args.ratio_ranks is not None or
                       not args.max_ratio) and
                      abs(error) > args.tolerance):
                    failures.append("%d ranks %s %s: %+.1f%% (past "
                                    "%.0f%%)" % (ranks, model, name,
                                                 100 * error,
                                                 100 * args.tolerance))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for ranks in sorted(set(r[0] for r in rows)):
        offs = [(model, name, o) for r, model, name, o in spreads
                if r == ranks]
        if offs and len(offs[0][2]) > 1:
            every = [d for _, _, o in offs for d in o]
            model, name, o = max(offs, key=lambda w: max(w[2]) - min(w[2]))
            print("%d rank%s: launches against their configuration's "
                  "median: %d of %d within 15%%, widest %s %s %+.1f%% to "
                  "%+.1f%%" % (ranks, "" if ranks == 1 else "s",
                              sum(abs(d) <= 0.15 for d in every),
                              len(every), model, name, 100 * min(o),
                              100 * max(o)))
        errs = [abs(r[5]) for r in rows if r[0] == ranks]
        mean = statistics.mean(errs)
        print("%d rank%s: mean |error| %.1f%%, worst %.1f%% over %d runs" %
              (ranks, "" if ranks == 1 else "s", 100 * mean,
               100 * max(errs), len(errs)))
        if args.max_mean is not None and mean > args.max_mean:
            failures.append("%d ranks: mean |error| %.1f%% (past %.0f%%)" %
                            (ranks, 100 * mean, 100 * args.max_mean))
    if failures:
        sys.exit("FAILED: predictions off: " + "; ".join(failures))
    print("PASSED")


if __name__ == "__main__":
    main()
