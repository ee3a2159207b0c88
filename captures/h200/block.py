"""Pre-norm transformer block forward (bf16, d_model 1024, 16 heads, seq 512, batch 4), no_grad.

python3 captures/h200/block.py --out DIR [--modes eager,compile]
Writes DIR/block_eager.json.gz, DIR/block_compile.json.gz (+ DIR/block_compile.kernels/).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import (copy_kernel_files, dev_arg, gzip_file, log, make_profiler, print_results,
                     run_guarded, summarize, sync)


class Block(nn.Module):
    def __init__(self, d=1024, h=16, ff=4096):
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ff)
        self.fc2 = nn.Linear(ff, d)

    def forward(self, x):
        Bn, S, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (t.view(Bn, S, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(Bn, S, D))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x


def capture(mode, args):
    dev = args.device
    tag = f"block_{mode}"
    torch.manual_seed(77)
    m = Block().to(dev, torch.bfloat16).eval()
    x = torch.randn(args.batch, args.seq, 1024, device=dev, dtype=torch.bfloat16)
    cache = None
    fn = m
    if mode == "compile":
        cache = f"/tmp/tk_inductor_{tag}"
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
        torch._dynamo.reset()
        fn = torch.compile(m)
    t0 = time.time()
    with torch.no_grad():
        for _ in range(3):
            y = fn(x)
        sync(dev)
        log(f"  warm-up (incl. compile) {time.time()-t0:.1f}s")
        path = os.path.join(args.out, tag + ".json")
        with make_profiler(dev, args.steps, path) as prof:
            for _ in range(1 + args.steps):
                y = fn(x)
                sync(dev)
                prof.step()
    gz, _ = gzip_file(path)
    if mode == "compile":
        copy_kernel_files(gz, os.path.join(args.out, tag + ".kernels"), cache)
    s = summarize(gz)
    log(f"  {s}")
    return s


def main():
    p = argparse.ArgumentParser()
    dev_arg(p)
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=512)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    for mode in args.modes.split(","):
        run_guarded(f"block_{mode}", lambda: capture(mode, args), results)
    print_results(results)


if __name__ == "__main__":
    main()
