"""Seed example Y = relu(F.linear(X, W, b)), bf16. Modes eager / compile / max-autotune, B in {1,128}.

python3 captures/h200/seed.py --out DIR [--modes eager,compile,max-autotune] [--batches 1,128]
Writes DIR/seed_{mode}_b{B}.json.gz (+ DIR/seed_{mode}_b{B}.kernels/ for compiled modes).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn.functional as F
from _common import (copy_kernel_files, dev_arg, gzip_file, log, make_profiler, print_results,
                     run_guarded, summarize, sync)


def seed_fn(X, W, b):
    return torch.relu(F.linear(X, W, b))


def capture(mode, B, args):
    dev = args.device
    tag = f"seed_{mode}_b{B}"
    torch.manual_seed(1234 + B)
    dt = torch.bfloat16
    X = torch.randn(B, 1024, device=dev, dtype=dt)
    W = torch.randn(1024, 1024, device=dev, dtype=dt) / 32.0
    b = torch.randn(1024, device=dev, dtype=dt)
    cache = None
    if mode == "eager":
        fn = seed_fn
    else:
        cache = f"/tmp/tk_inductor_{tag}"
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        torch._dynamo.reset()
        fn = torch.compile(seed_fn, mode=None if mode == "compile" else mode)
    t0 = time.time()
    for _ in range(5):  # warm-up / compile / autotune / cudagraph-tree warm-up
        Y = fn(X, W, b)
    sync(dev)
    log(f"  warm-up (incl. compile) {time.time()-t0:.1f}s")
    ref = torch.relu(F.linear(X.float(), W.float(), b.float()))
    Yf = Y.float()
    rel = ((Yf - ref).norm() / ref.norm()).item()
    log(f"  precision {tag}: out dtype {Y.dtype}, rel_err_vs_fp32={rel:.3e}, "
        f"max_abs_err={(Yf-ref).abs().max().item():.3e}, max|ref|={ref.abs().max().item():.3f}")
    path = os.path.join(args.out, tag + ".json")
    with make_profiler(dev, args.steps, path) as prof:
        for _ in range(1 + args.steps):
            Y = fn(X, W, b)
            sync(dev)
            prof.step()
    gz, raw = gzip_file(path)
    if mode != "eager":
        copy_kernel_files(gz, os.path.join(args.out, tag + ".kernels"), cache)
    s = summarize(gz)
    s["rel_err_vs_fp32"] = rel
    log(f"  {s}")
    return s


def main():
    p = argparse.ArgumentParser()
    dev_arg(p)
    p.add_argument("--modes", default="eager,compile,max-autotune")
    p.add_argument("--batches", default="1,128")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    for mode in args.modes.split(","):
        for B in [int(x) for x in args.batches.split(",")]:
            run_guarded(f"seed_{mode}_b{B}", lambda: capture(mode, B, args), results)
    print_results(results)


if __name__ == "__main__":
    main()
