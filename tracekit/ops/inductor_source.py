"""What an Inductor kernel's source says about its reads and its GEMM.

- **reach**: how many distinct elements each pointer's loads can touch. A load ``tl.load(in_ptr0 +
  (r0_1 + 768*x2), ...)`` touches at most one element per combination of the index variables it
  uses; each variable's range comes from its definition (``x2 = (xindex % 256)``: 256 values;
  ``x1 = xindex // 768``: xnumel/768) and the kernel's ``xnumel``/``r0_numel``. A slice (the first
  256 of 1,024 position rows) therefore reads 256 rows, not the buffer. A load through a loaded
  index (``768*tmp4``: a gather) touches at most one element per point of the iteration space. A
  block pointer (``tl.make_block_ptr(in_ptr0, shape=[256, 768], strides=[768, 1], ...)``, Inductor's
  ``triton.use_block_ptr``) reaches at most the product of its ``shape`` (dims of stride 0 left out),
  where each entry is a number or a numel the kernel knows. A pointer loaded some other way (a block
  pointer whose shape cannot be told, an unknown name) has no reach: its whole tensor
  (``opaque_block_pointers`` names those block pointers).
- **template GEMM**: a ``triton_tem_`` matmul template states ``M = 4096``, ``N = ...``, ``K = ...``
  (and ``BATCH``/grid for bmm) in its body; its epilogue adds a loaded tensor to the accumulator
  (``tmp1 = acc + tmp0``: addmm's bias) once per output element for each such line.

Only the text of one kernel's ``def`` is read; nothing is executed (``ast`` parses expressions).
"""

from __future__ import annotations

import ast
import functools
import math
import re

_LOAD = re.compile(r"tl\.load\((\w+) \+ \(((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)")
_DEF = re.compile(r"^\s+(\w+) = (.+?)\s*$", re.MULTILINE)
_NUMEL = re.compile(r"^\s+([xyzr]\d*_?numel) = (\d+)\s*$", re.MULTILINE)
_GEMM = re.compile(r"^\s+(M|N|K|BATCH) = (\d+)\s*$", re.MULTILINE)
_ACC_ADD = re.compile(r"^\s+tmp\d+ = (?:acc \+ tmp\d+|tmp\d+ \+ acc)\s*$", re.MULTILINE)
_BASE = {"xindex": "xnumel", "yindex": "ynumel", "zindex": "znumel", "rindex": "r0_numel",
         "r0_index": "r0_numel", "r1_index": "r1_numel"}
_INDEX_VAR = re.compile(r"(?:[xyz]\d+|r\d+_\d+|r\d+)$")


def kernel_body(source: str | None, kernel: str) -> str | None:
    """The text of ``def kernel(`` up to the next decorator or top-level line."""
    if not source:
        return None
    start = source.find(f"def {kernel}(")
    if start < 0:
        return None
    end = re.search(r"\n(?=\S)", source[start + 1:])
    return source[start:start + 1 + end.start() if end else len(source)]


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _const(node) -> int | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, int) and node.value > 0 else None


class _Ranges:
    """Distinct values of index expressions, from the kernel's numels and variable definitions."""

    def __init__(self, body: str, numels: dict[str, int]):
        self.numels = dict(numels)
        for name, value in _NUMEL.findall(body):
            self.numels.setdefault(name, int(value))
        self.defs: dict[str, str] = {}
        for name, expr in _DEF.findall(body):
            if _INDEX_VAR.match(name) and name not in self.defs:
                self.defs[name] = expr
        self.memo: dict[str, int | None] = {}

    def var(self, name: str, depth: int = 0) -> int | None:
        if name in _BASE:
            return self.numels.get(_BASE[name])
        if name not in self.defs or depth > 8:
            return None
        if name not in self.memo:
            try:
                tree = ast.parse(self.defs[name], mode="eval").body
            except SyntaxError:
                tree = None
            self.memo[name] = self.count(tree, depth + 1) if tree is not None else None
        return self.memo[name]

    def count(self, node, depth: int = 0) -> int | None:
        """Distinct values ``node`` takes: at most the product of its variables' ranges, less where a
        ``% M`` or a ``// D`` of a base index says so."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _const(node.right):
            left = self.count(node.left, depth)
            return None if left is None else min(left, _const(node.right))
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and _const(node.right)
                and isinstance(node.left, ast.Name) and node.left.id in _BASE):
            n = self.var(node.left.id, depth)
            return None if n is None else -(-n // _const(node.right))
        if isinstance(node, ast.Name) and node.id in _BASE:
            return self.var(node.id, depth)
        total = 1
        for name in _names(node):
            n = self.var(name, depth)
            if n is None:
                return None
            total *= n
        return total


def pointer_reach(source: str | None, kernel: str, numels: dict[str, int] | None = None) -> dict[str, int | None]:
    """Per pointer the kernel loads: at most how many distinct elements its loads touch (summed over
    its load sites), None where a load cannot be told or the pointer is used other than in
    ``tl.load(ptr + (...))``/``tl.store(ptr + (...))``; ``numels``: ``xnumel`` etc. when the source
    takes them as arguments. Empty without the kernel's source or for a template (tiles re-read)."""
    if not source or kernel.startswith("triton_tem_"):
        return {}
    return dict(_reach(source, kernel, tuple(sorted((numels or {}).items()))))


