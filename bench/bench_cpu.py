#!/usr/bin/env python3
"""Strata's CPU backend against PyTorch eager on the same models, side by side.

    /usr/bin/python3 bench/bench_cpu.py --bin build/bin
        [--models gpt_tiny,gpt_4l,gpt_6l,vit,resnet18] [--dtypes fp32,bf16]
        [--threads 1,2] [--reps 2] [--cache DIR] [--out FILE.md]
        [--cpu-time]

(Debian's Python: it has torch.) Each model is defined in models/ and
trained with a fixed batch, AdamW (lr 1e-3, betas (0.9, 0.999), eps 1e-8,
weight decay 0.01), one process:

  gpt_tiny   the committed models/gpt_tiny.onnx (2 layers, d 64, vocab 256),
             batch 8 x 64 tokens
  gpt_4l     GPT 4 layers, d 256, 4 heads, vocab 2048, batch 8 x 256
  gpt_6l     GPT 6 layers, d 512, 8 heads, vocab 8192, batch 4 x 512
  vit        models.definitions.ViT (6 blocks, d 192, 3 heads, 4 x 4
             patches), 32 x 32 images, batch 16, 10 classes
  resnet18   models.definitions.ResNet18 (CIFAR style), 32 x 32 images,
             batch 16, 10 classes

Systems: `strata` (strata-compile, then strata-run --backend cpu; its
step log gives the step times; compiled for a CPU, so attention keeps its
probabilities for its gradient, --keep-attention-probabilities, as
PyTorch's autograd keeps a softmax's output; --recompute-attention
compiles without it) and `eager` (the PyTorch module, one fixed
random batch, in a subprocess of its own; bf16 under
torch.autocast("cpu", bfloat16)). Threads: strata-run with
STRATA_NUM_THREADS, OPENBLAS_NUM_THREADS and OMP_NUM_THREADS set to N;
PyTorch with OMP_NUM_THREADS=N and torch.set_num_threads(N).

Repetitions are interleaved (every configuration once, then again, the
order of the two systems alternating), and the table gives each figure's
median over them: throughput over the timed steps after the warm-up ones
(tokens/s for GPT, samples/s for the vision models) and each process's peak
RSS (its VmHWM: the whole process, Python and torch included for
PyTorch). Ratios are Strata over PyTorch.

--cpu-time adds each system's CPU milliseconds per timed step (user +
system, all threads): PyTorch's time.process_time over its timed steps;
Strata's process CPU time less that of the same run stopped after its
warm-up steps. On a shared machine this is the figure that load disturbs
least (at one thread); its ratio is PyTorch's over Strata's.

Models not committed are exported (TorchScript exporter, as models/) into
--cache (default ~/.cache/strata-bench-cpu) the first time and reused.
The systems see different data (Strata its synthetic loader), so losses
are not compared: this measures speed; the parity tests measure
correctness.
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

LR, BETAS, EPS, WEIGHT_DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.01

# name: kind, config, batch, sequence (GPT) or image side, warm-up and
# timed steps.
MODELS = {
    "gpt_tiny": dict(kind="gpt", cfg=None, batch=8, seq=64, warmup=5,
                     steps=20),
    "gpt_4l": dict(kind="gpt", cfg=dict(block_size=256, vocab_size=2048,
                                        n_layer=4, n_head=4, n_embd=256),
                   batch=8, seq=256, warmup=2, steps=6),
    "gpt_6l": dict(kind="gpt", cfg=dict(block_size=512, vocab_size=8192,
                                        n_layer=6, n_head=8, n_embd=512),
                   batch=4, seq=512, warmup=1, steps=3),
    "vit": dict(kind="vit", cfg=None, batch=16, seq=32, warmup=2, steps=5),
    "resnet18": dict(kind="resnet18", cfg=None, batch=16, seq=32, warmup=1,
                     steps=3),
}


def make_model(name):
    import torch
    from models import definitions as d
    spec = MODELS[name]
    torch.manual_seed(0)
    if spec["kind"] == "gpt":
        cfg = d.GPT_TINY if spec["cfg"] is None else d.GPTConfig(
            dropout=0.0, **spec["cfg"])
        return d.GPT(cfg)
    if spec["kind"] == "vit":
        return d.ViT()
    return d.ResNet18()


def example_inputs(name):
    import torch
    spec = MODELS[name]
    g = torch.Generator().manual_seed(0)
    if spec["kind"] == "gpt":
        model_vocab = (spec["cfg"] or {}).get("vocab_size", 256)
        x = torch.randint(0, model_vocab, (spec["batch"], spec["seq"]),
                          generator=g)
        y = torch.randint(0, model_vocab, (spec["batch"], spec["seq"]),
                          generator=g)
        return x, y
    x = torch.randn(spec["batch"], 3, spec["seq"], spec["seq"], generator=g)
    y = torch.randint(0, 10, (spec["batch"],), generator=g)
    return x, y


def onnx_path(name, cache):
    """The model's ONNX file: committed, or exported into `cache` once."""
    if name == "gpt_tiny":
        return os.path.join(ROOT, "models", "gpt_tiny.onnx")
    import torch
    spec = MODELS[name]
    with open(os.path.join(ROOT, "models", "definitions.py"), "rb") as f:
        key = hashlib.sha256(f.read() + repr(spec).encode() +
                             torch.__version__.encode()).hexdigest()[:12]
    path = os.path.join(cache, f"{name}-{key}.onnx")
    if os.path.exists(path):
        return path
    from models.export_models import export_settings
    os.makedirs(cache, exist_ok=True)
    model = make_model(name)
    x, _ = example_inputs(name)
    names = (["input_ids"] if spec["kind"] == "gpt" else ["images"])
    tmp = path + ".tmp"
    model.train()
    with torch.no_grad():
        torch.onnx.export(model, (x,), tmp, input_names=names,
                          output_names=["logits"], **export_settings())
    os.replace(tmp, path)
    return path


