"""Inductor kernels: what their names say, what they read and write, what they cost.

Inductor names a kernel ``triton_{poi,per,red,tem,for}_fused_<ops>_<n>`` (``cpp_fused_<ops>_<n>`` on
CPU) and records a CPU op of the same name whose ``Input Dims``/``Input type`` are the kernel's
arguments. Each tensor argument is read or written once; a pointer the kernel both reads and writes
(``in_out_ptr``) counts twice, which only the kernel source can tell (its signature gives each
pointer's role). Old traces name kernels ``triton__0d1d2d`` (unique kernel names off): no ops.

All matching here is linear in the name's length (no backtracking patterns).
"""

from __future__ import annotations

import math
import re

from tracekit.ops.table import FAMILIES, IO, Cost, lookup, plain_name
from tracekit.ops.inductor_source import opaque_block_pointers, pointer_reach, template_acc_adds, template_gemm
from tracekit.ops.tensors import FLOAT_DTYPES, OpCall, Tensor

_PREFIX = re.compile(r"(?:triton_(?:poi|per|red|tem|for)|cpp)_(?:fused_?)?")
_OLD_TRITON = re.compile(r"triton__?\d")                       # triton__0d1d2d: unique kernel names off
_BARE = re.compile(r"triton_(?:(?:poi|per|red|tem|for)_?)?(?:_|\d|(?<=\d)d)*")
_MATMUL_OP = re.compile(r"(?:^|_)(?:mm|addmm|bmm|baddbmm|matmul|linear)(?:_|$)")


def is_inductor_kernel(name: str | None) -> bool:
    """A kernel (or the CPU op Inductor records for it) that Inductor generated."""
    return isinstance(name, str) and (name.startswith("triton_") or name.startswith("cpp_fused"))


_TEMPLATE_OPS = ("mm", "addmm", "bmm", "baddbmm")
_TEMPLATE_GEMM = re.compile(r"_(?:mm|addmm|bmm|baddbmm)")
_WORD_END = re.compile(r"\W")


def is_template_gemm(name: str) -> bool:
    r"""``triton_tem_fused_`` followed, in the same word, by mm/addmm/bmm/baddbmm at its start or after
    an ``_`` (an Inductor GEMM template). Each word is looked at once from its first occurrence: the
    regex ``triton_tem_fused_(?:\w*_)?(?:mm|...)`` rescanned the word from every occurrence (13-37 s
    on a long name, issue 27)."""
    at = name.find("triton_tem_fused_")
    while at >= 0:
        start = at + 17
        end = _WORD_END.search(name, start)
        stop = end.start() if end else len(name)
        if name.startswith(_TEMPLATE_OPS, start, stop) or _TEMPLATE_GEMM.search(name, start, stop):
            return True
        at = name.find("triton_tem_fused_", stop)
    return False


def names_no_ops(name: str) -> bool:
    """Inductor names that carry no op names: ``triton__0d1d2d``, ``triton_poi_0``, ``triton_``."""
    return bool(_OLD_TRITON.match(name) or _BARE.fullmatch(name))


def _known_multi_token_names() -> dict[str, list[str]]:
    """Op names of the table made of several ``_``-separated tokens, longest first (for splitting)."""
    names = {plain_name(op) for family in FAMILIES for op in family.aten}
    multi = sorted((n for n in names if "_" in n.strip("_")), key=lambda s: -s.count("_"))
    return {n: n.strip("_").split("_") for n in multi}


_KNOWN: dict[str, list[tuple[str, list[str]]]] | None = None     # first token → (name, tokens), longest first
_VIEWS: set[str] | None = None


def _tables() -> tuple[dict[str, list[tuple[str, list[str]]]], set[str]]:
    global _KNOWN, _VIEWS
    if _KNOWN is None:
        _KNOWN = {}
        for op, parts in _known_multi_token_names().items():
            _KNOWN.setdefault(parts[0], []).append((op, parts))
        _VIEWS = {op.split("::")[-1] for family in FAMILIES if not family.moves_data for op in family.aten}
        _VIEWS.add("contiguous")
    return _KNOWN, _VIEWS


