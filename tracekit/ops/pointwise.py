"""Elementwise ops: every tensor input read once, the result written once.

The result takes the broadcast shape of the tensor inputs and the dtype PyTorch's type promotion
gives it (a bf16 tensor times a Python number is bf16: the number is a 0-dim tensor that does not
promote); comparisons give bool; in-place variants (``add_``) write their first input. FLOPs are
one per result element per op (addcmul-style ops: two); these ops are memory-bound on every device.
"""

from __future__ import annotations

from tracekit.ops.table import IO, OpFamily, aten, register
from tracekit.ops.tensors import FLOAT_DTYPES, OpCall, Tensor, broadcast, result_dtype

UNARY = ("relu gelu silu sigmoid tanh exp exp2 expm1 log log1p log2 log10 neg abs sqrt rsqrt reciprocal sin "
         "cos erf erfinv hardswish hardsigmoid hardtanh leaky_relu elu selu celu softplus mish clamp clamp_min "
         "clamp_max threshold sign sgn floor ceil round trunc frac bitwise_not nan_to_num "
         "square sinh cosh tan asin acos atan logit tril triu").split()
BINARY = ("add sub mul div true_divide floor_divide maximum minimum pow rsub fmod remainder atan2 "
          "bitwise_and bitwise_or bitwise_xor logical_and logical_or hypot copysign xlogy "
          "threshold_backward gelu_backward silu_backward sigmoid_backward tanh_backward "
          "hardswish_backward leaky_relu_backward masked_fill").split()
COMPARE = "eq ne lt le gt ge".split()
PREDICATES = "isnan isinf isneginf isposinf isfinite signbit logical_not".split()   # one input, bool out
TERNARY = "where addcmul addcdiv lerp".split()


def out_argument(call: OpCall, arity: int) -> Tensor | None:
    """The ``out=`` tensor of a call: a tensor recorded as the last argument, past the op's own
    ``arity`` tensor inputs (``mul(a, b, out=c)`` records c third). It is written, not read."""
    last = len(call.dims) - 1
    if last < arity:
        return None
    return call.tensor(last)


def elementwise_io(call: OpCall, out_dtype: tuple[str, int] | None = None, arity: int = 1) -> IO:
    inputs = call.tensors()
    out = out_argument(call, arity)
    if out is not None:
        inputs = [t for i, t in enumerate(call.tensor(i) for i in range(len(call.dims) - 1)) if t is not None]
    if not inputs:
        raise ValueError("no tensor inputs")
    if out is not None:
        return IO(tuple(inputs), (out,))
    if call.name.endswith("_"):
        return IO(tuple(inputs), (inputs[0],))
    base = result_dtype(inputs)
    dtype, size = out_dtype or (base.dtype, base.itemsize)
    if out_dtype is None and base.dtype not in FLOAT_DTYPES and _makes_float(call, inputs):
        dtype, size = "fp32", 4                    # integers with a Python float, or true division
    result = Tensor(broadcast(*(t.shape for t in inputs)), dtype, size)
    if call.name == "aten::native_dropout" and call.value(2) is not False:
        return IO(tuple(inputs), (result, Tensor(result.shape, "bool", 1)))     # the mask backward reads
    return IO(tuple(inputs), (result,))


def _makes_float(call: OpCall, inputs: list[Tensor]) -> bool:
    """An integer elementwise op whose result PyTorch makes float (the default dtype, fp32): a Python
    float (a 0-dim double, or a float Scalar) takes part, or it is true division."""
    if call.name in ("aten::div", "aten::true_divide") and not isinstance(call.value(2), str):
        return True
    if any(t.dtype == "fp64" and not t.shape for t in inputs):
        return True
    return any(call.types[i] == "Scalar" and isinstance(call.value(i), float) for i in range(len(call.types)))


def _per_element(n: int):
    return lambda call, io: float(n * io.writes[0].numel)


def _result_dtype(call: OpCall, io: IO) -> str:
    found = result_dtype(list(io.reads))
    return found.dtype if found is not None and found.dtype in ("fp64", "fp32", "fp16", "bf16", "fp8") else "fp32"


def _clamp_min_fused(call: OpCall) -> list[str]:
    """Eager ``torch.relu`` runs as ``clamp_min(x, 0)``: its work is a relu."""
    return ["relu"] if str(call.value(1)).strip() in ("0", "0.", "0.0") else ["clamp_min"]


def _note(call: OpCall) -> str:
    return "elementwise: inputs once + result once" + (" (in place)" if call.name.endswith("_") else "")


CLAMPS = ("clamp", "clamp_max", "hardtanh", "threshold")     # bounds may be tensors: up to 3 tensor inputs


def _io(arity: int, out_dtype: tuple[str, int] | None = None):
    return lambda call: elementwise_io(call, out_dtype, arity)


register(OpFamily("unary", aten(*[u for u in UNARY if u not in CLAMPS + ("clamp_min",)], "native_dropout", "dropout",
                                "alpha_dropout", inplace=True), "elementwise", _io(1), _per_element(1),
                  dtype=_result_dtype, model=_note))
register(OpFamily("clamp", aten(*CLAMPS, inplace=True), "elementwise", _io(3), _per_element(1),
                  dtype=_result_dtype, model=_note))
register(OpFamily("clamp_min", aten("clamp_min", inplace=True), "elementwise", _io(2), _per_element(1),
                  dtype=_result_dtype, fused=_clamp_min_fused, model=_note))
register(OpFamily("binary", aten(*BINARY, inplace=True), "elementwise", _io(2), _per_element(1),
                  dtype=_result_dtype, model=_note))
register(OpFamily("compare", aten(*COMPARE, inplace=True), "elementwise", _io(2, ("bool", 1)), _per_element(1),
                  dtype=_result_dtype, model=_note))
register(OpFamily("predicate", aten(*PREDICATES, inplace=True), "elementwise", _io(1, ("bool", 1)), _per_element(1),
                  dtype=_result_dtype, model=_note))
register(OpFamily("ternary", aten(*TERNARY, inplace=True), "elementwise", _io(3), _per_element(2),
                  dtype=_result_dtype, model=_note))
