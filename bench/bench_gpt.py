#!/usr/bin/env python3
"""Strata against PyTorch eager and torch.compile on GPT-2, side by side.

    python3 bench/bench_gpt.py --bin build/bin [--sizes 124M,350M,1.3B]
        [--batch 8] [--seq 1024] [--steps 30] [--warmup 10] [--out FILE.md]

On a machine with an NVIDIA GPU and PyTorch 2.x, trains the same GPT-2
(models/definitions.py's GPT: nanoGPT-style, tied embeddings, exact GELU)
three ways with the same global batch and optimizer (AdamW, lr 6e-4,
betas (0.9, 0.95), weight decay 0.1, gradient clipping at 1.0) in bf16
mixed precision (bf16 operands, fp32 master weights and optimizer state):

  strata     torch.onnx.export → strata-compile --dtype bf16 → strata-run
             --backend cuda (its own step log gives tokens/s)
  strata-gemm-attn  the same with strata-compile --no-fuse-attention:
             attention as bf16 batched GEMMs (cuBLASLt) around an f32
             softmax, instead of the fused attention kernel
  strata-widened-attn  (not in the default --systems) the strata artifact
             with STRATA_CUDA_ATTENTION=widened: attention widened to f32
             on the tiled kernel instead of bf16 on tensor cores
  strata-unstaged  (not in the default --systems) the strata artifact with
             STRATA_CUDA_GEMM_STAGING=0: products whose rows are not
             16-byte aligned (the head) read and write them in place
  eager      the PyTorch module under torch.autocast(bfloat16)
  compile    the same, torch.compile(model)

and prints, per size and system: tokens/s (timed steps after --warmup),
MFU = model FLOPs per token × tokens/s ÷ the GPU's dense bf16 peak, with
FLOPs per token = 6·N + 12·L·d·T (N parameters without the position
embeddings, L layers, width d, sequence T: PaLM's count, backward = 2×
forward), and peak GPU memory (torch.cuda.max_memory_allocated; for
strata the device block its executor holds, from its step log's
device_bytes, without the cuBLASLt workspaces); then Strata's ratios to
both. The systems see different token streams (PyTorch one fixed random
batch, strata its synthetic loader), so their losses are not compared:
this measures speed; tests/gpu/check_cuda.py measures correctness. A system that fails (out of memory, an op it cannot compile) is
reported with its one-line reason and the others still run.

--sizes tiny runs a 2-layer model (d 64, T 64) anywhere, on the CPU too,
to check this script.
"""

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SIZES = {
    # name: (layers, heads, width)
    "tiny": (2, 4, 64),
    "124M": (12, 12, 768),
    "350M": (24, 16, 1024),
    "1.3B": (24, 16, 2048),
}
# Dense bf16 tensor-core peaks (FLOP/s), by a substring of the GPU's name.
PEAKS = [("H200", 989.4e12), ("H100", 989.4e12), ("A100", 312e12),
         ("L40S", 362.05e12), ("A10", 125e12), ("4090", 165.2e12)]

LR, BETAS, WEIGHT_DECAY, CLIP = 6e-4, (0.9, 0.95), 0.1, 1.0


def flops_per_token(params, layers, width, seq):
    return 6 * params + 12 * layers * width * seq


def make_model(size, seq, vocab):
    import torch
    from models.definitions import GPT, GPTConfig
    layers, heads, width = SIZES[size]
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=seq, vocab_size=vocab, n_layer=layers,
                         n_head=heads, n_embd=width, dropout=0.0))


def count_params(model):
    # Tied embeddings once; position embeddings are not matmul FLOPs.
    n = sum(p.numel() for p in model.parameters())
    return n - model.transformer.wpe.weight.numel()


