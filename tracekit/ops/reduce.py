"""Norms, softmax and reductions: every tensor input read once, results written once.

Norm forward writes y (shaped like x) and the fp32 statistics backward reads (``_stats``);
~8 FLOPs/element. Softmax writes its result (fp32 when ``half_to_float``); 5
FLOPs/element. A reduction writes the reduced result (its size from the recorded dims; int64 for
argmax/argmin); one FLOP per input element.
"""

from __future__ import annotations

import math

from tracekit.ops.table import IO, OpFamily, aten, register
from tracekit.ops.tensors import OpCall, Tensor, need

NORMS = aten("layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm", "group_norm", "native_group_norm",
             "batch_norm", "native_batch_norm", "cudnn_batch_norm", "_batch_norm_impl_index", "instance_norm",
             "miopen_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
             "_native_batch_norm_legit_functional")
NORM_BACKWARDS = aten("native_layer_norm_backward", "native_group_norm_backward", "native_batch_norm_backward",
                      "cudnn_batch_norm_backward", "_fused_rms_norm_backward", "miopen_batch_norm_backward")
REDUCTIONS = ("sum mean amax amin max min argmax argmin prod var std any all norm linalg_vector_norm "
              "logsumexp nansum var_mean std_mean count_nonzero").split()


def _stats(call: OpCall, x: Tensor) -> list[Tensor]:
    """The fp32 statistics a forward norm writes for backward: mean and rstd per normalised row
    (layer norm: numel / prod(normalized_shape) rows; group norm: [N, groups]; RMS norm: rstd only),
    batch norm in training: save_mean and save_invstd [C] and the running stats it updates."""
    name = call.name
    if name == "aten::native_layer_norm":
        shape = call.value(1)
        inner = math.prod(shape) if isinstance(shape, list) and shape else x.shape[-1]
        rows = x.numel // inner
        return [Tensor((rows,), "fp32", 4)] * 2
    if name == "aten::_fused_rms_norm":
        shape = call.value(1)
        inner = math.prod(shape) if isinstance(shape, list) and shape else x.shape[-1]
        return [Tensor((x.numel // inner,), "fp32", 4)]
    if name == "aten::native_group_norm":
        n, groups = call.value(3), call.value(6)
        if not isinstance(n, int) or not isinstance(groups, int):
            raise ValueError("N and groups")
        return [Tensor((n, groups), "fp32", 4)] * 2
    if name in ("aten::native_batch_norm", "aten::_native_batch_norm_legit", "aten::cudnn_batch_norm",
                "aten::miopen_batch_norm") and call.value(5) is not False:
        running = [t for t in (call.tensor(3), call.tensor(4)) if t is not None]
        return [Tensor((x.shape[1],), "fp32", 4)] * 2 + running
    return []


def _norm_io(call: OpCall) -> IO:
    x = need(call.tensor(0), "input")
    return IO(tuple(call.tensors()), (x, *_stats(call, x)))


# (grad_out, input, weight, bias, output_mask) positions in each backward's signature; None: absent
NORM_BACKWARD_ARGS = {
    "aten::native_layer_norm_backward": (0, 1, 5, 6, 7),       # grad_out, input, shape, mean, rstd, w, b, mask
    "aten::native_group_norm_backward": (0, 1, 4, None, 9),    # grad_out, input, mean, rstd, w, N, C, HxW, g, mask
    "aten::native_batch_norm_backward": (0, 1, 2, None, 9),    # grad_out, input, w, rm, rv, sm, si, train, eps, mask
    "aten::_fused_rms_norm_backward": (0, 1, 4, None, 5),      # grad_out, input, shape, rstd, w, mask
    "aten::cudnn_batch_norm_backward": (1, 0, 2, None, None),  # input, grad_out, w, ... (all grads)
    "aten::miopen_batch_norm_backward": (1, 0, 2, None, None),
}


def _norm_backward_io(call: OpCall) -> IO:
    """grad_out, input, stats and weight read once (the bias's values are not needed); the gradients
    ``output_mask`` asks for written once: grad_input like input, grad_weight and grad_bias like the
    weight (whatever its rank)."""
    gy_at, x_at, w_at, b_at, mask_at = NORM_BACKWARD_ARGS[call.name]
    need(call.tensor(gy_at), "grad_out")
    x = need(call.tensor(x_at), "input")
    weight = call.tensor(w_at)
    mask = call.value(mask_at) if mask_at is not None else None
    mask = (list(mask) + [False, False])[:3] if isinstance(mask, (list, tuple)) and mask else [True, True, True]
    reads = [t for i, t in enumerate(call.tensor(i) for i in range(len(call.dims)))
             if t is not None and i != b_at]
    writes = ([x] if mask[0] else []) + ([weight] if weight is not None and mask[1] else []) + \
        ([weight] if weight is not None and mask[2] else [])
    return IO(tuple(reads), tuple(writes))


def _softmax_io(call: OpCall) -> IO:
    x = need(call.tensor(0), "input")
    half_to_float = call.value(2) is True and call.name in ("aten::_softmax", "aten::_log_softmax")
    return IO((x,), (Tensor(x.shape, "fp32", 4) if half_to_float else x,))


def _softmax_backward_io(call: OpCall) -> IO:
    gy, y = need(call.tensor(0), "grad_output"), need(call.tensor(1), "output")
    return IO((gy, y), (gy,))


def reduced_shape(shape: tuple[int, ...], dims, keepdim: bool = False) -> tuple[int, ...]:
    """The result shape of reducing ``dims`` (None or []: every dim) of ``shape``."""
    if dims is None or dims == [] or dims == "" or not shape:
        return ()
    dims = [dims] if isinstance(dims, int) else list(dims)
    axes = {d % len(shape) for d in dims}
    return tuple(1 if i in axes else s for i, s in enumerate(shape) if keepdim or i not in axes)


def _reduction_io(call: OpCall) -> IO:
    x = need(call.tensor(0), "input")
    at = 2 if call.name == "aten::linalg_vector_norm" else 1
    dims = call.value(at)
    if isinstance(dims, str):
        dims = None
    shape = reduced_shape(x.shape, dims, bool(call.value(at + 1)))
    dtype = ("int64", 8) if call.name.startswith("aten::argm") else (x.dtype, x.itemsize)
    return IO((x,), (Tensor(shape, *dtype),))


def _per_input_element(n: float):
    return lambda call, io: n * io.reads[0].numel


register(OpFamily("norm", NORMS, "norm", _norm_io, _per_input_element(8.0),
                  model="norm: inputs once + output once, 8 FLOPs/element"))
register(OpFamily("norm_backward", NORM_BACKWARDS, "norm", _norm_backward_io, _per_input_element(12.0),
                  model="norm backward: inputs once + grads once"))
register(OpFamily("softmax", aten("softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax",
                                  "_masked_softmax"), "softmax", _softmax_io, _per_input_element(5.0),
                  model="softmax: input once + output once, 5 FLOPs/element"))
register(OpFamily("softmax_backward", aten("_softmax_backward_data", "_log_softmax_backward_data"), "softmax",
                  _softmax_backward_io, _per_input_element(3.0),
                  model="softmax backward: two inputs once + grad once"))
register(OpFamily("reduction", aten(*REDUCTIONS), "reduction", _reduction_io, _per_input_element(1.0),
                  model="reduction: input once + result once"))
def _topk_io(call: OpCall) -> IO:
    """topk(self, k, dim, largest, sorted): self read, k values and int64 indices along dim written."""
    x, k = need(call.tensor(0), "self"), call.value(1)
    dim = call.value(2)
    dim = -1 if not isinstance(dim, int) else dim
    if not isinstance(k, int) or not x.shape:
        raise ValueError("k")
    shape = list(x.shape)
    shape[dim] = k
    return IO((x,), (Tensor(tuple(shape), x.dtype, x.itemsize), Tensor(tuple(shape), "int64", 8)))


def _sort_io(call: OpCall) -> IO:
    x = need(call.tensor(0), "self")
    return IO((x,), (x, Tensor(x.shape, "int64", 8)))


def _scan_io(call: OpCall) -> IO:
    x = need(call.tensor(0), "self")
    return IO((x,), (x,))


register(OpFamily("topk", aten("topk"), "reduction", _topk_io, _per_input_element(1.0),
                  model="topk: input once, k values + int64 indices written"))
register(OpFamily("sort", aten("sort", "argsort"), "reduction", _sort_io, _per_input_element(1.0),
                  model="sort: input once, values + int64 indices written (a lower bound: sorts take passes)"))
register(OpFamily("scan", aten("cumsum", "cumprod", "logcumsumexp"), "reduction", _scan_io, _per_input_element(1.0),
                  model="scan: input once, result once"))
