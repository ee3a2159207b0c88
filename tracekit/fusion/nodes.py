"""A step's op calls: the kernel table's rows grouped by the op that launched them, with each call's
reads and writes (``node_io``, from the op's record in the op table) and its FLOPs, bytes and floors
totalled. ``fusion.dataflow`` links the calls' tensors into the step's dataflow."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tracekit.cost.rates import rate_for
from tracekit.fusion.exact import ExactIO
from tracekit.ops import IO, OpCall, lookup
from tracekit.ops.inductor import inductor_io, is_inductor_kernel
from tracekit.ops.serving import engine_keys

_SIGNATURE = re.compile(r"def\s+(\w+)\s*\(([^)]*)\)")


def signature_roles(source: str, kernel: str) -> list[str] | None:
    """Argument names of ``kernel``'s def in an Inductor source; a file with one jit kernel whose def
    is ``triton_`` (unique kernel names off) matches the ``triton__0d1d2d`` names Triton derives."""
    found = {m.group(1): m.group(2) for m in _SIGNATURE.finditer(source)}
    args = found.get(kernel)
    if args is None:
        jit = [n for n in found if n.startswith("triton") and (kernel.startswith(n + "_") or kernel == n)]
        args = found[jit[0]] if len(jit) == 1 else None
    if args is None:
        return None
    return [a.split(":")[0].strip() for a in args.split(",") if a.strip()]


def node_io(op: str, dims, types, concrete=None, roles: list[str] | None = None, kernel: str = "",
            strides=None, engine=None) -> IO | None:
    """Reads and writes of one op call from its record in the op table; an op without a record (or
    whose outputs its arguments do not tell) reads its tensor inputs and writes unknown tensors.
    ``kernel``: the kernel's name (a cat's TensorList dtype is only in it). None when the op records
    no shapes. ``strides``: Kineto's Input Strides (a broadcast input is read once per stored element).
    ``engine``: the step's engine annotation (paged attention reads the keys it names: ``engine_keys``)."""
    if not isinstance(op, str) or not isinstance(dims, list):
        return None
    call = OpCall(op, dims, types or [], strides if isinstance(strides, list) else None,
                  concrete if isinstance(concrete, list) else None, kernel=kernel)
    call.kv_keys = engine_keys(call, engine)
    if is_inductor_kernel(op):
        return inductor_io(call, roles)
    family = lookup(op)
    io = family.outputs(call) if family is not None else None
    return io if io is not None else IO(tuple(call.tensors()), None)


# ---- the kernel/tensor graph of one step ---------------------------------------------------------

@dataclass
class Node:
    """One op call in a step (its kernels share the op), in launch order."""

    index: int
    rows: list                       # kernel table labels
    names: list[str]
    op: str | None
    fused_ops: list[str]
    io: IO | None
    flops: float
    bytes: float
    floor_us: float
    compute_us: float
    exact: ExactIO | None = None     # reads/writes by storage, from the execution trace
    label: str = ""                  # the kernel that carries the call's floor (else its longest non-memset)
    work: list[str] | None = None    # that kernel's fused ops: what a view shows for the call

    def shown(self) -> tuple[str, list[str]]:
        """(kernel name, fused ops) a view labels the call with: the kernel that carries its floor, not
        a memset beside it, and its own ops, not every sibling's (two layer-norm-backward kernels are
        one op, not a fusion of two)."""
        return (self.label or self.names[0]), (self.fused_ops if self.work is None else self.work)


def _total(values) -> float:
    """Sum of the known values (NaN and None left out); NaN when none is known."""
    total, known = 0.0, False
    for v in values:
        if v is not None and v == v:
            total += float(v)
            known = True
    return total if known else float("nan")


_NODE_COLUMNS = ("op_id", "name", "op", "op_dims", "op_types", "op_concrete", "io", "fused_ops", "flops", "bytes",
                 "floor_us", "dtype", "compute_unit", "dur_us", "et_io", "kind")
(_OP_ID, _NAME, _OP, _DIMS, _TYPES, _CONCRETE, _IO, _FUSED, _FLOPS, _BYTES, _FLOOR, _DTYPE, _UNIT, _DUR,
 _ET, _KIND) = range(len(_NODE_COLUMNS))


def _row_tuples(df) -> list[tuple]:
    """The table's rows as plain tuples of ``_NODE_COLUMNS`` (None where a column is missing)."""
    n = len(df)
    return list(zip(*[df[c].tolist() if c in df else [None] * n for c in _NODE_COLUMNS]))


def build_nodes(sk, spec) -> list[Node]:
    """Group a step's rows (time order) into op calls and total their cost."""
    return group_nodes(list(zip(sk.index, _row_tuples(sk))), spec, "io" in sk)


def step_rows(df) -> dict:
    """{step: [(label, row), ...]} with each step's rows in time order (a stable sort on start_us), from
    one pass over the table: what ``step_fusion`` takes as ``rows`` instead of a step's frame."""
    order = np.argsort(df["start_us"].to_numpy(dtype=float), kind="stable")
    ordered = df.iloc[order]
    out: dict = {}
    for label, step, row in zip(ordered.index, ordered["step"].tolist(), _row_tuples(ordered)):
        got = out.get(step)
        if got is None:
            out[step] = got = []
        got.append((label, row))
    return out


