"""Seed example Y = maximum(X @ W.T + b, 0) in MLX, lazy or under mx.compile.

python mlx_seed.py [--batch B] [--dtype fp32|fp16|bf16] [--mode lazy|compile]
Inputs are evaluated first (one graph), then Y (a second graph).
"""
import argparse

import mlx.core as mx

DTYPES = {"fp32": mx.float32, "fp16": mx.float16, "bf16": mx.bfloat16}


def seed(X, W, b):
    return mx.maximum(X @ W.T + b, 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    p.add_argument("--mode", choices=["lazy", "compile"], default="lazy")
    a = p.parse_args()
    mx.random.seed(0)
    dt = DTYPES[a.dtype]
    X = mx.random.normal((a.batch, 1024)).astype(dt)
    W = (mx.random.normal((1024, 1024)) / 32).astype(dt)
    b = mx.random.normal((1024,)).astype(dt)
    mx.eval(X, W, b)
    fn = mx.compile(seed) if a.mode == "compile" else seed
    Y = fn(X, W, b)
    mx.eval(Y)
    print(f"seed {a.mode} {a.dtype} B={a.batch}: Y {Y.shape} {Y.dtype}, mean {Y.astype(mx.float32).mean().item():.4f}")


if __name__ == "__main__":
    main()