def split_ops(body: str) -> list[str]:
    """Split ``add_mean_native_layer_norm`` into op names, longest known names first. Only the known
    names that start with the token at hand are tried (all of them, per token, took 16 s on a 1 MB name)."""
    known, _ = _tables()
    tokens = body.split("_")
    ops: list[str] = []
    i = 0
    while i < len(tokens):
        if tokens[i] == "":
            i += 1
            continue
        for op, parts in known.get(tokens[i], ()):
            if tokens[i:i + len(parts)] == parts:
                ops.append(op)
                i += len(parts)
                break
        else:
            ops.append(tokens[i])
            i += 1
    return ops


def drop_views(ops: list[str]) -> list[str]:
    """Ops that move data: views (view, t, permute, ...) are left out."""
    _, views = _tables()
    return [op for op in ops if op not in views]


def ops_from_name(name: str) -> list[str] | None:
    """``triton_tem_fused_addmm_relu_t_0`` → ["addmm", "relu"]; None when the name carries no ops."""
    if names_no_ops(name):
        return None
    m = _PREFIX.match(name)
    if not m:
        return None
    body = name[m.end():]
    head, sep, tail = body.rpartition("_")
    if sep and tail.isdigit():                      # the trailing kernel number
        body = head
    elif body.isdigit():
        body = ""
    if not body:
        return None
    named = split_ops(body)
    ops = named
    if not name.startswith(("triton_tem_", "cpp_")):     # a pointwise/reduction kernel cut from a product
        ops = [p for op in named for p in epilogue(op)]
    kept = drop_views(ops)
    return kept or (["view"] if named else None)   # a kernel of views only still copies: say so


def epilogue(op: str) -> tuple[str, ...]:
    """What of ``op`` a pointwise or reduction kernel named after it can have done: a product or an
    attention ran in its own kernel (a template, an extern GEMM, SDPA), so only its elementwise part
    remains (triton_poi_fused_addmm_gelu adds the bias and applies gelu: add)."""
    family = lookup(f"aten::{op}")
    if family is None or family.category not in ("gemm", "gemv", "attention", "conv"):
        return (op,)
    if family.category in ("attention", "conv") or not isinstance(family.fused, tuple):
        return ()
    return tuple(p for p in family.fused if p not in ("mm", "bmm", "mv"))


def inductor_io(call: OpCall, roles: list[str] | None) -> IO:
    """Arguments by role from the kernel source; without it every tensor argument is a read and the
    outputs are unknown (``writes`` None)."""
    tensors = [(i, t) for i, t in enumerate(call.tensor(i) for i in range(len(call.dims))) if t is not None]
    if not roles:
        return IO(tuple(t for _, t in tensors), None)
    reads, writes = [], []
    for i, t in tensors:
        role = roles[i] if i < len(roles) else ""
        if role.startswith("in_out_ptr"):
            reads.append(t)
            writes.append(t)
        elif role.startswith("out_ptr"):
            writes.append(t)
        else:
            reads.append(t)
    return IO(tuple(reads), tuple(writes))


