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
View-like ops (view, reshape, t, permute, ...) move no data and are left out (the op table's views).
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pandas as pd

from tracekit.errors import TracekitError
from tracekit.fusion.nodes import node_io, signature_roles
from tracekit.limits import read_input
from tracekit.model.keys import ValueKeys, first_rows, ids
from tracekit.ops import OpCall, lookup, plain_name
from tracekit.ops.inductor import (
    drop_views,
    is_inductor_kernel,
    names_no_ops,
    ops_from_name,
)
from tracekit.ops.kernel_names import op_from_kernel_name

ATTENTION = re.compile(r"flash|fmha|attention|attn_fwd|attn_bwd|_sdpa|mha_|paged_attention|unified_attention",
                       re.IGNORECASE)
ATTENTION_BWD = re.compile(r"bwd|backward|cutlassB", re.IGNORECASE)
NOT_ATTENTION = re.compile(r"cache|kv_indices|quantiz|reshape|copy|index|rotary|rope", re.IGNORECASE)
CONV = re.compile(r"igemm|conv|implicit_gemm|fprop|dgrad|wgrad|winograd", re.IGNORECASE)
_VENDOR_GEMM = re.compile(r"(?<!fb)gemm|nvjet|cublas|^cijk_|xmma|hipblaslt|sgemm|hgemm", re.IGNORECASE)


def is_vendor_gemm(name: str) -> bool:
    """A vendor GEMM kernel name: the words above, or ``cutlass`` followed later by ``gemm``/``tensorop``.
    The latter is found with ``str.find`` in linear time: the regex ``cutlass.*(?:gemm|tensorop)``
    rescanned the rest of the name from every ``cutlass`` (38-84 s on a 140 KB name, issue 27)."""
    if _VENDOR_GEMM.search(name):
        return True
    for line in name.lower().split("\n"):      # '.' stops at a newline
        first = line.find("cutlass")            # the first occurrence has the longest rest: enough
        if first >= 0 and (line.find("tensorop", first + 7) >= 0 or line.find("gemm", first + 7) >= 0):
            return True
    return False
TENSILE = re.compile(r"^Cijk_")                          # rocBLAS/hipBLASLt: "Bias" names a capability
BIAS_EPILOGUE = re.compile(r"(?:^|_)bias(?:_|$)|epiloguewithbroadcast|linearcombinationbias|_bias[A-Z]|bias_",
                           re.IGNORECASE)
RELU_EPILOGUE = re.compile(r"relu", re.IGNORECASE)
GELU_EPILOGUE = re.compile(r"gelu", re.IGNORECASE)
_ORIGINAL_ATEN = re.compile(r"Original ATen:\s*\[([^\]]*)\]")
_META_NAME = re.compile(r"['\"]kernel_name['\"]\s*:\s*['\"](\w+)['\"]")
_JIT_DEF = re.compile(r"@triton\.jit\s*\n\s*def\s+(\w+)\s*\(")



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
        ops = ops_from_name(meta_name)
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
                    text = _read_source(str(p))
                    if text is not None:
                        self._texts[p.name] = text
        return self._texts

    def roles(self, name: str, kernel_file) -> list[str] | None:
        """Argument names of the kernel's signature (``in_out_ptr0``, ``in_ptr1``, ...), or None."""
        text = self.source(name, kernel_file if isinstance(kernel_file, str) else None)
        return signature_roles(text, name) if text else None

    def source(self, name: str, kernel_file) -> str | None:
        texts = self._all()
        if isinstance(kernel_file, str) and kernel_file:
            text = texts.get(Path(kernel_file).name)
            if text is not None:
                return text
            text = _read_source(kernel_file)        # not kept in a bundle, but still on this machine
            if text is not None:
                texts[Path(kernel_file).name] = text
                return text
        if names_no_ops(name):
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


def _read_source(path: str) -> str | None:
    """A kernel source (a bundle's copy, or what a trace's ``kernel_file`` names), when it is a regular
    .py file here of at most 16 MiB; a FIFO or a device is never opened for reading."""
    try:
        p = Path(path)
        if p.suffix != ".py" or not stat.S_ISREG(p.stat().st_mode) or p.stat().st_size > (16 << 20):
            return None
        return bytes(read_input(p, "kernel source", limit=16 << 20, gunzip=False)).decode(errors="replace")
    except (OSError, ValueError, TracekitError):
        return None


def kernel_dir(folder: Path | None) -> Path | None:
    """The folder that holds kernel sources: ``folder/kernels`` when there is one, else ``folder``."""
    if folder is None:
        return None
    folder = Path(folder)
    return folder / "kernels" if (folder / "kernels").is_dir() else folder if folder.is_dir() else None


def _gemm_ops(name: str, from_op: list[str] | None) -> list[str]:
    """A vendor GEMM kernel: its op's fused ops (mm + add for addmm), else mm (+ add when the name
    names a bias epilogue); + relu/gelu when the name names that epilogue."""
    ops = from_op or (["mm"] + (["add"] if not TENSILE.match(name) and BIAS_EPILOGUE.search(name) else []))
    if ops[-1] in ("relu", "gelu"):
        return ops
    if RELU_EPILOGUE.search(name):
        return ops + ["relu"]
    if GELU_EPILOGUE.search(name):
        return ops + ["gelu"]
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
                 sources: KernelSources | None = None, dims=None, types=None) -> list[str]:
    """The ops one kernel performs, lowercase aten-style names (views left out)."""
    plain = plain_name(op) if isinstance(op, str) and op and "autograd::" not in op else None
    family = lookup(op) if plain else None
    call = OpCall(op, dims or [], types or [], None, concrete if isinstance(concrete, list) else None,
                  kernel=name) if plain else None
    if kind == "memcpy":
        return ["copy"]
    if kind == "memset":
        return [plain] if plain in ("zero", "fill") else ["fill"]
    if kind == "cpu_op" and plain:
        return family.fused_ops(call) if family else [plain]
    inductor = plain if is_inductor_kernel(plain) else None
    for candidate in (name, inductor):
        if candidate:
            found = ops_from_name(candidate)
            if found is not None:
                return found
    if names_no_ops(name) or inductor:
        found = sources.ops(inductor or name, kernel_file) if sources else None
        return found or ["unknown"]
    short = name.split("(")[0]                    # the name, without its argument list
    attention_op = family.category == "attention" if family is not None else bool(
        plain and ("attention" in plain or plain.startswith("_flash")))      # an op the table lacks
    if ATTENTION.search(short) and not NOT_ATTENTION.search(short) and (plain is None or attention_op):
        return _attention_ops(short)
    if family is None and attention_op:
        return _attention_ops(plain)
    if plain is None and CONV.search(short):
        return ["convolution_backward" if re.search(r"bwd|wrw|dgrad|wgrad", short, re.I) else "convolution"]
    if is_vendor_gemm(name) and (plain is None or (family is not None and family.category == "gemm")):
        return _gemm_ops(name, family.fused_ops(call) if family else None)
    if family is not None:
        return family.fused_ops(call)
    if plain:
        return [plain]
    found = op_from_kernel_name(name)
    return [found] if found else ["unknown"]


