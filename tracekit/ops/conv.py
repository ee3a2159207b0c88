"""Convolutions: FLOPs 2·N·Cout·prod(out spatial)·(Cin/groups)·prod(kernel) (+ one add per output
element with a bias); bytes = x + w + b + y.

x counts the input positions some window reads: a strided conv whose stride passes its kernel (the 1×1
stride-2 downsample of a ResNet) reads a quarter of its input, as Nsight Compute's DRAM counters show.
Backward: each gradient in ``output_mask`` costs one forward's FLOPs and writes a tensor the size of
what it is the gradient of (grad_input like x, grad_weight like w, grad_bias of Cout elements); x is
read where the forward windows read it.
"""

from __future__ import annotations

import math

from tracekit.ops.matmul import matmul_dtype
from tracekit.ops.table import IO, OpFamily, aten, register
from tracekit.ops.tensors import OpCall, Tensor, need

# where stride/padding/dilation/transposed/groups/bias sit in each op's arguments
LAYOUTS = {
    "aten::convolution": dict(stride=3, padding=4, dilation=5, transposed=6, output_padding=7, groups=8, bias=2),
    "aten::_convolution": dict(stride=3, padding=4, dilation=5, transposed=6, output_padding=7, groups=8, bias=2),
    "aten::conv1d": dict(stride=3, padding=4, dilation=5, groups=6, bias=2),
    "aten::conv2d": dict(stride=3, padding=4, dilation=5, groups=6, bias=2),
    "aten::conv3d": dict(stride=3, padding=4, dilation=5, groups=6, bias=2),
    "aten::cudnn_convolution": dict(padding=2, stride=3, dilation=4, groups=5),
    "aten::miopen_convolution": dict(bias=2, padding=3, stride=4, dilation=5, groups=6),
    # _conv_depthwise2d(self, weight, kernel_size, bias, stride, padding, dilation): groups = Cin
    "aten::_conv_depthwise2d": dict(bias=3, stride=4, padding=5, dilation=6),
}
DEPTHWISE = "aten::_conv_depthwise2d"     # PyTorch's own CUDA depthwise kernels: CUDA cores, not tensor cores


def _tuple(value, rank: int, default: int) -> list[int]:
    if value is None or value == "":
        return [default] * rank
    if isinstance(value, int):
        return [value] * rank
    values = list(value)
    return values * rank if len(values) == 1 else values


def touched(size: int, out: int, k: int, s: int, p: int, d: int) -> int:
    """Input positions along one dim that some output's window reads (padding excluded)."""
    if d == 1 and s <= k:                            # windows abut or overlap: one span
        return max(0, min(size, (out - 1) * s - p + k) - max(0, -p))
    return len({v for o in range(out) for j in range(k) if 0 <= (v := o * s - p + j * d) < size})


def read_input(x: Tensor, kernel, out_spatial, stride, padding, dilation) -> Tensor:
    """``x`` as a forward convolution (or its weight gradient) reads it: the positions its windows touch."""
    spatial = [touched(i, o, k, s, p, d) for i, o, k, s, p, d in
               zip(x.shape[2:], out_spatial, kernel, stride, padding, dilation)]
    stored = x.shape[0] * x.shape[1] * math.prod(spatial)
    return Tensor(x.shape, x.dtype, x.itemsize, stored=stored, partial=True) if stored < math.prod(x.shape) else x


