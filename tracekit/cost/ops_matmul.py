"""Matrix products: FLOPs 2·M·N·K per product, bytes = operands read once + result written once."""

from __future__ import annotations

import math
import re

from tracekit.cost.registry import Cost, OpCall, Tensor, broadcast, need, register

_TF32_KERNEL = re.compile(r"tf32|s1688|s16816|tensorop_s", re.IGNORECASE)


def matmul_dtype(call: OpCall, t: Tensor) -> str:
    """fp32 products run as tf32 when the kernel name says so (torch's default leaves tf32 off)."""
    if t.dtype == "fp32" and _TF32_KERNEL.search(call.kernel or ""):
        return "tf32"
    return t.dtype


def _gemm(call: OpCall, batch: int, m: int, n: int, k: int, reads: list[Tensor], out_itemsize: int,
          model: str, dtype_from: Tensor) -> Cost:
    out_bytes = batch * m * n * out_itemsize
    return Cost(flops=2.0 * batch * m * n * k, bytes=float(sum(t.nbytes for t in reads) + out_bytes),
                dtype=matmul_dtype(call, dtype_from), unit="matrix", model=model)


@register("aten::mm")
def mm(call: OpCall) -> Cost:
    a, b = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    (m, k), (_, n) = a.shape, b.shape
    return _gemm(call, 1, m, n, k, [a, b], a.itemsize, "mm: 2MNK", a)


@register("aten::addmm")
def addmm(call: OpCall) -> Cost:
    bias, a, b = call.tensor(0), need(call.tensor(1), "A"), need(call.tensor(2), "B")
    (m, k), (_, n) = a.shape, b.shape
    reads = [a, b] + ([bias] if bias is not None else [])
    return _gemm(call, 1, m, n, k, reads, a.itemsize, "addmm: 2MNK, bias read once", a)


@register("aten::bmm")
def bmm(call: OpCall) -> Cost:
    a, b = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    (bt, m, k), (_, _, n) = a.shape, b.shape
    return _gemm(call, bt, m, n, k, [a, b], a.itemsize, "bmm: 2·batch·MNK", a)


@register("aten::baddbmm")
def baddbmm(call: OpCall) -> Cost:
    c, a, b = call.tensor(0), need(call.tensor(1), "A"), need(call.tensor(2), "B")
    (bt, m, k), (_, _, n) = a.shape, b.shape
    reads = [a, b] + ([c] if c is not None else [])
    return _gemm(call, bt, m, n, k, reads, a.itemsize, "baddbmm: 2·batch·MNK", a)


@register("aten::matmul")
def matmul(call: OpCall) -> Cost:
    a, b = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    sa, sb = list(a.shape), list(b.shape)
    if len(sa) == 1:
        sa = [1] + sa
    if len(sb) == 1:
        sb = sb + [1]
    m, k = sa[-2], sa[-1]
    n = sb[-1]
    batch = math.prod(broadcast(tuple(sa[:-2]), tuple(sb[:-2])))
    return _gemm(call, batch, m, n, k, [a, b], a.itemsize, "matmul: 2·batch·MNK (broadcast batch)", a)


@register("aten::linear")
def linear(call: OpCall) -> Cost:
    x, w, bias = need(call.tensor(0), "input"), need(call.tensor(1), "weight"), call.tensor(2)
    n, k = w.shape
    m = math.prod(x.shape[:-1])
    reads = [x, w] + ([bias] if bias is not None else [])
    return _gemm(call, 1, m, n, k, reads, x.itemsize, "linear: 2MNK, M = all leading dims", x)


@register("aten::_scaled_mm")
def scaled_mm(call: OpCall) -> Cost:
    """fp8 product; the result dtype (out_dtype) is rarely recorded, so the result is counted as bf16."""
    a, b = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    (m, k), (_, n) = a.shape, b.shape
    extras = [t for t in (call.tensor(i) for i in range(2, 6)) if t is not None]   # scales, bias
    return Cost(flops=2.0 * m * n * k, bytes=float(a.nbytes + b.nbytes + sum(t.nbytes for t in extras) + m * n * 2),
                dtype="fp8", unit="matrix", model="_scaled_mm: 2MNK, result assumed 2 bytes/element")