def _gemm_dims(tensors: list[Tensor]) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of a matmul template from its operands: A[..,M,K], B[..,K,N], an [..,M,N] output."""
    mats = [t for t in tensors if len(t.shape) >= 2]
    for a in mats:
        for b in mats:
            if a is b or a.shape[:-2] != b.shape[:-2]:
                continue
            m, k = a.shape[-2:]
            k2, n = b.shape[-2:]
            if k == k2 and any(c.shape[-2:] == (m, n) and c is not a and c is not b for c in mats):
                return math.prod(a.shape[:-2]), m, n, k
    return None


def _splits(shape: tuple) -> list[tuple[int, int, int]]:
    """A buffer's shape read as (batch, rows, cols): every cut of its dims into three runs, the last
    two non-empty ([4, 1024, 768] → (1, 4, 786432), (1, 4096, 768), (4, 1024, 768))."""
    nd = len(shape)
    return [(math.prod(shape[:i]), math.prod(shape[i:j]), math.prod(shape[j:]))
            for i in range(nd - 1) for j in range(i + 1, nd)]


def _layouts(shape: tuple, strides) -> list[tuple[int, int, int]]:
    """The splits of the shape and, when its strides permute it, of its shape in memory order
    ([4, 12, 1024, 64] with strides [786432, 64, 768, 1] is stored as [4, 1024, 12, 64])."""
    out = _splits(shape)
    if isinstance(strides, list) and len(strides) == len(shape) and all(isinstance(x, int) for x in strides):
        order = sorted(range(len(shape)), key=lambda i: -strides[i])
        stored = tuple(shape[i] for i in order)
        if stored != tuple(shape):
            out += [s for s in _splits(stored) if s not in out]
    return out


def _view_dims(a, b, c) -> list[tuple[int, int, int, int]]:
    """(batch, M, N, K) under which A, B and the output C ((tensor, strides) each) are views of
    [batch, M, K], [batch, K, N] and [batch, M, N], either operand possibly transposed."""
    found = []
    for ba, a0, a1 in _layouts(a[0].shape, a[1]):
        for bb, b0, b1 in _layouts(b[0].shape, b[1]):
            if bb != ba:
                continue
            for bc, c0, c1 in _layouts(c[0].shape, c[1]):
                if bc != ba:
                    continue
                for m, k in ((a0, a1), (a1, a0)):
                    for k2, n in ((b0, b1), (b1, b0)):
                        if k == k2 and (m, n) in ((c0, c1), (c1, c0)):
                            found.append((ba, m, n, k))
    return found


def view_gemm_dims(by_arg: list[Tensor | None], roles: list[str] | None,
                   strides: list | None = None) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of a GEMM template whose operands are 3-D/4-D views (Inductor hands the
    template the buffers, [4, 1024, 768] for A[4096, 768]): A, B and C by role (``arg_A``, ``arg_B``,
    the first ``out_ptr``) where the source is kept, else any three of its tensors of 2 dims or more.
    Of several readings, the fewest FLOPs (a floor must not overstate the work)."""
    st = lambda i: strides[i] if isinstance(strides, list) and i < len(strides) else None     # noqa: E731
    mats = [(i, (t, st(i))) for i, t in enumerate(by_arg) if t is not None and len(t.shape) >= 2]
    role = lambda i: roles[i] if roles and i < len(roles) else ""       # noqa: E731
    named = {role(i): t for i, t in mats}
    out = next((t for i, t in mats if role(i).startswith(("out_ptr", "in_out_ptr"))), None)
    if "arg_A" in named and "arg_B" in named and out is not None:
        triples = [(named["arg_A"], named["arg_B"], out)]
    else:
        triples = [(a, b, c) for ia, a in mats for ib, b in mats for ic, c in mats if len({ia, ib, ic}) == 3]
    found = [d for a, b, c in triples for d in _view_dims(a, b, c)]
    return min(found, key=lambda d: d[0] * d[1] * d[2] * d[3]) if found else None


def iteration_space(call: OpCall, roles: list[str] | None) -> int | None:
    """Elements one launch iterates over (xnumel · r0_numel · ...), from the integer arguments after
    the tensors (the source's argument names pick the ``*numel`` ones when it is kept). A pointer is
    loaded at most once per element, so a table the kernel gathers from (an embedding) counts the rows
    it can reach, not its whole size. None when the call does not record them."""
    values = [call.value(i) for i in range(len(call.dims))]
    if roles:
        numels = [v for v, r in zip(values, roles) if r.endswith("numel")]
    else:
        last_tensor = max((i for i in range(len(call.dims)) if call.tensor(i) is not None), default=-1)
        numels = values[last_tensor + 1:]
    if not numels or not all(isinstance(v, int) and v > 0 for v in numels):
        return None
    return math.prod(numels)


