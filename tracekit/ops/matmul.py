"""Matrix products: FLOPs 2·M·N·K per product; operands (and bias) read once, the result written once."""

from __future__ import annotations

import math
import re

from tracekit.ops.table import IO, OpFamily, aten, register
from tracekit.ops.tensors import SCALAR_TYPES, OpCall, Tensor, broadcast, need

_TF32_KERNEL = re.compile(r"tf32|s1688|s16816|tensorop_s", re.IGNORECASE)


def matmul_dtype(call: OpCall, io: IO) -> str:
    """The first operand's dtype; fp32 products run as tf32 when the kernel name says so."""
    dtype = io.reads[0].dtype
    if dtype == "fp32" and _TF32_KERNEL.search(call.kernel or ""):
        return "tf32"
    return dtype


def _like(t: Tensor, shape) -> Tensor:
    return Tensor(tuple(shape), t.dtype, t.itemsize)


def _with_out(call: OpCall, reads: list[Tensor], out: Tensor, first_extra: int) -> IO:
    """``mm(a, b, out=c)`` records ``c`` as one more input: it is written, not read."""
    extra = call.tensor(first_extra)
    if extra is not None and extra.shape == out.shape:
        return IO(tuple(reads), (extra,))
    return IO(tuple(reads), (out,))


def _mm_io(call: OpCall) -> IO:
    a, b = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    return _with_out(call, [a, b], _like(a, (a.shape[0], b.shape[1])), 2)


def _mm_flops(call: OpCall, io: IO) -> float:
    a, b = io.reads[0], io.reads[1]
    batch = math.prod(a.shape[:-2])
    return 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1]


def _ignores_bias(call: OpCall) -> bool:
    """``addmm``/``baddbmm(self, a, b, beta, alpha)`` with beta 0: PyTorch ignores ``self``."""
    beta = call.value(3)
    return isinstance(beta, (int, float)) and not isinstance(beta, bool) and beta == 0


def _addmm_io(call: OpCall) -> IO:
    bias, a, b = call.tensor(0), need(call.tensor(1), "A"), need(call.tensor(2), "B")
    reads = [a, b] + ([bias] if bias is not None and not _ignores_bias(call) else [])
    shape = a.shape[:-1] + b.shape[-1:]
    return _with_out(call, reads, _like(a, shape), 5)


def _addmm_flops(call: OpCall, io: IO) -> float:
    """2·batch·M·N·K + one add per output element when the bias is read (TraceLens counts it too)."""
    extra = 0.0 if len(io.reads) < 3 else float(math.prod(io.writes[0].shape))
    return _mm_flops(call, io) + extra


def _bmm_io(call: OpCall) -> IO:
    a, b = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    return _with_out(call, [a, b], _like(a, (a.shape[0], a.shape[1], b.shape[2])), 2)


def _padded(a: Tensor, b: Tensor) -> tuple[list[int], list[int], tuple[int, ...]]:
    """matmul's shapes with 1-D operands made 2-D, and the broadcast batch."""
    sa = ([1] if len(a.shape) == 1 else []) + list(a.shape)
    sb = list(b.shape) + ([1] if len(b.shape) == 1 else [])
    return sa, sb, broadcast(tuple(sa[:-2]), tuple(sb[:-2]))


def _matmul_io(call: OpCall) -> IO:
    a, b = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    sa, sb, batch = _padded(a, b)
    return IO((a, b), (_like(a, batch + (sa[-2], sb[-1])),))


def _matmul_flops(call: OpCall, io: IO) -> float:
    sa, sb, batch = _padded(io.reads[0], io.reads[1])
    return 2.0 * math.prod(batch) * sa[-2] * sa[-1] * sb[-1]


def _linear_io(call: OpCall) -> IO:
    x, w, bias = need(call.tensor(0), "input"), need(call.tensor(1), "weight"), call.tensor(2)
    return IO(tuple([x, w] + ([bias] if bias is not None else [])), (_like(x, x.shape[:-1] + (w.shape[0],)),))


def _linear_flops(call: OpCall, io: IO) -> float:
    """2·M·N·K, M all leading dims, + M·N for the bias add when there is a bias."""
    x, w = io.reads[0], io.reads[1]
    bias = float(math.prod(io.writes[0].shape)) if len(io.reads) > 2 else 0.0
    return 2.0 * math.prod(x.shape[:-1]) * w.shape[0] * w.shape[1] + bias