@functools.lru_cache(maxsize=4096)
def _reach(source: str, kernel: str, numels: tuple) -> tuple:
    body = kernel_body(source, kernel)
    if body is None:
        return ()
    ranges = _Ranges(body, dict(numels))
    points = math.prod(v for k, v in ranges.numels.items() if k.endswith("numel")) if ranges.numels else None
    reach: dict[str, int | None] = {}
    for ptr, offset in _LOAD.findall(body):
        if ptr in reach and reach[ptr] is None:
            continue
        try:
            tree = ast.parse(offset, mode="eval").body
        except SyntaxError:
            reach[ptr] = None
            continue
        names = _names(tree)
        if any(n.startswith("tmp") for n in names):
            n = points                    # through a loaded index: one element per point at most
        else:
            n = ranges.count(tree)
        reach[ptr] = None if n is None else reach.get(ptr, 0) + n
    code = body[body.find(")") + 1:]                  # past the signature
    blocks = _block_pointers(code, ranges)
    for ptr, n in blocks:
        if ptr not in reach or reach[ptr] is not None:
            reach[ptr] = None if n is None else reach.get(ptr, 0) + n
    for ptr in reach:                                 # used elsewhere too (an alias)
        sites = len(re.findall(rf"tl\.(?:load|store)\({ptr} \+ \(", code)) + sum(p == ptr for p, _ in blocks)
        if len(re.findall(rf"\b{ptr}\b", code)) > sites:
            reach[ptr] = None
    return tuple(reach.items())


_BLOCK_PTR = "tl.make_block_ptr("


def _block_pointers(code: str, ranges: "_Ranges") -> list[tuple[str, int | None]]:
    """(base pointer, elements its block pointer can address or None) for each ``tl.make_block_ptr``
    call: the product of its ``shape`` over the dims whose stride is not 0 (a broadcast dim re-reads)."""
    out = []
    at = code.find(_BLOCK_PTR)
    while at >= 0:
        depth, end = 0, None
        for i in range(at + len(_BLOCK_PTR) - 1, min(len(code), at + 4096)):
            depth += {"(": 1, ")": -1}.get(code[i], 0)
            if depth == 0:
                end = i + 1
                break
        call = None
        if end is not None:
            try:
                call = ast.parse(code[at:end], mode="eval").body
            except SyntaxError:
                call = None
        if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Name):
            out.append((call.args[0].id, _block_reach(call, ranges)))
        at = code.find(_BLOCK_PTR, end if end else at + 1)
    return out


def _block_reach(call: ast.Call, ranges: "_Ranges") -> int | None:
    args = {k.arg: k.value for k in call.keywords}
    if len(call.args) >= 3:                           # positional: base, shape, strides, ...
        args.setdefault("shape", call.args[1])
        args.setdefault("strides", call.args[2])
    shape, strides = args.get("shape"), args.get("strides")
    if not isinstance(shape, (ast.List, ast.Tuple)):
        return None
    dims = shape.elts
    steps = strides.elts if isinstance(strides, (ast.List, ast.Tuple)) and len(strides.elts) == len(dims) else \
        [None] * len(dims)
    total = 1
    for dim, step in zip(dims, steps):
        if isinstance(step, ast.Constant) and step.value == 0:
            continue                                  # a broadcast dim: the same elements again
        if isinstance(dim, ast.Constant) and isinstance(dim.value, int) and dim.value >= 0:
            total *= dim.value
        elif isinstance(dim, ast.Name) and dim.id in ranges.numels:
            total *= ranges.numels[dim.id]
        else:
            return None
    return total


def opaque_block_pointers(source: str | None, kernel: str, numels: dict[str, int] | None = None) -> list[str]:
    """The pointers a kernel reads through a block pointer whose reach cannot be told (their whole
    tensor counts): to say so beside the cost."""
    body = kernel_body(source, kernel) if source else None
    if body is None or _BLOCK_PTR not in body:
        return []
    ranges = _Ranges(body, dict(numels or {}))
    return sorted({p for p, n in _block_pointers(body[body.find(")") + 1:], ranges) if n is None})


def template_gemm(source: str | None, kernel: str) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) a GEMM template's body states; None when it states no M, N and K."""
    body = kernel_body(source, kernel)
    if body is None:
        return None
    found = {k: int(v) for k, v in _GEMM.findall(body)}
    if not all(k in found for k in "MNK"):
        return None
    return found.get("BATCH", 1), found["M"], found["N"], found["K"]


def template_acc_adds(source: str | None, kernel: str) -> int | None:
    """How many tensors a GEMM template's epilogue adds to its accumulator (``tmp1 = acc + tmp0``: an
    addmm's bias, a fused residual), each one add per output element; None without the kernel's body."""
    body = kernel_body(source, kernel)
    return None if body is None else len(_ACC_ADD.findall(body))
