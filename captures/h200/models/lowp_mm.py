"""Low-precision GEMMs: fp8 e4m3 torch._scaled_mm (bf16 out, per-tensor fp32 scales) and int8 torch._int_mm.

One step = one call of step(kind) (capture with --step-fn lowp_mm:step). Call order: fp8, int8
(warm-up: use --warmup 2), then --calls x fp8, then --calls x int8 (recorded: --steps 2*calls).
Operands are quantized once before the calls (not in any step). M = N = K = --n.
"""
import argparse

import torch

T = {}


def step(kind):
    if kind == "fp8":
        return torch._scaled_mm(T["a8"], T["b8"].t(), scale_a=T["sa"], scale_b=T["sb"], out_dtype=torch.bfloat16)
    return torch._int_mm(T["ai"], T["bi"])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    torch.manual_seed(0)
    n, dev = a.n, a.device
    A = torch.randn(n, n, device=dev)
    B = torch.randn(n, n, device=dev)          # (N, K); b operand = B.t(), column-major as _scaled_mm needs
    fmax = torch.finfo(torch.float8_e4m3fn).max
    sa, sb = A.abs().max() / fmax, B.abs().max() / fmax
    T["a8"] = (A / sa).to(torch.float8_e4m3fn)
    T["b8"] = (B / sb).to(torch.float8_e4m3fn)
    T["sa"], T["sb"] = sa.float(), sb.float()
    T["ai"] = torch.randint(-128, 128, (n, n), device=dev, dtype=torch.int8)
    T["bi"] = torch.randint(-128, 128, (n, n), device=dev, dtype=torch.int8)
    print(f"lowp_mm: n {n}; fp8 operands {2 * n * n} bytes, bf16 out {2 * n * n} bytes; int8 operands {2 * n * n} bytes, "
          f"int32 out {4 * n * n} bytes; {2 * n ** 3} FLOP (or int ops) per call", flush=True)
    kinds = ["fp8", "int8"] + ["fp8"] * a.calls + ["int8"] * a.calls
    outs = [step(k) for k in kinds]
    ref = A @ B.t()
    e8 = ((outs[-a.calls - 1].float() - ref).norm() / ref.norm()).item()
    ri = T["ai"].float() @ T["bi"].float()
    ei = ((outs[-1].float() - ri).norm() / ri.norm()).item()
    print(f"lowp_mm: fp8 rel err vs fp32 {e8:.2e}; int8 rel err vs float {ei:.2e}", flush=True)


if __name__ == "__main__":
    main()