def bench_torch(size, args, compiled, device):
    import torch
    import torch.nn.functional as F
    model = make_model(size, args.seq, args.vocab).to(device)
    kwargs = dict(lr=LR, betas=BETAS, weight_decay=WEIGHT_DECAY)
    try:  # the fused CUDA AdamW where this PyTorch has it
        opt = torch.optim.AdamW(model.parameters(), **kwargs,
                                fused=device == "cuda")
    except TypeError:
        opt = torch.optim.AdamW(model.parameters(), **kwargs)
    run = model
    if compiled:
        if not hasattr(torch, "compile"):
            raise RuntimeError(f"torch {torch.__version__} has no torch.compile")
        run = torch.compile(model)
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(device)
    y = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(device)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32

    def step():
        with torch.autocast(device_type=device, dtype=dtype,
                            enabled=args.dtype == "bf16"):
            logits = run(x)
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)),
                                   y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for _ in range(args.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sync()
    seconds = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    # Hand the caching allocator's blocks back: strata-run, a process of
    # its own, runs next.
    params = count_params(model)
    del model, opt, run
    if device == "cuda":
        torch.cuda.empty_cache()
    return {"tokens_per_s": args.batch * args.seq * args.steps / seconds,
            "peak_bytes": peak, "loss": float(loss), "params": params}


# Variants that run the `strata` artifact under another environment.
RUN_VARIANTS = {
    # attention widened to the f32 tiled kernel, not tensor cores
    "-widened-attn": {"STRATA_CUDA_ATTENTION": "widened"},
    # no aligned copies for products with misaligned rows (the head)
    "-unstaged": {"STRATA_CUDA_GEMM_STAGING": "0"},
}


def strata_artifact(size, work, system):
    variant = system[len("strata"):]
    if variant in RUN_VARIANTS:
        variant = ""
    return os.path.join(work, f"gpt-{size}{variant}.strata")


def bench_strata(size, args, backend, work, system="strata"):
    artifact = strata_artifact(size, work, system)
    try:
        return _bench_strata(size, args, backend, work, system, artifact)
    finally:
        if args.prepare and os.path.exists(artifact + ".preparing"):
            os.remove(artifact + ".preparing")


def _bench_strata(size, args, backend, work, system, artifact):
    import torch
    from models.export_models import export_settings
    model = make_model(size, args.seq, args.vocab)
    params = count_params(model)
    onnx_path = os.path.join(work, f"gpt-{size}.onnx")
    if not os.path.exists(onnx_path):  # both strata variants share it
        idx = torch.zeros((args.batch, args.seq), dtype=torch.long)
        settings = export_settings()  # the TorchScript exporter, as models/
        model.train()
        with torch.no_grad():
            # Models over 2 GB get their weights beside the graph (PyTorch
            # decides; strata-compile reads external data).
            torch.onnx.export(model, (idx,), onnx_path,
                              input_names=["input_ids"],
                              output_names=["logits"], **settings)
    del model
    variant = system[len("strata"):]
    fuse_attention = variant != "-gemm-attn"
    total = args.warmup + args.steps
    cmd = [os.path.join(args.bin, "strata-compile"), onnx_path, "-o", artifact,
           "--steps", str(total), "--optimizer", "adamw", "--lr", str(LR),
           "--beta1", str(BETAS[0]), "--beta2", str(BETAS[1]),
           "--weight-decay", str(WEIGHT_DECAY), "--clip-norm", str(CLIP)]
    if args.dtype == "bf16":
        cmd += ["--dtype", "bf16"]
    if not fuse_attention:
        cmd.append("--no-fuse-attention")
    # A compile that an earlier --prepare run left in --work is reused
    # (its time is kept beside it).
    timing = artifact + ".compile_s"
    marker = artifact + ".preparing"
    if not args.prepare:
        # A --prepare run beside this one is still compiling it: wait.
        deadline = time.time() + args.timeout
        while os.path.exists(marker) and time.time() < deadline:
            time.sleep(1)
    if os.path.exists(timing):
        with open(timing) as f:
            compile_s = float(f.read())
    else:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=args.timeout)
        compile_s = time.perf_counter() - t0
        if r.returncode != 0:
            raise RuntimeError("strata-compile: " + (r.stderr or r.stdout)
                               .strip().splitlines()[-1])
        with open(timing, "w") as f:
            f.write(f"{compile_s:.3f}")
    if args.prepare:
        return {"compile_s": compile_s, "params": params}
    log = os.path.join(work, f"gpt-{size}{variant}.jsonl")
    run = [os.path.join(args.bin, "strata-run"), artifact, "--quiet",
           "--backend", backend, "--log", log, "--seed", "0"]
    if args.cuda_graph:
        run.append("--cuda-graph")
    env = dict(os.environ, **RUN_VARIANTS.get(variant, {}))
    r = subprocess.run(run, capture_output=True, text=True,
                       timeout=args.timeout, env=env)
    if r.returncode != 0:
        raise RuntimeError("strata-run: " + (r.stderr or r.stdout).strip()
                           .splitlines()[-1])
    steps = [json.loads(line) for line in open(log) if line.strip()]
    timed = steps[args.warmup:]
    seconds = sum(s["step_ms"] for s in timed) / 1000.0
    return {"tokens_per_s": args.batch * args.seq * len(timed) / seconds,
            "peak_bytes": max(s.get("device_bytes", 0) for s in steps) or None,
            "loss": steps[-1]["loss"], "params": params,
            "compile_s": compile_s}