def fill_fused_ops(df: pd.DataFrame, bundle_dir: Path | None = None,
                   sources: KernelSources | None = None) -> pd.DataFrame:
    """Fill ``fused_ops`` for every row, keeping lists already there (memoised per name and op)."""
    sources = sources or KernelSources(bundle_dir)
    memo: dict = {}
    keys = ValueKeys()
    n = len(df)
    col = lambda c: df[c].tolist() if c in df else [None] * n  # noqa: E731
    names, ops, kinds, concretes, dims, types, kfiles, existing = (
        col("name"), col("op"), col("kind"), col("op_concrete"), col("op_dims"), col("op_types"),
        col("kernel_file"), col("fused_ops"))
    kept = [isinstance(e, list) for e in existing]
    try:       # rows alike in every key field (the same shape objects) take their first row's answer
        firsts = first_rows(names, ops, kinds, ids(concretes), kfiles, kept)
    except TypeError:                     # a value that cannot be hashed: every row its own
        firsts = list(range(n))
    found = {}
    for j in dict.fromkeys(firsts):       # the rows that start a key, in table order
        if kept[j]:
            continue
        name, op, kind, concrete, kfile = names[j], ops[j], kinds[j], concretes[j], kfiles[j]
        op = op if isinstance(op, str) else None
        kfile = kfile if isinstance(kfile, str) else None
        family = lookup(op)
        key = (name, op, kind, keys(concrete) if family is not None and callable(family.fused) else "", kfile)
        if key not in memo:
            memo[key] = fused_ops_of(name, op, kind if isinstance(kind, str) else "kernel", concrete, kfile, sources,
                                     dims[j], types[j])
        found[j] = memo[key]
    out = [e if k else list(found[j]) for e, k, j in zip(existing, kept, firsts)]
    df["fused_ops"] = out
    return df


# ---- the tensors each row reads and writes ------------------------------------------------------

def annotate_fusion(df: pd.DataFrame, bundle_dir: Path | None = None,
                    sources: KernelSources | None = None, engine_steps: dict | None = None) -> pd.DataFrame:
    """``fused_ops`` for every row and, in the ``io`` column, the tensors its op reads and writes.
    ``engine_steps``: step index → its engine annotation (the KV keys paged attention reads)."""
    sources = sources or KernelSources(bundle_dir)
    fill_fused_ops(df, bundle_dir, sources)
    memo: dict = {}
    keys = ValueKeys()
    col = lambda c: df[c].tolist() if c in df else [None] * len(df)  # noqa: E731
    engine_steps = engine_steps or {}
    names, ops, dims, types, strides, concretes, kfiles = (
        col("name"), col("op"), col("op_dims"), col("op_types"), col("op_strides"), col("op_concrete"),
        col("kernel_file"))
    steps = col("step") if engine_steps else None
    try:       # rows alike in every key field (the same shape objects) take their first row's answer
        firsts = first_rows(ops, ids(dims), ids(types), ids(strides), ids(concretes), kfiles, names,
                            *([steps] if engine_steps else []))
    except TypeError:                     # a value that cannot be hashed: every row its own
        firsts = list(range(len(df)))
    found = {}
    for j in dict.fromkeys(firsts):       # the rows that start a key, in table order
        name, op, kfile = names[j], ops[j], kfiles[j]
        family = lookup(op) if engine_steps else None
        engine = engine_steps.get(steps[j]) if family is not None and family.name == "paged_attention" else None
        key = (op if isinstance(op, str) else None, keys(dims[j]), keys(types[j]), keys(strides[j]),
               keys(concretes[j]), kfile, name, engine)
        if key not in memo:
            roles = None
            if is_inductor_kernel(key[0]):
                roles = sources.roles(key[0], kfile)
            memo[key] = node_io(key[0], dims[j], types[j], concretes[j], roles,
                                kernel=name if isinstance(name, str) else "", strides=strides[j], engine=engine)
        found[j] = memo[key]
    io = [found[j] for j in firsts]
    df["io"] = io
    return df