def vm_hwm(pid):
    """The process's peak resident set (VmHWM) in bytes, or 0 once gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def spawn_measured(cmd, env, timeout):
    """Runs cmd; returns (returncode, stdout, stderr, its peak RSS in
    bytes). The peak is the child's VmHWM, polled every 10 ms: getrusage's
    ru_maxrss would count the parent's pages the child held between fork
    and exec."""
    import tempfile
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        p = subprocess.Popen(cmd, env=env, stdout=fo, stderr=fe, text=True)
        start, peak = time.monotonic(), 0
        while p.poll() is None:
            peak = max(peak, vm_hwm(p.pid))
            if time.monotonic() - start > timeout:
                p.kill()
                p.wait()
                p.returncode = 124
                break
            time.sleep(0.01)
        fo.seek(0)
        fe.seek(0)
        return p.returncode, fo.read(), fe.read(), peak


def thread_env(threads):
    env = dict(os.environ)
    for var in ("STRATA_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def compile_strata(name, dtype, args):
    spec = MODELS[name]
    artifact = os.path.join(args.cache, f"{name}-{dtype}.strata")
    total = spec["warmup"] + spec["steps"]
    cmd = [os.path.join(args.bin, "strata-compile"),
           onnx_path(name, args.cache), "-o", artifact,
           "--steps", str(total), "--optimizer", "adamw", "--lr", str(LR),
           "--beta1", str(BETAS[0]), "--beta2", str(BETAS[1]),
           "--eps", str(EPS), "--weight-decay", str(WEIGHT_DECAY)]
    if dtype == "bf16":
        cmd += ["--dtype", "bf16"]
    if not args.recompute_attention:
        cmd += ["--keep-attention-probabilities"]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       timeout=args.timeout)
    if r.returncode != 0:
        raise RuntimeError("strata-compile: " + (r.stderr or r.stdout)
                           .strip().splitlines()[-1])
    return artifact


def children_cpu_seconds():
    """User + system CPU seconds of this process's waited-for children."""
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_strata(name, dtype, threads, artifact, args):
    spec = MODELS[name]
    log = artifact + f".t{threads}.jsonl"
    if os.path.exists(log):
        os.remove(log)
    cmd = [os.path.join(args.bin, "strata-run"), artifact, "--quiet",
           "--backend", "cpu", "--log", log, "--seed", "0"]
    cpu0 = children_cpu_seconds()
    rc, out, err, rss = spawn_measured(cmd, thread_env(threads), args.timeout)
    cpu = children_cpu_seconds() - cpu0
    if rc != 0:
        raise RuntimeError("strata-run: " + ((err or out).strip()
                                             .splitlines() or ["?"])[-1])
    steps = [json.loads(line) for line in open(log) if line.strip()]
    timed = steps[spec["warmup"]:]
    seconds = sum(s["step_ms"] for s in timed) / 1000.0
    per_step = spec["batch"] * (spec["seq"] if spec["kind"] == "gpt" else 1)
    result = {"rate": per_step * len(timed) / seconds, "rss": rss,
              "loss": steps[-1]["loss"]}
    if args.cpu_time:
        # The same run stopped after the warm-up steps: the difference of
        # the two processes' CPU time is the timed steps' alone (loading,
        # planning and the warm-up cancel).
        cpu0 = children_cpu_seconds()
        rc, out, err, _ = spawn_measured(
            cmd[:-4] + ["--steps", str(spec["warmup"]), "--seed", "0"],
            thread_env(threads), args.timeout)
        if rc != 0:
            raise RuntimeError("strata-run (warm-up only): " + (
                (err or out).strip().splitlines() or ["?"])[-1])
        warm = children_cpu_seconds() - cpu0
        result["cpu_ms"] = (cpu - warm) * 1000.0 / len(timed)
    return result


