"""MLX primitives: which aten op each one's work matches, and the record of a compiled (fused) node.

A compiled node (``mlx::compiled``) records its inputs then its outputs as arguments, marked "in"
and "out" in ``op_concrete``: inputs read once, outputs written once, one FLOP per output element
per fused primitive (views and same-dtype casts are not work).
"""

from __future__ import annotations

import math
import re

from tracekit.ops.table import IO, OpFamily, register
from tracekit.ops.tensors import FLOAT_DTYPES, OpCall

# Primitives that launch no kernel: views and no-ops that share their input's buffer.
VIEWS = frozenset("Broadcast BroadcastAxes Transpose Reshape Slice Split ExpandDims Squeeze Flatten Unflatten "
                  "AsStrided View Copy StopGradient Depends".split())
# MLX primitive label -> the aten op whose cost model fits (torch.profiler spelling, no "aten::").
ATEN = {x: x.lower() for x in (
    "Exp Expm1 Log Log2 Log10 Log1p Sin Cos Tan Sinh Cosh Tanh Sigmoid Sign Sqrt Rsqrt Square Erf ErfInv Floor "
    "Ceil Round Real Imag Abs Remainder Maximum Minimum Softmax LogSumExp CumSum CumProd CumMax CumMin Sort "
    "ArgSort Sum Prod Contiguous Arange AddMM").split()}
ATEN.update({
    "Add": "add", "Subtract": "sub", "Multiply": "mul", "Divide": "div", "Power": "pow", "ArcTan2": "atan2",
    "LogAddExp": "logaddexp", "Equal": "eq", "NotEqual": "ne", "Greater": "gt", "GreaterEqual": "ge",
    "Less": "lt", "LessEqual": "le", "LogicalAnd": "logical_and", "LogicalOr": "logical_or",
    "LogicalNot": "logical_not", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor", "BitwiseInvert": "bitwise_not", "LeftShift": "bitwise_left_shift",
    "RightShift": "bitwise_right_shift", "Select": "where", "Negative": "neg", "ArcSin": "asin",
    "ArcCos": "acos", "ArcTan": "atan", "ArcSinh": "asinh", "ArcCosh": "acosh", "ArcTanh": "atanh",
    "Conjugate": "conj", "AsType": "_to_copy", "Full": "fill_", "Max": "amax", "Min": "amin", "And": "all",
    "Or": "any", "ArgReduce": "argmax", "CumLogSumExp": "logcumsumexp", "Concatenate": "cat",
    "Pad": "constant_pad_nd", "Gather": "index", "Scatter": "index_put_", "GatherAxis": "gather",
    "ScatterAxis": "scatter", "RMSNorm": "rms_norm", "LayerNorm": "layer_norm",
    "ScaledDotProductAttention": "scaled_dot_product_attention"})
COMPILED = "mlx::compiled"
_VOCAB = sorted(set(ATEN) | VIEWS | {"Compiled", "Matmul", "Scan", "Reduce"}, key=len, reverse=True)


def fused_parts(label: str) -> list[str]:
    """Primitive names in a Compiled label: CompiledBroadcastAddBroadcastMaximum -> [Broadcast, Add, ...]."""
    rest, parts = label[len("Compiled"):] if label.startswith("Compiled") else label, []
    while rest:
        word = next((w for w in _VOCAB if rest.startswith(w)), None) or re.match(r".[a-z0-9]*", rest).group(0)
        parts.append(word)                  # a known primitive name, else one CamelCase word
        rest = rest[len(word):]
    return parts



def _compiled_io(call: OpCall) -> IO:
    tensors = [call.tensor(i) for i in range(len(call.dims))]
    roles = call.concrete or []
    if any(t is None for t in tensors) or "out" not in roles:
        raise ValueError("shapes")
    return IO(tuple(t for t, r in zip(tensors, roles) if r == "in"),
              tuple(t for t, r in zip(tensors, roles) if r == "out"))


def _fused_work(call: OpCall) -> list[str]:
    return [x for x in fused_parts(call.kernel) if x not in VIEWS and x != "AsType"]


def _compiled_flops(call: OpCall, io: IO) -> float:
    return float(math.prod(io.writes[0].shape) * len(_fused_work(call)))


def _compiled_dtype(call: OpCall, io: IO) -> str | None:
    floats = [t.dtype for t in (*io.reads, *io.writes) if t.dtype in FLOAT_DTYPES[:-1]]
    return floats[0] if floats else None


register(OpFamily("mlx_compiled", (COMPILED,), "elementwise", _compiled_io, _compiled_flops, dtype=_compiled_dtype,
                  fused=lambda call: [x.lower() for x in _fused_work(call)],
                  model=lambda call: f"mlx compiled: inputs once + outputs once, {len(_fused_work(call))} FLOP/element"))
