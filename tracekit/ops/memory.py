"""Data movement: copies, dtype casts, fills, cat, gathers and the multi-tensor (``_foreach_*``) ops.

A copy reads its source once and writes its destination once (a cast writes the new dtype); a fill
only writes; cat reads every part and writes their sum; a gather reads the indices and the rows it
gathers (not the whole table) and writes the result; a ``_foreach_*`` op reads every tensor list once
and writes the first list (or a new list like it).
"""

from __future__ import annotations

import math

from tracekit.ops.table import IO, OpFamily, aten, register
from tracekit.ops.tensors import SCALAR_TYPES, OpCall, Tensor, need

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
    return IO(tuple(parts), (Tensor((total,), parts[0].dtype, parts[0].itemsize),))


def _gather_io(call: OpCall) -> IO:
    """embedding(weight, indices) / index_select(self, dim, index): the gathered rows are what is read."""
    if call.name == "aten::embedding":
        table, index = need(call.tensor(0), "weight"), need(call.tensor(1), "indices")
        row_shape = table.shape[1:]
    else:
        table, index = need(call.tensor(0), "self"), need(call.tensor(2), "index")
        dim = call.value(1) or 0
        row_shape = (math.prod(table.shape) // table.shape[dim],)
    rows = _like(table, index.shape + tuple(row_shape))
    return IO((index, rows), (rows,))


def _lists(call: OpCall) -> list[list[Tensor]]:
    lists = [call.tensor_list(i) for i in range(len(call.dims))]
    lists = [tl for tl in lists if tl]
    if not lists:
        raise ValueError("no tensor lists")
    return lists


def _foreach_io(call: OpCall) -> IO:
    lists = _lists(call)
    first = tuple(lists[0])
    reads = [t for tl in lists for t in tl]
    if call.name == "aten::_foreach_copy_":
        reads = reads[len(first):]                 # the destination is only written
    elif call.name == "aten::_foreach_zero_":
        reads = []
    return IO(tuple(reads), first)


def _foreach_flops(call: OpCall, io: IO) -> float:
    lists = _lists(call)
    return float(sum(t.numel for t in lists[0]) * (len(lists) > 1))


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
register(OpFamily("foreach", aten("_foreach_copy_", "_foreach_add_", "_foreach_mul_", "_foreach_addcmul_",
                                  "_foreach_addcdiv_", "_foreach_sub_", "_foreach_div_", "_foreach_lerp_",
                                  "_foreach_zero_", "_foreach_sqrt", "_foreach_add", "_foreach_mul"),
                  "elementwise", _foreach_io, _foreach_flops, dtype=lambda call, io: _lists(call)[0][0].dtype,
                  model="foreach: lists read once, result list written once"))
