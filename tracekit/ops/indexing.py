"""Indexed reads and writes: the rows or elements an index names are what is read or written.

index_copy_/index_put_ write the indexed region of ``self`` (the source's size) in place; gather
reads one element of ``self`` per index; scatter writes one per index; embedding backward writes
the whole weight gradient once (zeroed and accumulated); the NLL loss reads one logit per target.
"""

from __future__ import annotations

import math

from tracekit.ops.table import IO, OpFamily, aten, register
from tracekit.ops.tensors import OpCall, Tensor, broadcast, need, picked


def _like(t: Tensor, shape) -> Tensor:
    return Tensor(tuple(shape), t.dtype, t.itemsize)


def _index_copy_io(call: OpCall) -> IO:
    """index_copy_(self, dim, index, source): index + source read, the source-sized region written."""
    self_, index, source = need(call.tensor(0), "self"), need(call.tensor(2), "index"), need(call.tensor(3), "source")
    return IO((index, source), (_like(self_, source.shape),))


def _index_put_io(call: OpCall) -> IO:
    """index_put_(self, indices, values, accumulate): values read, the region they go to written (and
    read too when accumulating); index tensors are counted when the trace records their shapes."""
    self_, values = need(call.tensor(0), "self"), need(call.tensor(2), "values")
    region = _like(self_, values.shape)
    indices = call.tensor_list(1) if isinstance(call.dims[1], list) and call.dims[1] else []
    reads = (*indices, values) + ((region,) if call.value(3) is True else ())
    return IO(reads, (region,))


def _index_add_io(call: OpCall) -> IO:
    """index_add_(self, dim, index, source, alpha): index + source read, the indexed region of ``self``
    (the source's size) read and written back; out-of-place ``index_add`` reads ``self`` whole and
    writes a result of its size."""
    self_, index, source = need(call.tensor(0), "self"), need(call.tensor(2), "index"), need(call.tensor(3), "source")
    if call.name.endswith("_"):
        region = _like(self_, source.shape)
        return IO((index, source, region), (region,))
    return IO((self_, index, source), (self_,))


def _gather_io(call: OpCall) -> IO:
    """gather(self, dim, index, sparse_grad[, out]): index + one element of self per index read."""
    self_, index = need(call.tensor(0), "self"), need(call.tensor(2), "index")
    out = call.tensor(4)
    return IO((index, picked(self_, index.shape)), (out if out is not None else _like(self_, index.shape),))


def _scatter_io(call: OpCall) -> IO:
    """scatter/scatter_add(self, dim, index, src): index + src read, one element per index written
    (scatter_add reads those elements too)."""
    self_, index = need(call.tensor(0), "self"), need(call.tensor(2), "index")
    src = call.tensor(3)
    region = _like(self_, index.shape)
    reads = (index,) + ((src,) if src is not None else ()) + ((region,) if "add" in call.name else ())
    return IO(reads, (region,))


def _embedding_backward_io(call: OpCall) -> IO:
    """embedding_dense_backward(grad_output [N, D], indices, num_weights, padding_idx, scale): the
    gradient rows and indices read, the [num_weights, D] weight gradient written once."""
    grad, index = need(call.tensor(0), "grad_output"), need(call.tensor(1), "indices")
    rows = call.value(2)
    if not isinstance(rows, int):
        raise ValueError("num_weights")
    return IO((grad, index), (_like(grad, (rows, grad.shape[-1])),))


def _nll_loss_io(call: OpCall) -> IO:
    """nll_loss_forward(self [N, C], target [N], weight, reduction, ignore_index): the target and one
    logit per target read (a gather), the loss and total weight written."""
    logits, target = need(call.tensor(0), "self"), need(call.tensor(1), "target")
    weight = call.tensor(2)
    reduced = call.value(3) != 0
    out = _like(logits, () if reduced else target.shape)
    return IO((target, _like(logits, target.shape)) + ((weight,) if weight else ()), (out, _like(logits, ())))