def conv_shapes(call: OpCall):
    """(x, w, bias, output shape, flops) of a forward convolution call."""
    at = LAYOUTS[call.name.rsplit(".", 1)[0] if call.name not in LAYOUTS else call.name]
    x, w = need(call.tensor(0), "input"), need(call.tensor(1), "weight")
    bias = call.tensor(at["bias"]) if "bias" in at else None
    rank = len(x.shape) - 2
    stride = _tuple(call.value(at["stride"]), rank, 1)
    padding = _tuple(call.value(at["padding"]), rank, 0)
    dilation = _tuple(call.value(at["dilation"]), rank, 1)
    groups = (call.value(at["groups"]) or 1) if "groups" in at else x.shape[1]     # depthwise: one per channel
    transposed = bool(call.value(at["transposed"])) if "transposed" in at else False
    n, kernel = x.shape[0], w.shape[2:]
    if transposed:
        cout = w.shape[1] * groups
        extra = _tuple(call.value(at["output_padding"]), rank, 0) if "output_padding" in at else [0] * rank
        spatial = [(i - 1) * s - 2 * p + d * (k - 1) + op + 1
                   for i, s, p, d, k, op in zip(x.shape[2:], stride, padding, dilation, kernel, extra)]
        flops = 2.0 * n * math.prod(x.shape[1:]) * w.shape[1] * math.prod(kernel)
    else:
        cout = w.shape[0]
        spatial = [(i + 2 * p - d * (k - 1) - 1) // s + 1
                   for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation, kernel)]
        flops = 2.0 * n * cout * math.prod(spatial) * (x.shape[1] // groups) * math.prod(kernel)
        if x.stored is None:
            x = read_input(x, kernel, spatial, stride, padding, dilation)
    return x, w, bias, (n, cout, *spatial), flops


def _conv_io(call: OpCall) -> IO:
    x, w, bias, out_shape, _ = conv_shapes(call)
    return IO((x, w) + ((bias,) if bias else ()), (Tensor(tuple(out_shape), x.dtype, x.itemsize),))


def _conv_flops(call: OpCall, io: IO) -> float:
    """2·N·Cout·out·Cin/groups·kernel, + one add per output element when the op adds a bias."""
    _, _, bias, out_shape, flops = conv_shapes(call)
    return flops + (float(math.prod(out_shape)) if bias else 0.0)


def _mask(call: OpCall) -> list:
    return call.value(10) or [True, True, True]


def _conv_backward_io(call: OpCall) -> IO:
    """grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
    groups, output_mask."""
    gy, x, w = need(call.tensor(0), "grad_output"), need(call.tensor(1), "input"), need(call.tensor(2), "weight")
    mask = _mask(call)
    writes = ([x] if mask[0] else []) + ([w] if mask[1] else [])
    if len(mask) > 2 and mask[2]:
        writes.append(Tensor((gy.shape[1],), gy.dtype, gy.itemsize))
    x_read = x
    args = [call.value(i) for i in (4, 5, 6)]                     # stride, padding, dilation as recorded
    if not bool(call.value(7)) and x.stored is None and all(a is not None for a in args):
        rank = len(x.shape) - 2
        stride, padding, dilation = _tuple(args[0], rank, 1), _tuple(args[1], rank, 0), _tuple(args[2], rank, 1)
        kernel = w.shape[2:]
        out = [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation,
                                                                                kernel)]
        if out == list(gy.shape[2:]):                             # the arguments say what grad_output's size does
            x_read = read_input(x, kernel, out, stride, padding, dilation)
    return IO((gy, x_read, w), tuple(writes))


def _conv_backward_flops(call: OpCall, io: IO) -> float:
    gy, x, w = io.reads
    groups = call.value(9) or 1
    kernel = w.shape[2:]
    fwd = 2.0 * math.prod(gy.shape) * (x.shape[1] // groups) * math.prod(kernel)
    if bool(call.value(7)):
        fwd = 2.0 * math.prod(x.shape) * w.shape[1] * math.prod(kernel)
    mask = _mask(call)
    return fwd * (int(bool(mask[0])) + int(bool(mask[1])))


def _conv_dtype(call: OpCall, io: IO) -> str:
    return matmul_dtype(call, IO((io.reads[0] if "backward" not in call.name else io.reads[1],), ()))


register(OpFamily("convolution", tuple(k for k in LAYOUTS if k != DEPTHWISE), "conv", _conv_io,
                  _conv_flops, unit="matrix", dtype=_conv_dtype,
                  model="conv: 2·N·Cout·out·Cin/groups·kernel (+ out bias adds)"))
register(OpFamily("conv_depthwise", (DEPTHWISE,), "conv", _conv_io, _conv_flops,
                  unit="vector", dtype=_conv_dtype, fused=("convolution",),
                  model="depthwise conv: 2·N·Cout·out·kernel (groups = Cin; + out bias adds), vector units"))
register(OpFamily("convolution_backward", aten("convolution_backward"), "conv", _conv_backward_io,
                  _conv_backward_flops, unit="matrix", dtype=_conv_dtype,
                  model="conv backward: one forward's FLOPs per requested gradient"))
