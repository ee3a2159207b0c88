"""Data movement: copies, dtype casts, fills, cat, gathers and the multi-tensor (``_foreach_*``) ops.

A copy reads its source once and writes its destination once (a cast writes the new dtype); a fill
only writes; cat reads every part and writes their sum; a gather reads the indices and the rows it
gathers (not the whole table) and writes the result; a ``_foreach_*`` op reads every tensor list once
and writes the first list (or a new list like it).
"""

from __future__ import annotations

import math

from tracekit.ops.table import IO, OpFamily, aten, register
from tracekit.ops.tensors import SCALAR_TYPES, OpCall, Tensor, need, picked, result_dtype

def _like(t: Tensor, shape=None, dtype: tuple[str, int] | None = None) -> Tensor:
    return Tensor(tuple(shape if shape is not None else t.shape), *(dtype or (t.dtype, t.itemsize)))


def _copy_io(call: OpCall) -> IO:
    dst, src = need(call.tensor(0), "dst"), need(call.tensor(1), "src")
    return IO((src,), (dst,))


def _clone_io(call: OpCall) -> IO:
    """clone/contiguous keep the dtype; _to_copy/to write the dtype their ScalarType argument names."""
    src = need(call.tensor(0), "self")
    code = call.value(1) if call.name in ("aten::_to_copy", "aten::to") else None
    return IO((src,), (_like(src, dtype=SCALAR_TYPES.get(code) if isinstance(code, int) else None),))


def _fill_io(call: OpCall) -> IO:
    return IO((), (need(call.tensor(0), "self"),))


def _cat_io(call: OpCall) -> IO:
    parts = call.tensor_list(0)
    if not parts:
        raise ValueError("no tensor list")
    total = sum(p.numel for p in parts)
    out = result_dtype(parts) or parts[0]            # mixed dtypes promote (ViT's fp32 class token + bf16)
    return IO(tuple(parts), (Tensor((total,), out.dtype, out.itemsize),))