def _nll_loss_backward_io(call: OpCall) -> IO:
    """nll_loss_backward(grad_output, self [N, C], target, weight, reduction, ignore_index, total_weight):
    the target (and the weight of each target's class) read, one gradient entry per row written. The
    [N, C] zeros around them are written before, by the op's own ``zero_`` (a fill kernel of its own,
    costed as aten::fill_), so they are not counted here again."""
    grad, logits, target = call.tensor(0), need(call.tensor(1), "self"), need(call.tensor(2), "target")
    weight = call.tensor(3)
    reads = (target,) + ((grad,) if grad is not None else ()) + ((picked(weight, target.shape),) if weight else ())
    return IO(reads, (_like(logits, target.shape),))


def _elements(call: OpCall, io: IO) -> float:
    return float(sum(t.numel for t in io.writes))


register(OpFamily("index_copy", aten("index_copy_", "index_copy"), "elementwise", _index_copy_io,
                  model="index_copy: index + source read, the indexed region written"))
register(OpFamily("index_put", aten("index_put_", "index_put", "_index_put_impl_"), "elementwise", _index_put_io,
                  model="index_put: values (+ indices) read, the indexed region written (accumulate: read too)"))
register(OpFamily("index_add", aten("index_add_", "index_add"), "elementwise", _index_add_io,
                  lambda call, io: float(need(call.tensor(3), "source").numel),
                  model="index_add: index + source read, the indexed region read and written (one add per "
                        "source element)"))
register(OpFamily("gather", aten("gather"), "elementwise", _gather_io,
                  model="gather: index + one element per index read, result written"))
register(OpFamily("scatter", aten("scatter", "scatter_", "scatter_add", "scatter_add_"), "elementwise", _scatter_io,
                  model="scatter: index + src read, one element per index written"))
register(OpFamily("embedding_backward", aten("embedding_dense_backward"), "elementwise", _embedding_backward_io,
                  _elements, model="embedding backward: grad rows + indices read, weight grad written once"))
register(OpFamily("nll_loss", aten("nll_loss_forward", "nll_loss2d_forward"), "reduction", _nll_loss_io,
                  lambda call, io: float(io.reads[0].numel),
                  model="nll_loss: target + one logit per target read, loss written"))
register(OpFamily("nll_loss_backward", aten("nll_loss_backward", "nll_loss2d_backward"), "elementwise",
                  _nll_loss_backward_io, model="nll_loss backward: target read, one gradient entry per row written "
                                               "(the zeros: the op's fill kernel)"))
def _index_io(call: OpCall) -> IO:
    """index(self, indices): integer index tensors are a gather: the indices and the elements they pick
    read, the result written. An undefined entry (None, from the execution trace: type '') keeps its
    dim whole; the result is the dims before the indexed ones, the broadcast index shape, the dims
    after (indexed dims apart: the broadcast shape first, as PyTorch does). Boolean masks give a
    data-dependent size, and Kineto records no index shapes (the execution trace does): no cost then."""
    x = need(call.tensor(0), "self")
    dims = call.dims[1] if len(call.dims) > 1 else None
    if not isinstance(dims, list) or not dims or not all(isinstance(d, list) for d in dims):
        raise ValueError("index shapes not recorded (an execution trace gives them)")
    kinds = call.types[1] if len(call.types) > 1 else None       # per-index dtypes where an ET gave them
    if kinds == "bool" or (isinstance(kinds, list) and any(k == "bool" for k in kinds)):
        raise ValueError("boolean mask index: the result size depends on the data")
    at = [j for j, k in enumerate(kinds) if k != ""] if isinstance(kinds, list) else list(range(len(dims)))
    indices = call.tensor_list(1) if isinstance(kinds, list) else [Tensor(tuple(d), "int64", 8) for d in dims]
    if not at or len(indices) != len(at) or at[-1] >= len(x.shape):
        raise ValueError("index list does not match self's dims")
    index_shape = broadcast(*(t.shape for t in indices))
    rest = [d for j, d in enumerate(x.shape) if j not in at]
    if at == list(range(at[0], at[-1] + 1)):
        shape = tuple(x.shape[:at[0]]) + index_shape + tuple(x.shape[at[-1] + 1:])
    else:
        shape = index_shape + tuple(rest)
    return IO((*indices, picked(x, shape)), (_like(x, shape),))