def _carrier(rows: list) -> tuple:
    """The row of an op call that carries its floor (the largest), else its longest kernel that is no
    memset (a GEMM's split-K zeroing is not the GEMM), else its longest row."""
    floored = [r for r in rows if r[_FLOOR] is not None and r[_FLOOR] == r[_FLOOR]]
    if floored:
        return max(floored, key=lambda r: r[_FLOOR])
    real = [r for r in rows if r[_KIND] != "memset"] or rows
    return max(real, key=lambda r: r[_DUR] if r[_DUR] == r[_DUR] else 0.0)


def group_nodes(pairs: list, spec, has_io: bool) -> list[Node]:
    groups: dict = {}
    for label, r in pairs:
        op_id = r[_OP_ID]
        key = ("op", op_id) if isinstance(op_id, int) and op_id != -1 else ("row", label)
        got = groups.get(key)
        if got is None:
            groups[key] = got = []
        got.append((label, r))
    rates: dict = {}

    def compute_us(r) -> float:
        f, d = r[_FLOPS], r[_DTYPE]
        if spec is None or f is None or not (f == f) or not f or not isinstance(d, str):
            return 0.0
        unit = r[_UNIT]
        rate = rates.get((unit, d))
        if rate is None:
            rate = rates[(unit, d)] = rate_for(spec, d, unit)[1] or 0.0   # unknown: the row has no floor
        return f / (rate * 1e6) if rate else 0.0

    nodes = []
    for i, part in enumerate(groups.values()):
        label, first = part[0]
        io = first[_IO]
        if not isinstance(io, IO):
            io = node_io(first[_OP], first[_DIMS], first[_TYPES], first[_CONCRETE]) if not has_io else None
        exact = first[_ET]
        op = first[_OP] if isinstance(first[_OP], str) else None
        if len(part) == 1:
            floor = first[_FLOOR]
            nodes.append(Node(i, [label], [str(first[_NAME])], op,
                              list(first[_FUSED]) if isinstance(first[_FUSED], list) else [], io,
                              _total((first[_FLOPS],)), _total((first[_BYTES],)), _total((floor,)),
                              compute_us(first), exact if isinstance(exact, ExactIO) else None))
            continue
        rows = [r for _, r in part]
        ops = [o for r in rows if isinstance(r[_FUSED], list) for o in r[_FUSED]]
        main = max(rows, key=lambda r: r[_DUR] if r[_DUR] == r[_DUR] else 0.0)
        known = main[_FLOOR] is not None and main[_FLOOR] == main[_FLOOR]
        floor = _total(r[_FLOOR] for r in rows) if known else float("nan")
        carrier = _carrier(rows)
        nodes.append(Node(i, [lb for lb, _ in part], [str(r[_NAME]) for r in rows], op, ops, io,
                          _total(r[_FLOPS] for r in rows), _total(r[_BYTES] for r in rows), floor,
                          sum(compute_us(r) for r in rows), exact if isinstance(exact, ExactIO) else None,
                          str(carrier[_NAME]), list(carrier[_FUSED]) if isinstance(carrier[_FUSED], list) else []))
    return nodes




def content_key(pairs: list) -> tuple:
    """What ``group_nodes`` and the step's dataflow read of a step's rows, as one hashable value: two steps
    with equal keys give the same op calls, tensor values and totals (their labels aside). Op calls by their
    order of first appearance (not their ids), whether each multi-kernel call's longest kernel has a floor
    (which kernel is longest varies from step to step; the rest of it is in the rows), shared objects
    (tensor sizes, shapes, the ET join) by identity, NaN as None. Repeated training steps share one key; a
    step whose rows differ in any of these gets its own."""
    calls: dict = {}
    rows = []
    for k, (_, r) in enumerate(pairs):
        op_id = r[_OP_ID]
        call = calls.setdefault(op_id, len(calls)) if isinstance(op_id, int) and op_id != -1 else -1 - k
        f, b, fl, fused = r[_FLOPS], r[_BYTES], r[_FLOOR], r[_FUSED]
        rows.append((call, r[_NAME], r[_OP], id(r[_DIMS]), id(r[_TYPES]), id(r[_CONCRETE]), id(r[_IO]),
                     tuple(fused) if type(fused) is list else fused, f if f == f else None,
                     b if b == b else None, fl if fl == fl else None, r[_DTYPE], r[_UNIT], id(r[_ET])))
    longest = []
    if len(calls) < sum(1 for row in rows if row[0] >= 0):      # some call has several kernels
        members: dict = {}
        for k, row in enumerate(rows):
            if row[0] >= 0:
                members.setdefault(row[0], []).append(k)
        for call, ks in members.items():
            if len(ks) > 1:                   # (group_nodes reads one thing of it: whether its floor is known)
                main = max((pairs[k][1] for k in ks), key=lambda r: r[_DUR] if r[_DUR] == r[_DUR] else 0.0)
                longest.append(main[_FLOOR] is not None and main[_FLOOR] == main[_FLOOR])
    return tuple(rows), tuple(longest)
