"""Inductor Triton kernels: bytes from the tensor arguments the launching op recorded.

Inductor names each launch's CPU op after the kernel (``triton_poi_fused_relu_0``) and records its
arguments' shapes and dtypes. Each tensor argument is read or written once; a pointer the kernel
both reads and writes (``in_out_ptr``) counts twice, which only the kernel source can tell: when a
capture bundle kept the source, its signature gives each pointer's role.
"""

from __future__ import annotations

import math
import re

from tracekit.cost.registry import Cost, OpCall, Tensor

INDUCTOR_KERNEL = re.compile(r"^triton_(poi|per|red|tem|for|mm|bmm)_")
_MATMUL_OPS = re.compile(r"(?:^|_)(mm|addmm|bmm|baddbmm|matmul|linear|convolution)(?:_|$)")


def _gemm_dims(tensors: list[Tensor]) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of a matmul template from its operands: A[..,M,K] and B[..,K,N] with an [..,M,N] output."""
    mats = [t for t in tensors if len(t.shape) >= 2]
    for a in mats:
        for b in mats:
            if a is b or a.shape[:-2] != b.shape[:-2]:
                continue
            m, k = a.shape[-2:]
            k2, n = b.shape[-2:]
            if k == k2 and any(c.shape[-2:] == (m, n) and c is not a and c is not b for c in mats):
                return math.prod(a.shape[:-2]), m, n, k
    return None


def triton_cost(call: OpCall, fused: list[str], roles: list[str] | None) -> Cost | str:
    tensors_by_arg = [call.tensor(i) for i in range(len(call.dims))]
    tensors = [t for t in tensors_by_arg if t is not None]
    if not tensors:
        return "Inductor kernel without recorded tensor arguments"
    nbytes = 0
    for i, t in enumerate(tensors_by_arg):
        if t is None:
            continue
        twice = roles is not None and i < len(roles) and roles[i].startswith("in_out_ptr")
        nbytes += t.nbytes * (2 if twice else 1)
    source = "pointer roles from kernel source" if roles else "each tensor argument once (no kernel source)"
    dtype = next((t.dtype for t in tensors if t.dtype in ("fp64", "fp32", "fp16", "bf16", "fp8")), "fp32")
    if any(_MATMUL_OPS.search(op) for op in fused):
        dims = _gemm_dims(tensors)
        if dims is None:
            return "Inductor matmul template: operand shapes not recognised"
        batch, m, n, k = dims
        return Cost(flops=2.0 * batch * m * n * k, bytes=float(nbytes), dtype=dtype, unit="matrix",
                    model=f"Inductor template: 2MNK; bytes {source}")
    numel = max(t.numel for t in tensors)
    return Cost(flops=float(numel * max(1, len(fused))), bytes=float(nbytes), dtype=dtype, unit="vector",
                model=f"Inductor kernel: bytes {source}; 1 FLOP/element per fused op")