register(OpFamily("index", aten("index"), "elementwise", _index_io,
                  model="index: indices + the rows they pick read, result written"))
register(OpFamily("indexing", aten("scatter_reduce", "embedding_backward",
                                   "select_backward", "slice_backward", "repeat_interleave"), "elementwise"))


def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pairs(value, default) -> list[int]:
    if value in (None, "", []):
        return list(default)
    values = [value] if isinstance(value, int) else list(value)
    return values * 2 if len(values) == 1 else values


def _pool_shape(call: OpCall, dilation_at: int | None, ceil_at: int) -> tuple[Tensor, tuple[int, ...], list[int]]:
    """(input, output shape, kernel) of max_pool2d(self, kernel, stride, padding, dilation, ceil_mode) or
    avg_pool2d(self, kernel, stride, padding, ceil_mode, ...)."""
    x = need(call.tensor(0), "self")
    kernel = _pairs(call.value(1), ())
    stride = _pairs(call.value(2), kernel)
    padding = _pairs(call.value(3), (0, 0))
    dilation = _pairs(call.value(dilation_at), (1, 1)) if dilation_at is not None else [1, 1]
    ceil = bool(call.value(ceil_at))
    spatial = [_pool_out(x.shape[-2 + i], kernel[i], stride[i], padding[i], dilation[i], ceil) for i in range(2)]
    return x, tuple(x.shape[:-2]) + tuple(spatial), kernel


def _max_pool_io(call: OpCall) -> IO:
    x, shape, _ = _pool_shape(call, 4, 5)
    values = _like(x, shape)
    writes = (values,) + ((Tensor(shape, "int64", 8),) if "indices" in call.name else ())
    return IO((x,), writes)


def _avg_pool_io(call: OpCall) -> IO:
    x, shape, _ = _pool_shape(call, None, 4)
    return IO((x,), (_like(x, shape),))


def _pool_flops(call: OpCall, io: IO) -> float:
    kernel = _pairs(call.value(1), ())
    return float(io.writes[0].numel * math.prod(kernel))


def _adaptive_io(call: OpCall) -> IO:
    x = need(call.tensor(0), "self")
    size = _pairs(call.value(1), ())
    return IO((x,), (_like(x, tuple(x.shape[:-2]) + tuple(size)),))


def _pool_backward_io(call: OpCall) -> IO:
    """grad_output (and max pooling's indices) read, the input-shaped gradient written."""
    grad, x = need(call.tensor(0), "grad_output"), need(call.tensor(1), "self")
    indices = call.tensor(7) if "indices" in call.name else None
    return IO((grad,) + ((indices,) if indices is not None else ()), (x,))


register(OpFamily("max_pool", aten("max_pool2d_with_indices", "max_pool2d"), "reduction", _max_pool_io, _pool_flops,
                  model="max pool: input once, values (+ int64 indices) written, kernel-size compares/output"))
register(OpFamily("avg_pool", aten("avg_pool2d"), "reduction", _avg_pool_io, _pool_flops,
                  model="avg pool: input once, output once, kernel-size adds/output"))
register(OpFamily("adaptive_avg_pool", aten("adaptive_avg_pool2d", "_adaptive_avg_pool2d"), "reduction", _adaptive_io,
                  lambda call, io: float(io.reads[0].numel), model="adaptive avg pool: input once, output once"))
register(OpFamily("pool_backward", aten("max_pool2d_with_indices_backward", "avg_pool2d_backward"), "reduction",
                  _pool_backward_io, lambda call, io: float(io.writes[0].numel),
                  model="pool backward: grad (+ indices) read, input gradient written"))
