"""Norms, softmax and reductions: every tensor input read once, results written once."""

from __future__ import annotations

import math

from tracekit.cost.registry import Cost, OpCall, need, register

NORMS = ("aten::layer_norm aten::native_layer_norm aten::rms_norm aten::_fused_rms_norm aten::group_norm "
         "aten::native_group_norm aten::batch_norm aten::native_batch_norm aten::cudnn_batch_norm "
         "aten::_batch_norm_impl_index aten::instance_norm aten::miopen_batch_norm "
         "aten::_native_batch_norm_legit aten::_native_batch_norm_legit_no_training").split()
NORM_BACKWARDS = ("aten::native_layer_norm_backward aten::native_group_norm_backward "
                  "aten::native_batch_norm_backward aten::cudnn_batch_norm_backward "
                  "aten::_fused_rms_norm_backward aten::miopen_batch_norm_backward").split()
REDUCTIONS = ("sum mean amax amin max min argmax argmin prod var std any all norm linalg_vector_norm "
              "logsumexp nansum var_mean std_mean count_nonzero").split()


@register(*NORMS)
def norm(call: OpCall) -> Cost:
    """Inputs (x, weight, bias, running stats) read once; y (shaped like x) written; ~8 FLOPs/element."""
    x = need(call.tensor(0), "input")
    rows = math.prod(x.shape[:-1]) if "layer" in call.name or "rms" in call.name else x.shape[0]
    stats = 2 * rows * 4 if call.name.startswith("aten::native_") else 0     # mean/rstd in fp32
    nbytes = sum(t.nbytes for t in call.tensors()) + x.nbytes + stats
    return Cost(flops=8.0 * x.numel, bytes=float(nbytes), dtype=x.dtype, unit="vector",
                model="norm: inputs once + output once, 8 FLOPs/element")


@register(*NORM_BACKWARDS)
def norm_backward(call: OpCall) -> Cost:
    """grad_out, input, stats and weight read once; grad_input (and weight/bias grads) written once."""
    tensors = call.tensors()
    gy = need(call.tensor(0), "grad_out")
    weight = max((t for t in tensors[2:] if len(t.shape) == 1), key=lambda t: t.numel, default=None)
    written = gy.nbytes + (2 * weight.nbytes if weight else 0)
    return Cost(flops=12.0 * gy.numel, bytes=float(sum(t.nbytes for t in tensors) + written),
                dtype=gy.dtype, unit="vector", model="norm backward: inputs once + grads once")


@register("aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax",
          "aten::_safe_softmax", "aten::_masked_softmax")
def softmax(call: OpCall) -> Cost:
    x = need(call.tensor(0), "input")
    out_size = 4 if call.value(2) is True and call.name in ("aten::_softmax", "aten::_log_softmax") else x.itemsize
    return Cost(flops=5.0 * x.numel, bytes=float(x.nbytes + x.numel * out_size), dtype=x.dtype, unit="vector",
                model="softmax: input once + output once, 5 FLOPs/element")


@register("aten::_softmax_backward_data", "aten::_log_softmax_backward_data")
def softmax_backward(call: OpCall) -> Cost:
    gy, y = need(call.tensor(0), "grad_output"), need(call.tensor(1), "output")
    return Cost(flops=3.0 * gy.numel, bytes=float(gy.nbytes + y.nbytes + gy.nbytes), dtype=gy.dtype,
                unit="vector", model="softmax backward: two inputs once + grad once")


def _reduced_numel(shape: tuple[int, ...], dims) -> int:
    if dims is None or dims == [] or dims == "":
        return 1
    dims = [dims] if isinstance(dims, int) else list(dims)
    kept = [s for axis, s in enumerate(shape) if axis not in {d % len(shape) for d in dims}]
    return math.prod(kept)


@register(*[f"aten::{r}" for r in REDUCTIONS])
def reduction(call: OpCall) -> Cost:
    """Input read once, the reduced result written once (result size from the recorded dims)."""
    x = need(call.tensor(0), "input")
    dims = call.value(2) if call.name == "aten::linalg_vector_norm" else call.value(1)
    if isinstance(dims, str):
        dims = None
    out = _reduced_numel(x.shape, dims) if len(x.shape) else 1
    out_size = 8 if call.name.startswith(("aten::argm",)) else x.itemsize
    return Cost(flops=float(x.numel), bytes=float(x.nbytes + out * out_size), dtype=x.dtype, unit="vector",
                model="reduction: input once + result once")
