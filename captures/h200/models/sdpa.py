"""F.scaled_dot_product_attention forward + backward on each SDPA backend, one bundle.

One step = one call of step(i) (capture with --step-fn sdpa:step). The script calls step(i) for every
config i twice: first pass = warm-up (use --warmup 8), second pass = recorded (--steps 8).
Configs, in order: FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION, MATH, each non-causal then
causal. Each step is wrapped in a record_function named 'sdpa::<BACKEND>:causal=<0|1>'; a backend that
refuses the inputs records 'sdpa::<BACKEND>:causal=<c>:unsupported' and no kernels.
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.MATH]
CONFIGS = [(b, c) for b in BACKENDS for c in (False, True)]
T = {}


def step(i):
    backend, causal = CONFIGS[i]
    name = f"sdpa::{backend.name}:causal={int(causal)}"
    q, k, v, g = T["q"], T["k"], T["v"], T["g"]
    try:
        with torch.profiler.record_function(name), sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            out.backward(g)
    except RuntimeError as e:
        with torch.profiler.record_function(name + ":unsupported"):
            pass
        print(f"sdpa: {name} unsupported: {str(e).splitlines()[0][:200]}", flush=True)
        return None
    q.grad = k.grad = v.grad = None
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--B", type=int, default=4)
    p.add_argument("--H", type=int, default=16)
    p.add_argument("--S", type=int, default=1024)
    p.add_argument("--D", type=int, default=64)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    dt = torch.bfloat16
    shape = (a.B, a.H, a.S, a.D)
    for n in "qkv":
        T[n] = torch.randn(shape, device=a.device, dtype=dt, requires_grad=True)
    T["g"] = torch.randn(shape, device=a.device, dtype=dt)
    print(f"sdpa: B {a.B} H {a.H} S {a.S} D {a.D} bf16; configs "
          + ", ".join(f"{b.name}:causal={int(c)}" for b, c in CONFIGS), flush=True)
    outs = {}
    for rep in range(2):
        for i in range(len(CONFIGS)):
            outs[i] = step(i)
    ref = {c: outs[CONFIGS.index((SDPBackend.MATH, c))] for c in (False, True)}
    for i, (b, c) in enumerate(CONFIGS):
        if outs[i] is not None and ref[c] is not None:
            err = ((outs[i].float() - ref[c].float()).norm() / ref[c].float().norm()).item()
            print(f"sdpa: {b.name} causal={int(c)} rel err vs MATH {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