def bench_eager(name, dtype, threads, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name,
           "--worker-dtype", dtype, "--worker-threads", str(threads)]
    rc, out, err, rss = spawn_measured(cmd, thread_env(threads), args.timeout)
    if rc != 0:
        raise RuntimeError("eager: " + ((err or out).strip().splitlines()
                                        or ["?"])[-1])
    r = json.loads(out.strip().splitlines()[-1])
    r["rss"] = rss
    return r


def worker(name, dtype, threads):
    """The PyTorch side, in its own process (its RSS is its own)."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    spec = MODELS[name]
    model = make_model(name)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=BETAS, eps=EPS,
                            weight_decay=WEIGHT_DECAY)
    x, y = example_inputs(name)

    def step():
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16,
                            enabled=dtype == "bf16"):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                               y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(spec["warmup"]):
        step()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(spec["steps"]):
        loss = step()
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    per_step = spec["batch"] * (spec["seq"] if spec["kind"] == "gpt" else 1)
    print(json.dumps({"rate": per_step * spec["steps"] / seconds,
                      "cpu_ms": cpu * 1000.0 / spec["steps"],
                      "loss": float(loss)}))
    return 0


def fmt_rate(r):
    return f"{r / 1000:.2f}k" if r >= 1000 else f"{r:.1f}"


def fmt_mb(b):
    return f"{b / 1e9:.2f} GB" if b >= 1e9 else f"{b / 1e6:.0f} MB"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--systems", default="strata,eager")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--cache", default=os.path.join(
        os.path.expanduser("~"), ".cache", "strata-bench-cpu"))
    ap.add_argument("--out", help="also write the table (markdown) here")
    ap.add_argument("--cpu-time", action="store_true",
                    help="also give each system's CPU milliseconds per "
                         "timed step (all its threads; Strata runs once "
                         "more, warm-up only, to subtract the start)")
    ap.add_argument("--recompute-attention", action="store_true",
                    help="compile Strata without "
                         "--keep-attention-probabilities (the gradient "
                         "makes attention's probabilities again)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--worker-dtype", help=argparse.SUPPRESS)
    ap.add_argument("--worker-threads", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.worker_dtype, args.worker_threads)

    import torch
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        sys.exit(f"bench_cpu.py: unknown model {', '.join(unknown)} "
                 f"(one of {', '.join(MODELS)})")
    dtypes = args.dtypes.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    systems = args.systems.split(",")
    os.makedirs(args.cache, exist_ok=True)
    load = os.getloadavg()
    header = (f"CPU training, AdamW, one process; {os.cpu_count()} cores; "
              f"torch {torch.__version__}; {time.strftime('%Y-%m-%d %H:%M')}; "
              f"load average at start {load[0]:.2f}; median of {args.reps} "
              f"interleaved repetitions")
    print(header, flush=True)

    artifacts, errors = {}, {}
    for name in models:
        for dtype in dtypes:
            if "strata" not in systems:
                continue
            try:
                artifacts[(name, dtype)] = compile_strata(name, dtype, args)
            except Exception as e:
                errors[(name, dtype, "strata")] = str(e).strip()[:200]
                print(f"{name} {dtype} strata: {errors[(name, dtype, 'strata')]}",
                      flush=True)

    results = {}
    for rep in range(args.reps):
        for name in models:
            for dtype in dtypes:
                for t in threads:
                    order = systems if rep % 2 == 0 else systems[::-1]
                    for system in order:
                        key = (name, dtype, system)
                        if key in errors:
                            continue
                        try:
                            if system == "strata":
                                r = bench_strata(name, dtype, t,
                                                 artifacts[(name, dtype)], args)
                            else:
                                r = bench_eager(name, dtype, t, args)
                        except Exception as e:
                            errors[key] = str(e).strip()[:200]
                            print(f"{name} {dtype} {system}: {errors[key]}",
                                  flush=True)
                            continue
                        results.setdefault((name, dtype, t, system), []).append(r)
                        cpu_note = (f", {r['cpu_ms']:.1f} CPU ms/step"
                                    if "cpu_ms" in r else "")
                        print(f"rep {rep + 1} {name} {dtype} {t} thread(s) "
                              f"{system}: {fmt_rate(r['rate'])}/s, peak RSS "
                              f"{fmt_mb(r['rss'])}{cpu_note}", flush=True)

    cpu_head = (" CPU ms/step Strata / PyTorch | CPU ratio |"
                if args.cpu_time else "")
    lines = [header, "",
             "| model | batch | dtype | threads | Strata | PyTorch eager | "
             "ratio | peak RSS Strata / PyTorch |" + cpu_head,
             "|---|---|---|---:|---:|---:|---:|---|" +
             ("---|---:|" if args.cpu_time else "")]
    for name in models:
        spec = MODELS[name]
        unit = "tok/s" if spec["kind"] == "gpt" else "samples/s"
        batch = (f"{spec['batch']} x {spec['seq']}" if spec["kind"] == "gpt"
                 else f"{spec['batch']} x 3 x {spec['seq']} x {spec['seq']}")
        for dtype in dtypes:
            for t in threads:
                cells = {}
                for system in ("strata", "eager"):
                    rs = results.get((name, dtype, t, system))
                    if rs:
                        cells[system] = (
                            statistics.median(r["rate"] for r in rs),
                            statistics.median(r["rss"] for r in rs),
                            statistics.median(r.get("cpu_ms", 0) for r in rs))
                    elif (name, dtype, system) in errors:
                        cells[system] = errors[(name, dtype, system)]
                def show(system):
                    c = cells.get(system)
                    if c is None:
                        return "n/a"
                    if isinstance(c, str):
                        return f"failed: {c}"
                    return f"{fmt_rate(c[0])} {unit}"
                s, e = cells.get("strata"), cells.get("eager")
                both = isinstance(s, tuple) and isinstance(e, tuple)
                ratio = f"{s[0] / e[0]:.2f}x" if both else "n/a"
                rss = (f"{fmt_mb(s[1])} / {fmt_mb(e[1])}" if both else "n/a")
                cpu_cells = ""
                if args.cpu_time:
                    # PyTorch's CPU time over Strata's: the throughput ratio
                    # at equal CPU time.
                    cpu_cells = (f" {s[2]:.1f} / {e[2]:.1f} | "
                                 f"{e[2] / s[2]:.2f}x |" if both and s[2] > 0
                                 else " n/a | n/a |")
                lines.append(f"| {name} | {batch} | {dtype} | {t} | "
                             f"{show('strata')} | {show('eager')} | {ratio} | "
                             f"{rss} |" + cpu_cells)
    print("\n".join(lines[2:]))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
