"""What each kernel fused: ``fused_ops`` from kernel names, launching ops and Inductor sources.

Rules, first match wins (docs/fusion.md):
1. a list already in ``fused_ops`` is kept (the MLX loader fills compiled nodes itself);
2. Inductor names ``triton_{poi,per,red,tem,for}_fused_<ops>_<n>`` / ``cpp_fused_<ops>_<n>``: the ops;
3. Inductor kernels whose name carries no ops (old ``triton__0d1d2d`` names, unique kernel names
   off): the kernel source in the capture bundle, else ["unknown"];
4. attention kernels: matmul + softmax + matmul (backward: five products, softmax recompute and
   its backward);
5. vendor GEMMs: mm (bmm), + add when the launching op adds a bias (addmm, baddbmm, linear) or
   the kernel name names a bias epilogue, + relu/gelu when it names that epilogue;
6. any other kernel: its launching op; without one, the ATen functor its name spells, else "unknown".
View-like ops (view, reshape, t, permute, ...) move no data and are left out (``VIEW_OPS``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from tracekit.fusion.dataflow import (  # noqa: F401  (re-exported)
    fusion_summary,
    node_io,
    signature_roles,
    step_fusion,
)

VIEW_OPS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "unsqueeze", "squeeze",
            "expand", "slice", "select", "as_strided", "alias", "view_as", "narrow", "split", "unbind",
            "squeeze_copy", "unsqueeze_copy", "view_copy", "permute_copy", "expand_copy", "t_copy",
            "transpose_copy", "slice_copy", "lift_fresh", "detach", "_reshape_alias", "unfold",
            "split_with_sizes", "numpy_t", "view_as_real", "view_as_complex", "contiguous"}

# multi-token aten names that appear inside Inductor kernel names (most underscores tried first)
KNOWN_OPS = sorted({
    "native_layer_norm", "native_group_norm", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
    "native_dropout", "_to_copy", "_unsafe_view", "_softmax", "_log_softmax", "log_softmax",
    "scaled_dot_product_attention", "embedding_dense_backward", "native_layer_norm_backward",
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
    "_softmax_backward_data", "convolution_backward", "constant_pad_nd", "index_put", "index_select",
    "masked_fill", "clamp_min", "clamp_max", "scatter_add", "select_backward", "slice_backward",
    "as_strided", "view_as", "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "logical_and",
    "logical_not", "logical_or", "floor_divide", "true_divide", "rms_norm", "_fused_rms_norm", "layer_norm",
    "group_norm", "batch_norm", "full_like", "zeros_like", "ones_like", "new_zeros", "new_empty",
    "empty_like", "nan_to_num", "squeeze_copy", "unsqueeze_copy", "view_copy", "permute_copy",
    "expand_copy", "t_copy", "transpose_copy", "slice_copy", "lift_fresh", "_reshape_alias",
    "avg_pool2d", "max_pool2d", "max_pool2d_with_indices", "upsample_nearest2d", "upsample_bilinear2d",
    "linalg_vector_norm", "var_mean", "addcmul", "addcdiv", "leaky_relu", "hardswish", "hardsigmoid",
    "scalar_tensor", "_scaled_mm", "split_with_sizes", "_weight_norm_interface", "repeat_interleave",
    "_addmm_activation", "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_flash_attention_forward", "_efficient_attention_forward",
    "index_add", "scatter_reduce", "native_dropout_backward", "_log_softmax_backward_data",
    "native_group_norm_backward", "native_batch_norm_backward", "max_pool2d_with_indices_backward",
    "avg_pool2d_backward", "embedding_backward", "reflection_pad2d", "replication_pad2d",
}, key=lambda s: -s.count("_"))
_KNOWN_TOKENS = {op: op.strip("_").split("_") for op in KNOWN_OPS}

INDUCTOR_NAME = re.compile(r"^(?:triton_(?:poi|per|red|tem|for)|cpp)_(?:fused_?)?(.*?)(?:_\d+)?$")
OLD_TRITON_NAME = re.compile(r"^triton__?\d")            # triton__0d1d2d: unique kernel names off
BARE_INDUCTOR = re.compile(r"^triton_(?:(?:poi|per|red|tem|for)_?)?(?:_?\d+d?)*$")
ATTENTION = re.compile(r"flash|fmha|attention|attn_fwd|attn_bwd|_sdpa|mha_|paged_attention|unified_attention",
                       re.IGNORECASE)
ATTENTION_BWD = re.compile(r"bwd|backward|cutlassB", re.IGNORECASE)
NOT_ATTENTION = re.compile(r"cache|kv_indices|quantiz|reshape|copy|index|rotary|rope", re.IGNORECASE)
CONV = re.compile(r"igemm|conv|implicit_gemm|fprop|dgrad|wgrad|winograd", re.IGNORECASE)
VENDOR_GEMM = re.compile(r"(?<!fb)gemm|nvjet|cutlass.*(?:gemm|tensorop)|cublas|^cijk_|xmma|hipblaslt|sgemm|hgemm",
                         re.IGNORECASE)
TENSILE = re.compile(r"^Cijk_")                          # rocBLAS/hipBLASLt: "Bias" names a capability
BIAS_EPILOGUE = re.compile(r"(?:^|_)bias(?:_|$)|epiloguewithbroadcast|linearcombinationbias|_bias[A-Z]|bias_",
                           re.IGNORECASE)
RELU_EPILOGUE = re.compile(r"relu", re.IGNORECASE)
GELU_EPILOGUE = re.compile(r"gelu", re.IGNORECASE)
_ORIGINAL_ATEN = re.compile(r"Original ATen:\s*\[([^\]]*)\]")
_META_NAME = re.compile(r"['\"]kernel_name['\"]\s*:\s*['\"](\w+)['\"]")
_JIT_DEF = re.compile(r"@triton\.jit\s*\n\s*def\s+(\w+)\s*\(")

# ATen kernels replayed without an op (graph replays): the functor in the name says the op
ATEN_FUNCTORS = [(re.compile(p), op) for p, op in (
    (r"CUDAFunctor_add|AddFunctor", "add"), (r"CUDAFunctorOnSelf_add|CUDAFunctorOnOther_add", "add"),
    (r"MulFunctor", "mul"), (r"DivFunctor|div_true_kernel|div_floor_kernel", "div"), (r"SubFunctor", "sub"),
    (r"FillFunctor", "fill"), (r"direct_copy_kernel|copy_kernel", "copy"), (r"neg_kernel", "neg"),
    (r"exp_kernel", "exp"), (r"log2_kernel", "log2"), (r"log_kernel", "log"), (r"sigmoid_kernel", "sigmoid"),
    (r"tanh_kernel", "tanh"), (r"sqrt_kernel", "sqrt"), (r"rsqrt_kernel", "rsqrt"), (r"abs_kernel", "abs"),
    (r"clamp_kernel|clamp_min|clamp_max", "clamp"), (r"threshold_kernel", "threshold"),
    (r"(?<![a-z])relu", "relu"), (r"GeluCUDAKernel|gelu_kernel", "gelu"), (r"silu_kernel", "silu"),
    (r"MaxOps|max_values", "amax"), (r"MinOps|min_values", "amin"), (r"MeanOps", "mean"),
    (r"sum_functor|sum_kernel", "sum"), (r"CatArrayBatchedCopy", "cat"), (r"where_kernel", "where"),
    (r"softmax_warp_forward|SoftMaxForward|cunn_SoftMaxForward", "_softmax"),
    (r"layer_norm_kernel|LayerNormForward|RowwiseMomentsCUDAKernel", "native_layer_norm"),
    (r"batch_norm_collect_statistics|batch_norm_transform_input", "native_batch_norm"),
    (r"index_select|indexSelect", "index_select"), (r"embedding", "embedding"),
    (r"AdamFunctor|FusedAdam", "_fused_adam"), (r"AdamWFunctor", "_fused_adamw"),
    (r"compare_scalar_kernel|CompareEqFunctor|eq_kernel", "eq"), (r"pow_tensor_scalar|pow_kernel", "pow"),
)]


def _split_ops(body: str) -> list[str]:
    """Split ``add_mean_native_layer_norm`` into aten op names, longest known names first."""
    tokens = [t for t in body.split("_")]
    ops: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "":
            i += 1
            continue
        for op, parts in _KNOWN_TOKENS.items():
            if tokens[i:i + len(parts)] == parts:
                ops.append(op)
                i += len(parts)
                break
        else:
            ops.append(tokens[i])
            i += 1
    return ops


def drop_views(ops: list[str]) -> list[str]:
    return [op for op in ops if op not in VIEW_OPS]


def ops_from_inductor_name(name: str) -> list[str] | None:
    """``triton_tem_fused_addmm_relu_t_0`` → ["addmm", "relu"]; None when the name carries no ops."""
    if OLD_TRITON_NAME.match(name) or BARE_INDUCTOR.match(name):
        return None
    m = INDUCTOR_NAME.match(name)
    if not m or not m.group(1):
        return None
    ops = _split_ops(m.group(1))
    kept = drop_views(ops)
    return kept or (["view"] if ops else None)     # a kernel of views only still copies: say so


def ops_from_source(source: str, kernel: str) -> list[str] | None:
    """The ops an Inductor source names for ``kernel``: its ``Original ATen: [...]`` comment (output
    code), else the descriptive ``kernel_name`` in its ``inductor_meta``; None when it names none."""
    at = source.find(f"{kernel} = async_compile.triton(")
    head = source[max(0, at - 2000):at] if at >= 0 else ""
    found = _ORIGINAL_ATEN.findall(head)
    if found:
        names = [n.strip().split(".")[-2] if n.strip().count(".") >= 2 else n.strip().split(".")[-1]
                 for n in found[-1].split(",") if n.strip()]
        ops = drop_views([n.lower() for n in names])
        if ops:
            return list(dict.fromkeys(ops))
    for meta_name in _META_NAME.findall(source):
        ops = ops_from_inductor_name(meta_name)
        if ops:
            return ops
    return None


class KernelSources:
    """Inductor kernel sources kept with a trace: ``bundle/kernels/`` or ``<trace stem>.kernels/``.

    A kernel's source is the file named after the basename of its ``kernel_file``; without one, the
    single file that defines ``def <name>(`` (only for descriptive names: ``triton_`` is shared)."""

    def __init__(self, folder: Path | None):
        self.folder = kernel_dir(folder)
        self._texts: dict[str, str] | None = None

    def _all(self) -> dict[str, str]:
        if self._texts is None:
            self._texts = {}
            if self.folder is not None:
                for p in sorted(self.folder.glob("*.py")):
                    try:
                        self._texts[p.name] = p.read_text(errors="replace")
                    except OSError:
                        continue
        return self._texts

    def roles(self, name: str, kernel_file) -> list[str] | None:
        """Argument names of the kernel's signature (``in_out_ptr0``, ``in_ptr1``, ...), or None."""
        text = self.source(name, kernel_file if isinstance(kernel_file, str) else None)
        return signature_roles(text, name) if text else None

    def source(self, name: str, kernel_file) -> str | None:
        if self.folder is None:
            return None
        texts = self._all()
        if isinstance(kernel_file, str) and kernel_file:
            text = texts.get(Path(kernel_file).name)
            if text is not None:
                return text
        if OLD_TRITON_NAME.match(name) or BARE_INDUCTOR.match(name):
            return None
        hits = [t for t in texts.values() if re.search(rf"def\s+{re.escape(name)}\s*\(", t)]
        per_kernel = [t for t in hits if "async_compile.triton(" not in t]     # prefer the kernel's own file
        pick = per_kernel or hits
        return pick[0] if pick else None

    def ops(self, name: str, kernel_file) -> list[str] | None:
        text = self.source(name, kernel_file)
        if text is None:
            return None
        for kernel in dict.fromkeys([name, *_JIT_DEF.findall(text)]):
            ops = ops_from_source(text, kernel)
            if ops:
                return ops
        for t in self._all().values():         # the output code names the ATen ops of its kernels
            if f"{name} = async_compile.triton(" in t:
                ops = ops_from_source(t, name)
                if ops:
                    return ops
        return None


def kernel_dir(folder: Path | None) -> Path | None:
    """The folder that holds kernel sources: ``folder/kernels`` when there is one, else ``folder``."""
    if folder is None:
        return None
    folder = Path(folder)
    return folder / "kernels" if (folder / "kernels").is_dir() else folder if folder.is_dir() else None


def _plain(op: str) -> str:
    """``aten::add_`` → ``add``; ``fbgemm::permute_2D_sparse_data`` → ``permute_2d_sparse_data``."""
    base = op.split("::")[-1]
    if base.endswith("_") and not base.endswith("__"):
        base = base[:-1]
    return base.lower()


def _gemm_ops(name: str, plain: str | None, concrete) -> list[str]:
    if plain in ("bmm", "baddbmm"):
        ops = ["bmm"] + (["add"] if plain == "baddbmm" else [])
    else:
        bias = plain in ("addmm", "_addmm_activation", "linear") or (
            plain is None and not TENSILE.match(name) and bool(BIAS_EPILOGUE.search(name)))
        ops = ["mm"] + (["add"] if bias else [])
    if plain == "_addmm_activation":
        use_gelu = isinstance(concrete, list) and len(concrete) > 5 and str(concrete[5]).strip() == "True"
        ops.append("gelu" if use_gelu else "relu")
    elif RELU_EPILOGUE.search(name):
        ops.append("relu")
    elif GELU_EPILOGUE.search(name):
        ops.append("gelu")
    return ops


def _attention_ops(name: str) -> list[str]:
    low = name.lower()
    if "combine" in low or "reduce_kernel" in low:  # split-KV attention: merge partial results
        return ["logsumexp", "mul", "sum"]
    if "dot_do_o" in low or "bwd_preprocess" in low:
        return ["mul", "sum"]
    if "convert_dq" in low:
        return ["_to_copy"]
    if ATTENTION_BWD.search(name):
        return ["mm", "softmax", "mm", "mm", "_softmax_backward_data", "mm", "mm"]
    return ["mm", "softmax", "mm"]


def fused_ops_of(name: str, op, kind: str = "kernel", concrete=None, kernel_file=None,
                 sources: KernelSources | None = None) -> list[str]:
    """The ops one kernel performs, lowercase aten-style names (views left out)."""
    plain = _plain(op) if isinstance(op, str) and op and "autograd::" not in op else None
    if kind == "memcpy":
        return ["copy"]
    if kind == "memset":
        return [plain] if plain in ("zero", "fill") else ["fill"]
    if kind == "cpu_op" and plain:
        return [plain]
    inductor = plain if plain and (plain.startswith("triton_") or plain.startswith("cpp_fused")) else None
    for candidate in (name, inductor):
        if candidate:
            found = ops_from_inductor_name(candidate)
            if found is not None:
                return found
    if OLD_TRITON_NAME.match(name) or BARE_INDUCTOR.match(name) or inductor:
        found = sources.ops(inductor or name, kernel_file) if sources else None
        return found or ["unknown"]
    short = name.split("(")[0]                    # the name, without its argument list
    if (ATTENTION.search(short) and not NOT_ATTENTION.search(short) and (plain is None or "attention" in plain
                                                                          or "flash" in plain)) or \
            (plain and ("attention" in plain or plain.startswith("_flash"))):
        return _attention_ops(short if ATTENTION.search(short) else plain or name)
    if plain is None and CONV.search(short):
        return ["convolution_backward" if re.search(r"bwd|wrw|dgrad|wgrad", short, re.I) else "convolution"]
    if VENDOR_GEMM.search(name) and plain not in ("_scaled_mm",) and (
            plain is None or plain in ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation")):
        return _gemm_ops(name, plain, concrete)
    if plain == "clamp_min" and concrete and len(concrete) > 1 and str(concrete[1]).strip() in ("0", "0.", "0.0"):
        return ["relu"]                             # eager torch.relu runs as clamp_min(x, 0)
    if plain:
        return [plain]
    for rx, functor_op in ATEN_FUNCTORS:
        if rx.search(name):
            return [functor_op]
    return ["unknown"]


def fill_fused_ops(df: pd.DataFrame, bundle_dir: Path | None = None,
                   sources: KernelSources | None = None) -> pd.DataFrame:
    """Fill ``fused_ops`` for every row, keeping lists already there (memoised per name and op)."""
    sources = sources or KernelSources(bundle_dir)
    memo: dict = {}
    out = []
    n = len(df)
    col = lambda c: df[c].tolist() if c in df else [None] * n  # noqa: E731
    for name, op, kind, concrete, kfile, existing in zip(col("name"), col("op"), col("kind"), col("op_concrete"),
                                                         col("kernel_file"), col("fused_ops")):
        if isinstance(existing, list):
            out.append(existing)
            continue
        op = op if isinstance(op, str) else None
        kfile = kfile if isinstance(kfile, str) else None
        key = (name, op, kind, repr(concrete) if op and ("activation" in op or "clamp_min" in op) else "", kfile)
        if key not in memo:
            memo[key] = fused_ops_of(name, op, kind if isinstance(kind, str) else "kernel", concrete, kfile, sources)
        out.append(list(memo[key]))
    df["fused_ops"] = out
    return df


# ---- the tensors each row reads and writes ------------------------------------------------------

def annotate_fusion(df: pd.DataFrame, bundle_dir: Path | None = None,
                    sources: KernelSources | None = None) -> pd.DataFrame:
    """``fused_ops`` for every row and, in the hidden ``io`` column, the tensors its op reads and writes."""
    sources = sources or KernelSources(bundle_dir)
    fill_fused_ops(df, bundle_dir, sources)
    memo: dict = {}
    io = []
    col = lambda c: df[c].tolist() if c in df else [None] * len(df)  # noqa: E731
    for op, dims, types, concrete, kfile in zip(col("op"), col("op_dims"), col("op_types"), col("op_concrete"),
                                                col("kernel_file")):
        key = (op if isinstance(op, str) else None, repr(dims), repr(types), repr(concrete), kfile)
        if key not in memo:
            roles = None
            if key[0] and (key[0].startswith("triton") or key[0].startswith("cpp_fused")):
                roles = sources.roles(key[0], kfile)
            memo[key] = node_io(key[0], dims, types, concrete, roles)
        io.append(memo[key])
    df["io"] = io
    return df
