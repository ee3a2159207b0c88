"""What each kernel fused: ``fused_ops`` from kernel names, launching ops and Inductor sources.

View-like ops (view, reshape, t, permute, ...) move no data and are left out of ``fused_ops``;
they are kept in ``VIEW_OPS`` so a reader can see the rule.
"""

from __future__ import annotations

import re

import pandas as pd

VIEW_OPS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "unsqueeze", "squeeze",
            "expand", "slice", "select", "as_strided", "alias", "view_as", "narrow", "split", "unbind",
            "squeeze_copy", "unsqueeze_copy", "view_copy", "permute_copy", "expand_copy", "t_copy",
            "transpose_copy", "slice_copy", "lift_fresh", "detach", "_reshape_alias", "unfold"}

# multi-token aten names that appear inside Inductor kernel names (longest first is tried)
KNOWN_OPS = sorted({
    "native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
    "native_dropout", "_to_copy", "_unsafe_view", "_softmax", "_log_softmax", "log_softmax",
    "scaled_dot_product_attention", "embedding_dense_backward", "native_layer_norm_backward",
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
    "_softmax_backward_data", "convolution_backward", "constant_pad_nd", "index_put", "index_select",
    "masked_fill", "clamp_min", "clamp_max", "scatter_add", "select_backward", "slice_backward",
    "as_strided", "view_as", "bitwise_and", "bitwise_or", "bitwise_not", "logical_and", "logical_not",
    "logical_or", "floor_divide", "true_divide", "rms_norm", "_fused_rms_norm", "layer_norm",
    "group_norm", "batch_norm", "full_like", "zeros_like", "ones_like", "new_zeros", "new_empty",
    "empty_like", "nan_to_num", "squeeze_copy", "unsqueeze_copy", "view_copy", "permute_copy",
    "expand_copy", "t_copy", "transpose_copy", "slice_copy", "lift_fresh", "_reshape_alias",
    "avg_pool2d", "max_pool2d", "max_pool2d_with_indices", "upsample_nearest2d", "upsample_bilinear2d",
    "linalg_vector_norm", "var_mean", "addcmul", "addcdiv", "leaky_relu", "hardswish", "hardsigmoid",
    "scalar_tensor", "_scaled_mm", "baddbmm", "addmm", "bmm", "mm", "clone", "copy", "copy_",
    "split_with_sizes", "_weight_norm_interface", "repeat_interleave",
}, key=lambda s: -s.count("_"))
_KNOWN_TOKENS = {op: op.strip("_").split("_") for op in KNOWN_OPS}

INDUCTOR_NAME = re.compile(r"^triton_(poi|per|red|tem|for)_fused_?(.*?)(?:_\d+)?$")
OLD_TRITON_NAME = re.compile(r"^triton__?\d")
ATTENTION = re.compile(r"flash|fmha|attention|attn|_sdpa", re.IGNORECASE)
VENDOR_GEMM = re.compile(r"gemm|nvjet|cutlass|cublas|cijk_|xmma|hipblaslt", re.IGNORECASE)
BIAS_EPILOGUE = re.compile(r"_bias|bias_|epilogue.*bias|linearcombination.*bias", re.IGNORECASE)
RELU_EPILOGUE = re.compile(r"relu", re.IGNORECASE)
GELU_EPILOGUE = re.compile(r"gelu", re.IGNORECASE)


def ops_from_inductor_name(name: str) -> list[str] | None:
    """``triton_tem_fused_addmm_relu_t_0`` → ["addmm", "relu"]; None when the name carries no ops."""
    m = INDUCTOR_NAME.match(name)
    if not m:
        return None
    body = m.group(2)
    tokens = body.split("_")
    ops: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "":
            i += 1
            continue
        for op, parts in _KNOWN_TOKENS.items():
            if tokens[i:i + len(parts)] == parts:
                ops.append(op.lstrip("_") if op.lstrip("_") in _KNOWN_TOKENS else op)
                i += len(parts)
                break
        else:
            ops.append(tokens[i])
            i += 1
    return [op for op in ops if op not in VIEW_OPS and op.lstrip("_") not in VIEW_OPS] or None


def _plain(op: str) -> str:
    return op.split("::")[-1].rstrip("_") if op.endswith("_") and not op.endswith("__") else op.split("::")[-1]


def fused_ops_of(name: str, op) -> list[str]:
    """The ops one kernel performs, lowercase aten-style names (views left out)."""
    from_name = ops_from_inductor_name(name)
    if from_name is not None:
        return from_name
    if OLD_TRITON_NAME.match(name):
        return ["unknown"]
    plain = _plain(op).lower() if isinstance(op, str) else None
    if ATTENTION.search(name) or (plain and "attention" in plain):
        return ["mm", "softmax", "mm"]
    if VENDOR_GEMM.search(name):
        base = "addmm" if plain in ("addmm", "linear") and not BIAS_EPILOGUE.search(name) else "mm"
        if plain in ("bmm", "baddbmm"):
            base = plain
        ops = [base]
        if BIAS_EPILOGUE.search(name) or plain in ("addmm", "baddbmm"):
            ops = ["mm", "add"] if base in ("mm", "addmm") else [base, "add"]
        if RELU_EPILOGUE.search(name):
            ops.append("relu")
        elif GELU_EPILOGUE.search(name):
            ops.append("gelu")
        return ops
    if plain:
        if plain.startswith("triton_"):
            return ops_from_inductor_name(plain) or ["unknown"]
        return [plain]
    return [name.split("(")[0].split("<")[0].strip().split(" ")[-1].lower()]


def fill_fused_ops(df: pd.DataFrame) -> pd.DataFrame:
    """Fill ``fused_ops`` for every row (memoised per (name, op))."""
    memo: dict = {}
    out = []
    for name, op, existing in zip(df["name"], df["op"], df["fused_ops"]):
        if isinstance(existing, list):
            out.append(existing)
            continue
        key = (name, op if isinstance(op, str) else None)
        if key not in memo:
            memo[key] = fused_ops_of(*key)
        out.append(memo[key])
    df["fused_ops"] = out
    return df
