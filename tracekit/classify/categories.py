"""Give every row a category from its kernel name, then from its launching op.

Rules are ordered (first match wins) regular expressions over the lowercased kernel name; when no
name rule matches, the launching op's record in the op table decides (an op without a record: its
name's pattern); what is left is "other" (listed, never dropped).
"""

from __future__ import annotations

import re

import pandas as pd

from tracekit.ops import lookup
from tracekit.ops.inductor import is_template_gemm

CATEGORIES = ("gemm", "gemv", "conv", "attention", "elementwise", "reduction", "norm", "softmax",
              "memcpy", "memset", "communication", "triton", "other")

NAME_RULES: list[tuple[str, str]] = [
    ("communication", r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce"
                      r"|sendrecv|c10d|gloo|record_param_comms|all2all"),
    ("attention", r"flash|fmha|attention|attn|_sdpa|mha_|paged_|flashinfer|decode_kernel|unified_attention"),
    ("softmax", r"softmax"),
    ("norm", r"layer_?norm|rms_?norm|group_?norm|batch_?norm|instance_?norm|bn_fw|bn_bw|welford|_norm_"
             r"|normalization|layernorm|rmsnorm|gammabetabackward"),
    ("conv", r"conv(?!ert)|implicit_gemm|winograd|fprop|dgrad|wgrad|miopen|igemm"),  # + _cudnn_not_gemm
    ("gemv", r"gemv|gemvx|splitk_gemv|dot_kernel|skinny|wvsplitk|llgemm"),
    ("gemm", r"(?<!fb)gemm(?!_gpu)|nvjet|cutlass|cublas|cijk_|matmul|_mm_|xmma|sm\d+_xmma|hipblaslt|tensile"
             r"|fused_moe|moe_gemm|grouped_gemm|wmma|mfma|^bmm_|^gemm_"),         # + ops.inductor.is_template_gemm
    ("triton", r"^triton_|^triton__|^_triton"),
    ("reduction", r"reduce|reduction|cub::|radix|argmax|argmin|topk|top_k|sort|scan|cumsum|_max_kernel"
                  r"|_sum_kernel|_mean_kernel|norm_kernel|histogram|pool"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|fill|copy|cast|activation|gelu|silu|relu"
                    r"|act_and_mul|swiglu|index|scatter|gather|embedding|rotary|rope|_cat_|catarraybatched"
                    r"|multi_tensor_apply|tensor_apply|where|dropout|masked|pad|transpose|permute|clamp"
                    r"|arange|random|distribution|philox|add_kernel|mul_kernel|quant|bounds_check|kvcache|kv_cache"
                    r"|tensorop|routing|to_dense"),
]

# Ops that have no record in the op table: their category from the name's pattern.
UNKNOWN_OP_RULES: list[tuple[str, str]] = [
    ("communication", r"^(c10d|nccl|gloo)|all_reduce|all_gather|reduce_scatter|record_param_comms|all2all"),
    ("attention", r"attention|sdpa|flash"),
    ("softmax", r"softmax"),
    ("norm", r"norm"),
    ("conv", r"conv"),
    ("elementwise", r"^aten::"),
]

def _cudnn_not_gemm(name: str) -> bool:
    """``cudnn::`` with no ``gemm`` after it on its line: the last occurrence has the least after it, so
    only it is looked at (the lookahead ``cudnn::(?!.*gemm)`` scanned from every occurrence). cuDNN's
    runtime-fusion engine (``cudnn::fusion::``) runs attention and norms too: its kernels take their op's
    category (attention backward's ``compute_dot_do_o_specialized`` had read as conv)."""
    return any("gemm" not in (tail := line[line.rfind("cudnn::"):]) and not tail.startswith("cudnn::fusion::")
               for line in name.split("\n") if "cudnn::" in line)


_EXTRA = {"conv": _cudnn_not_gemm, "gemm": is_template_gemm}    # linear-time rules a regex made quadratic
_NAME = [(cat, re.compile(rx)) for cat, rx in NAME_RULES]
_UNKNOWN_OP = [(cat, re.compile(rx)) for cat, rx in UNKNOWN_OP_RULES]


def category_of(name: str, kind: str = "kernel", op: str | None = None) -> str:
    """Category of one row."""
    if kind in ("memcpy", "memset"):
        return kind
    lowered = name.lower()
    for cat, rx in _NAME:
        if rx.search(lowered) or (cat in _EXTRA and _EXTRA[cat](lowered)):
            return cat
    if isinstance(op, str):
        cat = op_category(op)
        if cat in ("memcpy", "memset") and kind == "kernel":
            return "elementwise"                # a copy/fill done by a kernel is elementwise work
        return cat
    return "other"


def op_category(op: str) -> str:
    """The category the op table gives an op; for an op without a record, its name's pattern."""
    family = lookup(op)
    if family is not None:
        return family.category
    lowered = op.lower()
    return next((cat for cat, rx in _UNKNOWN_OP if rx.search(lowered)), "other")


def classify(df: pd.DataFrame) -> pd.DataFrame:
    """Fill ``category``; names repeat, so each (name, kind, op) is classified once."""
    if df.empty:
        return df
    keys = list(zip(df["name"], df["kind"], df["op"]))
    memo: dict[tuple, str] = {}
    out = []
    for key in keys:
        cat = memo.get(key)
        if cat is None:
            cat = memo[key] = category_of(*key)
        out.append(cat)
    df["category"] = out
    return df
