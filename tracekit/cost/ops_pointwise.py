"""Elementwise ops, copies and fills: every tensor input read once, the result written once.

The result takes the broadcast shape of the tensor inputs; in-place variants (``add_``) write their
first input. FLOPs are one per result element per op (addcmul-style ops: two); on every device
these ops are memory-bound long before that count matters.
"""

from __future__ import annotations

import math

from tracekit.cost.registry import Cost, OpCall, broadcast, need, register

UNARY = ("relu gelu silu sigmoid tanh exp exp2 expm1 log log1p log2 neg abs sqrt rsqrt reciprocal sin cos "
         "erf erfinv hardswish hardsigmoid hardtanh leaky_relu elu selu celu softplus mish clamp clamp_min "
         "clamp_max threshold sign sgn floor ceil round trunc frac bitwise_not logical_not nan_to_num "
         "square sinh cosh tan asin acos atan sigmoid_ logit silu_ gelu_ relu_ mul_scalar").split()
BINARY = ("add sub mul div true_divide floor_divide maximum minimum pow rsub fmod remainder atan2 "
          "bitwise_and bitwise_or bitwise_xor logical_and logical_or hypot copysign xlogy "
          "threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward "
          "hardswish_backward leaky_relu_backward masked_fill").split()
COMPARE = "eq ne lt le gt ge isnan isinf".split()
TERNARY = "where addcmul addcdiv lerp".split()


def elementwise_cost(call: OpCall, flops_per_element: int = 1, out_itemsize: int | None = None) -> Cost:
    inputs = call.tensors()
    if not inputs:
        raise ValueError("no tensor inputs")
    in_place = call.name.endswith("_")
    if in_place:
        out = inputs[0]
        out_shape, size = out.shape, out.itemsize
    else:
        out_shape = broadcast(*(t.shape for t in inputs))
        floats = [t for t in inputs if t.dtype in ("fp64", "fp32", "fp16", "bf16")]
        size = out_itemsize or max((t.itemsize for t in floats), default=inputs[0].itemsize)
    numel = math.prod(out_shape)
    nbytes = sum(t.nbytes for t in inputs) + numel * size
    dtype = next((t.dtype for t in inputs if t.dtype in ("fp64", "fp32", "fp16", "bf16")), "fp32")
    return Cost(flops=float(numel * flops_per_element), bytes=float(nbytes), dtype=dtype, unit="vector",
                model="elementwise: inputs once + result once" + (" (in place)" if in_place else ""))


def _names(ops: list[str]) -> list[str]:
    return [f"aten::{op}" for op in ops] + [f"aten::{op}_" for op in ops if not op.endswith("_")]


@register(*_names(UNARY), *_names(BINARY), "aten::native_dropout", "aten::dropout")
def pointwise(call: OpCall) -> Cost:
    return elementwise_cost(call)


@register(*_names(COMPARE))
def compare(call: OpCall) -> Cost:
    return elementwise_cost(call, out_itemsize=1)


@register(*_names(TERNARY))
def ternary(call: OpCall) -> Cost:
    return elementwise_cost(call, flops_per_element=2)


@register("aten::copy_")
def copy_(call: OpCall) -> Cost:
    dst, src = need(call.tensor(0), "dst"), need(call.tensor(1), "src")
    return Cost(flops=0.0, bytes=float(src.nbytes + dst.nbytes), dtype=dst.dtype, unit="vector",
                model="copy: source read once, destination written once")


@register("aten::clone", "aten::contiguous", "aten::_to_copy", "aten::to")
def clone(call: OpCall) -> Cost:
    src = need(call.tensor(0), "self")
    return Cost(flops=0.0, bytes=float(2 * src.nbytes), dtype=src.dtype, unit="vector",
                model="copy: read once + written once (same dtype assumed)")


@register("aten::cat", "aten::stack", "aten::_cat")
def cat(call: OpCall) -> Cost:
    parts = call.tensor_list(0)
    if not parts:
        raise ValueError("no tensor list")
    total = sum(t.nbytes for t in parts)
    return Cost(flops=0.0, bytes=float(2 * total), dtype=parts[0].dtype, unit="vector",
                model="cat: every part read once, result written once")


@register("aten::fill_", "aten::zero_", "aten::zeros_like", "aten::ones_like", "aten::full_like",
          "aten::normal_", "aten::uniform_", "aten::bernoulli_")
def fill(call: OpCall) -> Cost:
    out = need(call.tensor(0), "self")
    return Cost(flops=0.0, bytes=float(out.nbytes), dtype=out.dtype, unit="vector",
                model="fill: result written once")


@register("aten::embedding", "aten::index_select")
def gather_rows(call: OpCall) -> Cost:
    """embedding(weight, indices) / index_select(self, dim, index): gathered rows read, result written."""
    if call.name == "aten::embedding":
        table, index = need(call.tensor(0), "weight"), need(call.tensor(1), "indices")
        row = math.prod(table.shape[1:])
    else:
        table, index = need(call.tensor(0), "self"), need(call.tensor(2), "index")
        dim = call.value(1) or 0
        row = math.prod(table.shape) // table.shape[dim]
    moved = index.numel * row * table.itemsize
    return Cost(flops=0.0, bytes=float(index.nbytes + 2 * moved), dtype=table.dtype, unit="vector",
                model="gather: indices + gathered rows read once, result written once")



@register("aten::_foreach_copy_", "aten::_foreach_add_", "aten::_foreach_mul_", "aten::_foreach_addcmul_",
          "aten::_foreach_addcdiv_", "aten::_foreach_sub_", "aten::_foreach_div_", "aten::_foreach_lerp_",
          "aten::_foreach_zero_", "aten::_foreach_sqrt", "aten::_foreach_add", "aten::_foreach_mul")
def foreach(call: OpCall) -> Cost:
    """Multi-tensor ops over tensor lists: every list read once, the first list (or a new one) written."""
    lists = [call.tensor_list(i) for i in range(len(call.dims))]
    lists = [tl for tl in lists if tl]
    if not lists:
        raise ValueError("no tensor lists")
    first = sum(t.nbytes for t in lists[0])
    read = sum(t.nbytes for tl in lists for t in tl)
    if call.name == "aten::_foreach_copy_":
        read -= first                              # the destination is only written
    elif call.name == "aten::_foreach_zero_":
        read = 0
    numel = sum(t.numel for t in lists[0])
    return Cost(flops=float(numel * (len(lists) > 1)), bytes=float(read + first), dtype=lists[0][0].dtype,
                unit="vector", model="foreach: lists read once, result list written once")