def gpu_peak(name, override):
    if override:
        return override * 1e12
    for key, peak in PEAKS:
        if key in name:
            return peak
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--sizes", default="124M,350M,1.3B")
    ap.add_argument("--batch", type=int, default=8,
                    help="sequences per step (the global batch, one GPU)")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--steps", type=int, default=30, help="timed steps")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--systems",
                    default="strata,strata-gemm-attn,eager,compile")
    ap.add_argument("--cuda-graph", action="store_true",
                    help="strata-run --cuda-graph")
    ap.add_argument("--peak-tflops", type=float,
                    help="the GPU's dense bf16 peak, if not in the table")
    ap.add_argument("--out", help="also write the table (markdown) here, "
                    "rewritten after every row")
    ap.add_argument("--work", help="keep the exported models and compiled "
                    "artifacts in this folder (default: a temporary one), "
                    "and reuse the ones a run before left there")
    ap.add_argument("--prepare", action="store_true",
                    help="only export and compile the strata systems into "
                    "--work (CPU work, no GPU: it can run beside other GPU "
                    "work, and a later run with the same --work times them)")
    ap.add_argument("--timeout", type=float, default=420,
                    help="seconds strata-compile or strata-run may take "
                    "(a hung run fails its row, not the session)")
    args = ap.parse_args()

    import torch
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "no GPU (cpu)"
    peak = gpu_peak(gpu, args.peak_tflops)
    backend = "cuda" if device == "cuda" else "cpu"
    sizes = args.sizes.split(",")
    if "tiny" in sizes:
        args.seq, args.vocab = min(args.seq, 64), min(args.vocab, 256)
    systems = args.systems.split(",")
    known = ("strata", "strata-gemm-attn", "strata-widened-attn",
             "strata-unstaged", "eager",
             "compile")
    unknown = [name for name in systems if name not in known]
    if unknown:
        sys.exit(f"bench_gpt.py: unknown system {', '.join(unknown)} "
                 f"(one of {', '.join(known)})")
    header = (f"GPT-2 training, {args.dtype}, batch {args.batch} x seq "
              f"{args.seq}, {args.steps} timed steps after {args.warmup}; "
              f"{gpu}; torch {torch.__version__}; "
              f"{time.strftime('%Y-%m-%d')}")
    lines = [header, "",
             "| model | system | tokens/s | MFU | peak GPU memory | ms/step |",
             "|---|---|---:|---:|---:|---:|"]
    print(header, flush=True)
    results = {}
    if args.prepare:
        systems = [name for name in systems if name.startswith("strata")]
        if not args.work:
            sys.exit("bench_gpt.py: --prepare needs --work")
    if args.work:
        os.makedirs(args.work, exist_ok=True)
    with (contextlib.nullcontext(args.work) if args.work else
          tempfile.TemporaryDirectory(prefix="strata-bench-")) as work:
        if args.prepare:
            # Every artifact this run will make is marked first, so that a
            # timing run beside it waits for each instead of compiling it.
            for size in sizes:
                for system in systems:
                    open(strata_artifact(size, work, system) + ".preparing",
                         "w").close()
        for size in sizes:
            layers, _, width = SIZES[size]
            for system in systems:
                try:
                    if args.prepare:
                        t0 = time.perf_counter()
                        r = bench_strata(size, args, backend, work, system)
                        print(f"| {size} | {system} | prepared: compile "
                              f"{r['compile_s']:.1f} s, export and compile "
                              f"{time.perf_counter() - t0:.1f} s |", flush=True)
                        continue
                    if system.startswith("strata"):
                        r = bench_strata(size, args, backend, work, system)
                    else:
                        r = bench_torch(size, args, system == "compile", device)
                    fpt = flops_per_token(r["params"], layers, width, args.seq)
                    r["mfu"] = fpt * r["tokens_per_s"] / peak if peak else None
                except Exception as e:  # one failing system leaves the rest
                    r = {"error": str(e).strip().splitlines()[-1][:200]}
                results[(size, system)] = r
                if "error" in r:
                    row = f"| {size} | {system} | failed: {r['error']} | | | |"
                else:
                    mem = (f"{r['peak_bytes'] / 2**30:.2f} GiB"
                           if r.get("peak_bytes") else "n/a")
                    mfu = f"{100 * r['mfu']:.1f}%" if r.get("mfu") else "n/a"
                    ms = 1000.0 * args.batch * args.seq / r["tokens_per_s"]
                    row = (f"| {size} | {system} | {r['tokens_per_s']:,.0f} | "
                           f"{mfu} | {mem} | {ms:.1f} |")
                print(row, flush=True)
                lines.append(row)
                if args.out:
                    with open(args.out, "w") as f:
                        f.write("\n".join(lines) + "\n")
    lines.append("")
    for size in sizes:
        for mine in ("strata", "strata-gemm-attn", "strata-widened-attn",
                     "strata-unstaged"):
            s = results.get((size, mine), {})
            for other in ("eager", "compile"):
                o = results.get((size, other), {})
                if "tokens_per_s" in s and "tokens_per_s" in o:
                    line = (f"{size}: {mine} / {other} = "
                            f"{s['tokens_per_s'] / o['tokens_per_s']:.2f}x "
                            f"tokens/s")
                    print(line)
                    lines.append("- " + line)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