def inductor_cost(call: OpCall, fused: list[str], roles: list[str] | None, source: str | None = None) -> Cost | str:
    """Matmul templates (``triton_tem_``, or a kernel whose fused ops name a product and whose operands
    are A[M,K], B[K,N], C[M,N]): 2MNK FLOPs. Other kernels: one FLOP per element of the iteration
    space (else of the largest argument) per fused op; a pointwise kernel named after the ``addmm`` it
    was cut from is costed as pointwise, not left out. Bytes: each tensor argument once, at most one
    element per point of a pointwise/reduction kernel's iteration space; ``in_out_ptr`` twice (from
    the source's roles, or a kernel with a single pointer)."""
    by_arg = [call.tensor(i) for i in range(len(call.dims))]
    tensors = [t for t in by_arg if t is not None]
    if not tensors:
        return "Inductor kernel without recorded tensor arguments"
    if roles is None and len(tensors) == 1:          # one pointer: the kernel reads and writes it
        roles = ["in_out_ptr0" if t is not None else "" for t in by_arg]
        source_note = "its one pointer read and written"
    elif roles:
        source_note = "pointer roles from kernel source" + ("; reads as far as its loads reach" if source and not
                                                            call.name.startswith("triton_tem_") else "")
    else:
        source_note = "each tensor argument once: a lower bound (in/out pointers need the kernel source)"
    template = call.name.startswith("triton_tem_") or call.kernel.startswith("triton_tem_")
    kernel = call.name if call.name.startswith("triton_") else call.kernel
    stated = template_gemm(source, kernel) if template else None
    dims = stated or (_gemm_dims(tensors) if template or any(_MATMUL_OP.search(op) for op in fused) else None)
    if template and dims is None:
        dims = view_gemm_dims(by_arg, roles, call.strides)
    space = None if template or dims is not None else iteration_space(call, roles)
    reach = pointer_reach(source, kernel, _numels(call, roles)) if source and not template else {}
    nbytes = 0
    for i, t in enumerate(by_arg):
        if t is None:
            continue
        role = roles[i] if roles is not None and i < len(roles) else ""
        twice = role.startswith("in_out_ptr")
        touched = t.nbytes if space is None else min(t.nbytes, space * t.itemsize)
        if reach.get(role) is not None and not role.startswith(("out_ptr", "in_out_ptr", "ws_ptr")):
            touched = min(touched, reach[role] * t.itemsize)
        nbytes += touched * (2 if twice else 1)
    dtype = next((t.dtype for t in tensors if t.dtype in FLOAT_DTYPES), "fp32")
    if template and dims is None:
        return "Inductor matmul template: operand shapes not recognised"
    if dims is not None:
        batch, m, n, k = dims
        how = "M, N, K from its source" if stated else "2MNK"
        adds, why = _epilogue_adds(source, kernel, fused) if template else (0, "")
        if adds:
            how += f"; + {'' if adds == 1 else f'{adds} x '}M·N adds ({why})"
        return Cost(flops=2.0 * batch * m * n * k + adds * batch * m * n, bytes=float(nbytes), dtype=dtype,
                    unit="matrix", model=f"Inductor template: {how}; bytes {source_note}")
    numel = space if space is not None else max(t.numel for t in tensors)
    opaque = opaque_block_pointers(source, kernel, _numels(call, roles)) if source else []
    if opaque:
        source_note += f"; block pointer shape not derivable for {', '.join(opaque)}: its whole tensor"
    return Cost(flops=float(numel * max(1, len(fused))), bytes=float(nbytes), dtype=dtype, unit="vector",
                model=f"Inductor kernel: bytes {source_note}; 1 FLOP/element per fused op")


def _epilogue_adds(source: str | None, kernel: str, fused: list[str]) -> tuple[int, str]:
    """Tensors a GEMM template adds to its M x N result, one add per element each, and why: the epilogue's
    ``acc + tmp`` lines where the source is kept, else 1 where its name says it fused an addmm/baddbmm
    (the bias; the template's other fused ops are not counted: a lower bound)."""
    adds = template_acc_adds(source, kernel) if source else None
    if adds is not None:
        return adds, "its epilogue adds to acc"
    named = fused or ops_from_name(kernel) or []
    return (1, "the bias of the addmm its name fuses") if {"addmm", "baddbmm"} & set(named) else (0, "")


def _numels(call: OpCall, roles: list[str] | None) -> dict[str, int]:
    """``xnumel``/``r0_numel`` values the call passed (a kernel compiled for dynamic shapes)."""
    if not roles:
        return {}
    out = {}
    for i, role in enumerate(roles[:len(call.dims)]):
        v = call.value(i)
        if role.endswith("numel") and isinstance(v, int) and not isinstance(v, bool) and v > 0:
            out[role] = v
    return out
