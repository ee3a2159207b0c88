"""Two-layer MLP in MLX, lazy or under mx.compile: Y = relu(relu(X W1ᵀ + b1) W2ᵀ + b2).

python mlx_mlp.py [--batch B] [--hidden H] [--dtype fp32|fp16|bf16] [--mode lazy|compile|nn]
``nn`` builds the same shape with mlx.nn.Linear and nn.gelu (MLX compiles its activations itself,
so a lazy model still holds Compiled nodes).
"""
import argparse

import mlx.core as mx

DTYPES = {"fp32": mx.float32, "fp16": mx.float16, "bf16": mx.bfloat16}


def mlp(X, W1, b1, W2, b2):
    h = mx.maximum(X @ W1.T + b1, 0)
    return mx.maximum(h @ W2.T + b2, 0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    p.add_argument("--mode", choices=["lazy", "compile", "nn"], default="lazy")
    a = p.parse_args()
    mx.random.seed(0)
    dt = DTYPES[a.dtype]
    X = mx.random.normal((a.batch, 1024)).astype(dt)
    if a.mode == "nn":
        import mlx.nn as nn

        l1, l2 = nn.Linear(1024, a.hidden), nn.Linear(a.hidden, 1024)
        l1.set_dtype(dt)
        l2.set_dtype(dt)
        mx.eval(X, l1.parameters(), l2.parameters())
        Y = nn.gelu(l2(nn.gelu(l1(X))))
    else:
        W1 = (mx.random.normal((a.hidden, 1024)) / 32).astype(dt)
        b1 = mx.zeros((a.hidden,), dtype=dt)
        W2 = (mx.random.normal((1024, a.hidden)) / 45).astype(dt)
        b2 = mx.zeros((1024,), dtype=dt)
        mx.eval(X, W1, b1, W2, b2)
        fn = mx.compile(mlp) if a.mode == "compile" else mlp
        Y = fn(X, W1, b1, W2, b2)
    mx.eval(Y)
    print(f"mlp {a.mode} {a.dtype} B={a.batch} H={a.hidden}: Y {Y.shape} {Y.dtype}")


if __name__ == "__main__":
    main()