def _scaled_mm_io(call: OpCall) -> IO:
    """fp8 product ``_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)``:
    A, B, the scales (and bias) read; the result in ``out_dtype`` when the trace records it (a
    ScalarType number), else bf16 (2 bytes/element), what fp8 training and inference ask for."""
    a, b = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    extras = [t for t in (call.tensor(i) for i in range(2, 6)) if t is not None]
    code = call.value(6)
    dtype = SCALAR_TYPES.get(code, ("bf16", 2)) if isinstance(code, int) else ("bf16", 2)
    return IO(tuple([a, b] + extras), (Tensor((a.shape[0], b.shape[1]), *dtype),))


def _int_mm_io(call: OpCall) -> IO:
    a, b = need(call.tensor(0), "A"), need(call.tensor(1), "B")
    return IO((a, b), (Tensor((a.shape[0], b.shape[1]), "int32", 4),))


register(OpFamily("mm", aten("mm"), "gemm", _mm_io, _mm_flops, unit="matrix", dtype=matmul_dtype, fused=("mm",),
                  model="mm: 2MNK"))
register(OpFamily("addmm", aten("addmm"), "gemm", _addmm_io, _addmm_flops, unit="matrix", dtype=matmul_dtype,
                  fused=("mm", "add"),
                  model="addmm: 2MNK + MN bias adds, bias read once"))
register(OpFamily("bmm", aten("bmm"), "gemm", _bmm_io, _mm_flops, unit="matrix", dtype=matmul_dtype, fused=("bmm",),
                  model="bmm: 2·batch·MNK"))
register(OpFamily("baddbmm", aten("baddbmm"), "gemm", _addmm_io, _addmm_flops, unit="matrix", dtype=matmul_dtype,
                  fused=("bmm", "add"),
                  model="baddbmm: 2·batch·MNK + batch·MN bias adds"))
register(OpFamily("matmul", aten("matmul"), "gemm", _matmul_io, _matmul_flops, unit="matrix",
                  dtype=matmul_dtype, fused=("mm",), model="matmul: 2·batch·MNK (broadcast batch)"))
register(OpFamily("linear", aten("linear"), "gemm", _linear_io, _linear_flops, unit="matrix",
                  dtype=matmul_dtype, fused=("mm", "add"), model="linear: 2MNK (+ MN bias adds), M = all leading dims"))
register(OpFamily("_scaled_mm", aten("_scaled_mm"), "gemm", _scaled_mm_io, _mm_flops, unit="matrix",
                  dtype=lambda call, io: "fp8", fused=("mm",),
                  model="_scaled_mm: 2MNK, fp8 operands, result in out_dtype (bf16 when not recorded)"))
register(OpFamily("_int_mm", aten("_int_mm"), "gemm", _int_mm_io, _mm_flops, unit="matrix",
                  dtype=lambda call, io: "int8", fused=("mm",), model="_int_mm: 2MNK, int8 operands, int32 result"))
register(OpFamily("addbmm", aten("addbmm"), "gemm", None, unit="matrix", fused=("bmm", "add")))
register(OpFamily("_addmm_activation", aten("_addmm_activation"), "gemm", None, unit="matrix",
                  fused=lambda call: ["mm", "add", "gelu" if str(call.value(5)).strip() == "True" else "relu"]))
register(OpFamily("addmv", aten("addmv", "mv"), "gemv", None, unit="vector",
                  fused=lambda call: ["mv", "add"] if call.name.startswith("aten::addmv") else ["mv"]))
register(OpFamily("einsum", aten("einsum"), "gemm", None, unit="matrix"))


# GEMM op → which input is the activation (its leading dims are the batch's tokens)
GEMM_INPUT = {"aten::mm": 0, "aten::addmm": 1, "aten::linear": 0, "aten::matmul": 0, "aten::_scaled_mm": 0}


def gemm_tokens(op, dims) -> int | None:
    """The rows a GEMM op multiplies (its activation's leading dims), or None for another op or no shapes."""
    k = GEMM_INPUT.get(op) if isinstance(op, str) else None
    if k is None or not isinstance(dims, (list, tuple)) or len(dims) <= k:
        return None
    a = dims[k]
    if not isinstance(a, (list, tuple)) or len(a) < 2 or not all(isinstance(d, int) and not isinstance(d, bool)
                                                                 for d in a):
        return None
    return math.prod(a[:-1])
