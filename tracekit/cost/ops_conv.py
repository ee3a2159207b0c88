"""Convolutions: FLOPs 2·N·Cout·prod(out spatial)·(Cin/groups)·prod(kernel); bytes = x + w + b + y."""

from __future__ import annotations

import math

from tracekit.cost.ops_matmul import matmul_dtype
from tracekit.cost.registry import Cost, OpCall, need, register

# where stride/padding/dilation/transposed/groups sit in each op's arguments
_LAYOUTS = {
    "aten::convolution": dict(stride=3, padding=4, dilation=5, transposed=6, groups=8, bias=2),
    "aten::_convolution": dict(stride=3, padding=4, dilation=5, transposed=6, groups=8, bias=2),
    "aten::conv1d": dict(stride=3, padding=4, dilation=5, groups=6, bias=2),
    "aten::conv2d": dict(stride=3, padding=4, dilation=5, groups=6, bias=2),
    "aten::conv3d": dict(stride=3, padding=4, dilation=5, groups=6, bias=2),
    "aten::cudnn_convolution": dict(padding=2, stride=3, dilation=4, groups=5),
    "aten::miopen_convolution": dict(bias=2, padding=3, stride=4, dilation=5, groups=6),
}


def _tuple(value, rank: int, default: int) -> list[int]:
    if value is None or value == "":
        return [default] * rank
    if isinstance(value, int):
        return [value] * rank
    values = list(value)
    return values * rank if len(values) == 1 else values


def conv_shapes(call: OpCall):
    """(x, w, bias, output shape, flops) of a forward convolution call."""
    at = _LAYOUTS[call.name]
    x, w = need(call.tensor(0), "input"), need(call.tensor(1), "weight")
    bias = call.tensor(at["bias"]) if "bias" in at else None
    rank = len(x.shape) - 2
    stride = _tuple(call.value(at["stride"]), rank, 1)
    padding = _tuple(call.value(at["padding"]), rank, 0)
    dilation = _tuple(call.value(at["dilation"]), rank, 1)
    groups = call.value(at["groups"]) or 1
    transposed = bool(call.value(at["transposed"])) if "transposed" in at else False
    n, kernel = x.shape[0], w.shape[2:]
    if transposed:
        cout = w.shape[1] * groups
        spatial = [(i - 1) * s - 2 * p + d * (k - 1) + 1
                   for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation, kernel)]
        flops = 2.0 * n * math.prod(x.shape[1:]) * w.shape[1] * math.prod(kernel)
    else:
        cout = w.shape[0]
        spatial = [(i + 2 * p - d * (k - 1) - 1) // s + 1
                   for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation, kernel)]
        flops = 2.0 * n * cout * math.prod(spatial) * (x.shape[1] // groups) * math.prod(kernel)
    return x, w, bias, (n, cout, *spatial), flops


@register(*_LAYOUTS)
def convolution(call: OpCall) -> Cost:
    x, w, bias, out_shape, flops = conv_shapes(call)
    nbytes = x.nbytes + w.nbytes + (bias.nbytes if bias else 0) + math.prod(out_shape) * x.itemsize
    return Cost(flops=flops, bytes=float(nbytes), dtype=matmul_dtype(call, x), unit="matrix",
                model="conv: 2·N·Cout·out·Cin/groups·kernel")


@register("aten::convolution_backward")
def convolution_backward(call: OpCall) -> Cost:
    """grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
    groups, output_mask: each requested gradient costs one forward's FLOPs."""
    gy, x, w = need(call.tensor(0), "grad_output"), need(call.tensor(1), "input"), need(call.tensor(2), "weight")
    groups = call.value(9) or 1
    kernel = w.shape[2:]
    mask = call.value(10) or [True, True, True]
    fwd = 2.0 * math.prod(gy.shape) * (x.shape[1] // groups) * math.prod(kernel)
    if bool(call.value(7)):
        fwd = 2.0 * math.prod(x.shape) * w.shape[1] * math.prod(kernel)
    flops = fwd * (int(bool(mask[0])) + int(bool(mask[1])))
    written = (x.nbytes if mask[0] else 0) + (w.nbytes if mask[1] else 0)
    if len(mask) > 2 and mask[2]:
        written += gy.shape[1] * gy.itemsize
    return Cost(flops=flops, bytes=float(gy.nbytes + x.nbytes + w.nbytes + written),
                dtype=matmul_dtype(call, x), unit="matrix",
                model="conv backward: one forward's FLOPs per requested gradient")