def _gather_io(call: OpCall) -> IO:
    """embedding(weight, indices) / index_select(self, dim, index): the gathered rows are what is read."""
    if call.name == "aten::embedding":
        table, index = need(call.tensor(0), "weight"), need(call.tensor(1), "indices")
        row_shape = table.shape[1:]
    else:
        table, index = need(call.tensor(0), "self"), need(call.tensor(2), "index")
        dim = call.value(1) or 0
        row_shape = (math.prod(table.shape) // table.shape[dim],)
    shape = index.shape + tuple(row_shape)
    return IO((index, picked(table, shape)), (_like(table, shape),))


# torch's profiler writes the shapes of a TensorList of more than 30 tensors as []
# (TENSOR_LIST_DISPLAY_LENGTH_LIMIT, torch/csrc/profiler/util.h): an optimizer over more parameters has none
LONG_LIST = "Kineto writes a list of more than 30 tensors as [] (an execution trace gives them)"


def _lists(call: OpCall) -> list[list[Tensor]]:
    lists = [call.tensor_list(i) for i in range(len(call.dims))]
    lists = [tl for tl in lists if tl]
    if not lists:
        raise ValueError(f"no tensor lists: {LONG_LIST}")
    return lists


def _distinct(lists: list[list[Tensor]]) -> list[list[Tensor]]:
    """Input lists after the first (the destination) that repeat another input list's shapes are
    counted once: AdamW's
    ``_foreach_addcmul_(exp_avg_sq, grads, grads, 1 - beta2)`` passes the gradients twice, and the
    fewest bytes the call can move read them once (the floor is a lower bound)."""
    seen, out = set(), lists[:1]
    for tl in lists[1:]:
        key = tuple((t.shape, t.dtype) for t in tl)
        if key not in seen:
            seen.add(key)
            out.append(tl)
    return out


def _foreach_io(call: OpCall) -> IO:
    lists = _lists(call)
    first = tuple(lists[0])
    if call.name in ("aten::_foreach_norm", "aten::_foreach_max"):
        return IO(first, tuple(Tensor((), t.dtype, t.itemsize) for t in first))
    if call.name == "aten::_foreach_copy_":
        return IO(tuple(t for tl in lists[1:] for t in tl), first)      # the destination is only written
    if call.name == "aten::_foreach_zero_":
        return IO((), first)
    return IO(tuple(t for tl in _distinct(lists) for t in tl), first)


def _foreach_flops(call: OpCall, io: IO) -> float:
    lists = _lists(call)
    return float(sum(t.numel for t in lists[0]) * (len(lists) > 1 or call.name.startswith("aten::_foreach_norm")))


FOREACH = ("add sub mul div addcmul addcdiv lerp copy zero sqrt rsqrt neg exp log abs sign reciprocal sigmoid "
           "maximum minimum clamp_min clamp_max pow").split()


def _adam_io(call: OpCall) -> IO:
    """_fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, ...): params,
    grads, both moments (and max moments with amsgrad) and steps read once; params and moments written."""
    lists = [call.tensor_list(i) for i in range(6)]
    if not all(lists[:4]):
        raise ValueError(f"TensorList shapes not recorded: {LONG_LIST}")
    params, grads, avgs, sqs, maxes, steps = lists
    writes = (*params, *avgs, *sqs, *maxes)
    return IO((*params, *grads, *avgs, *sqs, *maxes, *steps), writes)


def _copy_note(call: OpCall) -> str:
    return "copy: source read once, destination written once"


# Copies and fills are "memcpy"/"memset" work as CPU ops; a kernel that copies or fills is elementwise
# work (classify says so).
register(OpFamily("copy_", aten("copy_"), "memcpy", _copy_io, dtype=lambda call, io: io.writes[0].dtype,
                  model=_copy_note))
register(OpFamily("clone", aten("clone", "contiguous", "_to_copy", "to"), "memcpy", _clone_io,
                  model="copy: read once + written once (in the dtype it converts to)"))
register(OpFamily("fill", aten("fill_", "zero_"), "memset", _fill_io, model="fill: result written once"))
register(OpFamily("factory", aten("zeros", "ones", "full"), "memset"))
register(OpFamily("fill_like", aten("zeros_like", "ones_like", "full_like", "normal_", "uniform_", "bernoulli_",
                                    "random_", "exponential_"), "elementwise", _fill_io,
                  model="fill: result written once"))
register(OpFamily("cat", aten("cat", "stack", "_cat"), "memcpy", _cat_io,
                  model="cat: every part read once, result written once"))
register(OpFamily("gather_rows", aten("embedding", "index_select"), "elementwise", _gather_io,
                  model="gather: indices + gathered rows read once, result written once"))
register(OpFamily("foreach", aten(*[f"_foreach_{op}" for op in FOREACH], "_foreach_norm", "_foreach_max",
                                  inplace=True),
                  "elementwise", _foreach_io, _foreach_flops, dtype=lambda call, io: _lists(call)[0][0].dtype,
                  model="foreach: lists read once (a repeated list once), result list written once"))
register(OpFamily("fused_adam", aten("_fused_adam_", "_fused_adamw_", "_fused_adam", "_fused_adamw"), "elementwise",
                  _adam_io, lambda call, io: 15.0 * sum(t.numel for t in call.tensor_list(0)),
                  dtype=lambda call, io: io.reads[0].dtype,
                  model="fused Adam(W): params, grads, moments read once, params + moments written, ~15 FLOPs/element"))


def _arange_io(call: OpCall) -> IO:
    """arange(end, dtype, ...), arange(start, end, dtype, ...), arange(start, end, step, dtype, ...),
    arange(start, end, step, out=): ceil((end − start) / step) elements written, in the dtype
    recorded (the out tensor's; int64 when none is recorded)."""
    n = len(call.dims)
    values = [call.value(i) for i in range(n)]
    start, end, step, code = {4: (values[0], values[1], values[2], None), 5: (0, values[0], 1, values[1]),
                              6: (values[0], values[1], 1, values[2]),
                              7: (values[0], values[1], values[2], values[3])}.get(n, (None,) * 4)
    if not all(isinstance(v, (int, float)) for v in (start, end, step)) or not step:
        raise ValueError("arange bounds")
    count = max(0, math.ceil((end - start) / step))
    out = call.tensor(3) if n == 4 else None
    dtype = (out.dtype, out.itemsize) if out is not None else \
        SCALAR_TYPES.get(code) if isinstance(code, int) else None
    return IO((), (Tensor((count,), *(dtype or ("int64", 8))),))


register(OpFamily("arange", aten("arange"), "elementwise", _arange_io, lambda call, io: float(io.writes[0].numel),
                  model="arange: result written once"))


# upsample_<mode>(input, output_size, [align_corners,] scales...) and the .vec overloads
# (input, output_size?, [align_corners,] scale_factors?): output size from Concrete Inputs
_UPSAMPLE_TAPS = {"nearest": 0, "nearest_exact": 0, "linear": 3, "bilinear": 7, "bicubic": 31, "trilinear": 15}


def _upsample_size(call: OpCall, x: Tensor) -> tuple[int, ...]:
    rank = len(x.shape) - 2
    size = call.value(1)
    if isinstance(size, (list, tuple)) and len(size) == rank and all(isinstance(v, int) for v in size):
        return tuple(size)
    for i in range(2, 5):                     # scale_factors: a list of rank floats (after align_corners)
        scales = call.value(i)
        if isinstance(scales, (list, tuple)) and len(scales) == rank and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in scales):
            return tuple(int(math.floor(d * f)) for d, f in zip(x.shape[2:], scales))
    raise ValueError("upsample: neither output_size nor scale_factors recorded (Concrete Inputs)")


def _upsample_io(call: OpCall) -> IO:
    x = need(call.tensor(0), "input")
    return IO((x,), (_like(x, x.shape[:2] + _upsample_size(call, x)),))


def _upsample_flops(call: OpCall, io: IO) -> float:
    mode = call.name.split("::")[-1].split(".")[0].removeprefix("upsample_")[:-2]      # bilinear2d -> bilinear
    return float(_UPSAMPLE_TAPS.get(mode, 0) * io.writes[0].numel)


register(OpFamily("upsample", aten(*[f"upsample_{m}" for m in ("nearest1d", "nearest2d", "nearest3d",
                                                               "nearest_exact1d", "nearest_exact2d",
                                                               "nearest_exact3d", "linear1d", "bilinear2d",
                                                               "bicubic2d", "trilinear3d")]),
                  "elementwise", _upsample_io, _upsample_flops,
                  model="upsample: input read once, output (output_size, or input x scale_factors) written once; "
                        "FLOPs per output element: nearest 0, linear 3, bilinear 7, bicubic 31, trilinear 15"))
