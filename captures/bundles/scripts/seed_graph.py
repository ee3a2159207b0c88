"""CUDA Graph of 20 calls of the seed example (B=128, bf16), replayed --replays times.

With --two, a second graph (10 calls, B=64) is captured too and replays alternate A, B, A, B...
Capture it with: tracekit capture seed_graph.py --step-fn seed_graph:replay (each replay one step).
"""
import argparse
import sys

import torch
import torch.nn.functional as F


def seed(X, W, b):
    return torch.relu(F.linear(X, W, b))


def run_all(Xs, W, b):
    return [seed(x, W, b) for x in Xs]


def make_graph(Xs, W, b):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):             # warm up (cuBLAS handles, workspaces) off the capture
        for _ in range(3):
            run_all(Xs, W, b)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = run_all(Xs, W, b)
    return g, outs


def replay(g):
    g.replay()
    torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--replays", type=int, default=3)
    p.add_argument("--two", action="store_true")
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("seed_graph.py needs a CUDA device")
    torch.manual_seed(4321)
    dt, dev = torch.bfloat16, "cuda"
    W = torch.randn(1024, 1024, device=dev, dtype=dt) / 32.0
    b = torch.randn(1024, device=dev, dtype=dt)
    XA = [torch.randn(128, 1024, device=dev, dtype=dt) for _ in range(20)]
    ga, outs = make_graph(XA, W, b)
    graphs = [ga]
    if a.two:
        XB = [torch.randn(64, 1024, device=dev, dtype=dt) for _ in range(10)]
        graphs.append(make_graph(XB, W, b)[0])
    for i in range(a.replays * len(graphs)):
        replay(graphs[i % len(graphs)])
    same = all(torch.equal(o, r) for o, r in zip(outs, run_all(XA, W, b)))
    print(f"seed_graph: {len(graphs)} graph(s), {a.replays} replays each, replay == eager: {same}")


if __name__ == "__main__":
    main()
