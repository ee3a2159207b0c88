"""Which tensors each kernel reads and writes, as far as the trace's op shapes tell.

Kineto records each op's *input* shapes and dtypes, not its outputs and not tensor identities.
``node_io`` infers an op call's outputs from a small table of op families (matmuls, attention,
elementwise, norms, copies, fills, cat, embedding, reductions with their dims); Inductor kernels
get their roles (in_ptr / out_ptr / in_out_ptr) from the kernel source kept with the trace. Ops
not in the table, and Inductor kernels without a source, have unknown outputs (None): no guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracekit.cost.ops_pointwise import BINARY, COMPARE, TERNARY, UNARY
from tracekit.cost.registry import OpCall, Tensor, broadcast

_SIGNATURE = re.compile(r"def\s+(\w+)\s*\(([^)]*)\)")
ELEMENTWISE = set(UNARY) | set(BINARY) | set(TERNARY) | {"dropout", "native_dropout", "alpha_dropout"}
SAME_AS_INPUT = {"native_layer_norm", "layer_norm", "rms_norm", "_fused_rms_norm", "group_norm",
                 "native_group_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
                 "_native_batch_norm_legit_no_training", "instance_norm", "_softmax", "softmax",
                 "_log_softmax", "log_softmax", "clone", "contiguous", "_safe_softmax"}
REDUCTIONS = {"sum", "mean", "amax", "amin", "prod", "max", "min", "any", "all", "linalg_vector_norm"}
FILLS = {"fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_", "exponential_"}
# c10::ScalarType numbers as _to_copy's Concrete Inputs record them
SCALAR_TYPES = {0: ("uint8", 1), 1: ("int8", 1), 2: ("int16", 2), 3: ("int32", 4), 4: ("int64", 8),
                5: ("fp16", 2), 6: ("fp32", 4), 7: ("fp64", 8), 11: ("bool", 1), 15: ("bf16", 2)}
_FLOAT = ("fp64", "fp32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class NodeIO:
    """Tensors one op call reads and writes; ``outputs`` None when they cannot be told."""

    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...] | None
    rule: str


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


def _plain(op: str) -> str:
    return op.split("::")[-1]


def _mm_out(a: Tensor, b: Tensor) -> Tensor:
    shape = a.shape[:-1] + b.shape[-1:]
    return Tensor(shape, a.dtype, a.itemsize)


def _drop_out_arg(ins: list[Tensor], out: Tensor) -> tuple[list[Tensor], Tensor]:
    """mm.out-style calls record the out tensor as their last argument: it is written, not read."""
    if len(ins) >= 3 and ins[-1].shape == out.shape and ins[-1].dtype == out.dtype:
        return ins[:-1], ins[-1]
    return ins, out


def _like(t: Tensor, shape=None, dtype: tuple[str, int] | None = None) -> Tensor:
    return Tensor(tuple(shape if shape is not None else t.shape), *(dtype or (t.dtype, t.itemsize)))


def inductor_io(call: OpCall, roles: list[str] | None) -> NodeIO:
    """Inductor kernel arguments by role; without the source the inputs are all tensor args, outputs unknown."""
    args = [(i, call.tensor(i)) for i in range(len(call.dims))]
    tensors = [(i, t) for i, t in args if t is not None]
    if not roles:
        return NodeIO(tuple(t for _, t in tensors), None, "Inductor kernel without source: outputs unknown")
    ins, outs = [], []
    for i, t in tensors:
        role = roles[i] if i < len(roles) else ""
        if role.startswith("in_out_ptr"):
            ins.append(t)
            outs.append(t)
        elif role.startswith("out_ptr"):
            outs.append(t)
        else:
            ins.append(t)
    return NodeIO(tuple(ins), tuple(outs), "Inductor kernel: pointer roles from source")


def node_io(op: str, dims, types, concrete=None, roles: list[str] | None = None) -> NodeIO | None:
    """Reads and writes of one op call from its recorded inputs; None when the op records no tensors."""
    if not isinstance(op, str) or not isinstance(dims, list):
        return None
    call = OpCall(op, dims, types or [], None, concrete if isinstance(concrete, list) else None)
    name = _plain(op)
    if name.startswith("triton_") or name.startswith("cpp_fused"):
        return inductor_io(call, roles)
    ins = call.tensors()
    try:
        out = _outputs(name, call, ins)
    except (IndexError, TypeError, ValueError, KeyError):
        out = None
    if out is None:
        return NodeIO(tuple(ins), None, f"{name}: outputs not modelled")
    reads, writes = out
    return NodeIO(tuple(reads), tuple(writes), f"{name}: outputs from op shapes")


def _outputs(name: str, call: OpCall, ins: list[Tensor]) -> tuple[list[Tensor], list[Tensor]] | None:
    if not ins and name not in ("cat", "stack", "_cat"):
        return None
    if name in ("mm", "bmm", "matmul"):
        a, b = call.tensor(0), call.tensor(1)
        out = _mm_out(a, b)
        if len(a.shape) > 2 or len(b.shape) > 2:
            out = _like(a, broadcast(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]))
        reads, out = _drop_out_arg(ins, out)
        return reads, [out]
    if name in ("addmm", "baddbmm", "_addmm_activation", "addbmm"):
        a, b = call.tensor(1), call.tensor(2)
        reads, out = _drop_out_arg(ins, _mm_out(a, b))
        return reads, [out]
    if name == "linear":
        x, w = call.tensor(0), call.tensor(1)
        return ins, [_like(x, x.shape[:-1] + (w.shape[0],))]
    if "attention" in name and "backward" not in name:
        q, v = call.tensor(0), call.tensor(2)
        return ins, [_like(q, q.shape[:-1] + v.shape[-1:])]
    if name == "copy_":
        dst, src = call.tensor(0), call.tensor(1)
        return [src], [dst]
    if name in FILLS:
        return [], [ins[0]]
    if name.endswith("_") and name[:-1] in ELEMENTWISE | set(COMPARE):
        return ins, [ins[0]]                     # in place: a new version of the first input
    if name in ELEMENTWISE or name in COMPARE:
        floats = [t for t in ins if t.dtype in _FLOAT]
        base = floats[0] if floats else ins[0]
        dtype = ("bool", 1) if name in COMPARE else (base.dtype, base.itemsize)
        return ins, [_like(base, broadcast(*(t.shape for t in ins)), dtype)]
    if name in SAME_AS_INPUT:
        return ins, [ins[0]]
    if name in ("_to_copy", "to"):
        code = call.value(1)
        dtype = SCALAR_TYPES.get(code) if isinstance(code, int) else (ins[0].dtype, ins[0].itemsize)
        return ([ins[0]], [_like(ins[0], dtype=dtype)]) if dtype else None
    if name in ("cat", "_cat"):
        parts = call.tensor_list(0)
        dim = call.value(1) or 0
        shape = list(parts[0].shape)
        dim = dim % len(shape)
        shape[dim] = sum(p.shape[dim] for p in parts)
        return parts, [_like(parts[0], shape)]
    if name == "embedding":
        table, index = call.tensor(0), call.tensor(1)
        return [table, index], [_like(table, index.shape + table.shape[1:])]
    if name in REDUCTIONS:
        return _reduction(call, ins[0])
    return None


def _reduction(call: OpCall, x: Tensor) -> tuple[list[Tensor], list[Tensor]] | None:
    dims = call.value(1)
    keep = bool(call.value(2))
    if dims is None:
        return ([x], [_like(x, ())]) if len(call.dims) == 1 else None
    if isinstance(dims, int):
        dims = [dims]
    if not isinstance(dims, list) or not all(isinstance(d, int) for d in dims):
        return None
    axes = {d % len(x.shape) for d in dims} if x.shape else set()
    shape = [1 if i in axes else s for i, s in enumerate(x.shape) if keep or i not in axes]
    return [x], [_like(x, shape)]



# ---- the kernel/tensor graph of one step ---------------------------------------------------------

@dataclass
class Node:
    """One op call in a step (its kernels share the op), in launch order."""

    index: int
    rows: list                       # kernel table labels
    names: list[str]
    op: str | None
    fused_ops: list[str]
    io: NodeIO | None
    flops: float
    bytes: float
    floor_us: float
    compute_us: float


@dataclass
class Value:
    """One tensor version: written by ``producer`` (None: from outside the step), read by ``readers``."""

    tensor: Tensor
    producer: int | None
    readers: list[int]
    ambiguous: bool = False          # an outside tensor has the same size and dtype

    @property
    def intermediate(self) -> bool:
        return self.producer is not None and bool(self.readers)


def _matrix_unit(category, note) -> bool:
    note = note if isinstance(note, str) else ""
    return category in ("gemm", "attention", "conv") or "2MNK" in note or "Inductor template" in note


def _total(values) -> float:
    known = [float(v) for v in values if v == v and v is not None]
    return float(sum(known)) if known else float("nan")


def build_nodes(sk, spec) -> list[Node]:
    """Group a step's rows (time order) into op calls and total their cost."""
    n = len(sk)
    col = lambda c: sk[c].tolist() if c in sk else [None] * n  # noqa: E731
    rows = list(zip(sk.index, col("op_id"), col("name"), col("op"), col("op_dims"), col("op_types"),
                    col("op_concrete"), col("io"), col("fused_ops"), col("flops"), col("bytes"), col("floor_us"),
                    col("dtype"), col("category"), col("cost_note"), col("dur_us")))
    groups: dict = {}
    for r in rows:
        op_id = r[1]
        key = ("op", op_id) if isinstance(op_id, int) and op_id != -1 else ("row", r[0])
        groups.setdefault(key, []).append(r)
    nodes = []
    for i, part in enumerate(groups.values()):
        first = part[0]
        io = first[7] if isinstance(first[7], NodeIO) else None
        if io is None and "io" not in sk:
            io = node_io(first[3], first[4], first[5], first[6])
        compute = 0.0
        for r in part:
            f, d = r[9], r[12]
            if spec is None or f is None or not (f == f) or not f or not isinstance(d, str):
                continue
            rate = spec.matmul_peak(d) if _matrix_unit(r[13], r[14]) else spec.vector_peak(d)
            compute += f / (rate * 1e6) if rate else 0.0
        ops = [o for r in part if isinstance(r[8], list) for o in r[8]]
        main = max(part, key=lambda r: r[15] if isinstance(r[15], (int, float)) else 0.0)
        floor = _total(r[11] for r in part) if main[11] == main[11] and main[11] is not None else float("nan")
        nodes.append(Node(i, [r[0] for r in part], [str(r[2]) for r in part],
                          first[3] if isinstance(first[3], str) else None, ops, io,
                          _total(r[9] for r in part), _total(r[10] for r in part), floor, compute))
    return nodes


def link(nodes: list[Node]) -> list[Value]:
    """Tensor versions by size and launch order: a read takes the latest earlier write of the same
    element count and dtype in the step (a view between kernels keeps both). Only one input of a
    kernel binds to that write; a read with no write to take is an outside tensor (one per size,
    dtype and position within a kernel, so two same-sized inputs of one kernel are two tensors)."""
    values: list[Value] = []
    last: dict = {}
    outside: dict = {}
    outside_sigs: set = set()
    for node in nodes:
        if node.io is None:
            continue
        sigs = [(t.numel, t.dtype) for t in node.io.inputs]
        bound: set = set()
        seen: dict = {}
        for t, sig in zip(node.io.inputs, sigs):
            v = last.get(sig)
            if v is not None and sig not in bound:
                bound.add(sig)
                values[v].readers.append(node.index)
                values[v].ambiguous |= sig in outside_sigs or sigs.count(sig) > 1
                continue
            k = (sig, seen.get(sig, 0))
            seen[sig] = k[1] + 1
            if k not in outside:
                outside[k] = len(values)
                outside_sigs.add(sig)
                values.append(Value(t, None, []))
            if node.index not in values[outside[k]].readers:
                values[outside[k]].readers.append(node.index)
        for t in node.io.outputs or ():
            last[(t.numel, t.dtype)] = len(values)
            values.append(Value(t, node.index, []))
    return values


def graph_of(nodes: list[Node], values: list[Value]):
    """networkx DiGraph: ("k", i) kernel nodes, ("t", j) tensor nodes, edges along the data."""
    import networkx as nx
    g = nx.DiGraph()
    for n in nodes:
        g.add_node(("k", n.index), names=n.names, fused_ops=n.fused_ops)
    for j, v in enumerate(values):
        g.add_node(("t", j), shape=v.tensor.shape, dtype=v.tensor.dtype, bytes=v.tensor.nbytes)
        if v.producer is not None:
            g.add_edge(("k", v.producer), ("t", j))
        for r in v.readers:
            g.add_edge(("t", j), ("k", r))
    return g


# ---- per step: counts, fusion ratio, headroom ----------------------------------------------------

def step_fusion(trace, step: int, sk=None):
    """The step's op-call chain, tensor values, and the one-kernel floor next to the per-kernel floors.
    ``sk``: the step's rows when the caller already has them."""
    if sk is None:
        df = trace.kernels
        sk = df[df["step"] == step]
    sk = sk.sort_values("start_us", kind="stable")
    nodes = build_nodes(sk, trace.spec)
    values = link(nodes)
    unknown = [n for n in nodes if n.io is None or n.io.outputs is None]
    inter = [v for v in values if v.intermediate]
    headroom = float(sum(v.tensor.nbytes * (1 + len(v.readers)) for v in inter))
    ext = sum(v.tensor.nbytes for v in values if v.producer is None)
    final = sum(v.tensor.nbytes for v in values if v.producer is not None and not v.readers)
    fused_bytes = float(ext + final)
    flops = float(sum(n.flops for n in nodes if n.flops == n.flops))
    uncosted = [n for n in nodes if not n.floor_us == n.floor_us]
    bw = trace.spec.bandwidth_gbs if trace.spec is not None else None
    if len(nodes) == 1:
        rule = "single kernel: nothing to fuse"
        headroom, fused_floor = 0.0, nodes[0].floor_us
        fused_bytes = nodes[0].bytes
    else:
        ambiguous = sum(1 for v in inter if v.ambiguous)
        rule = ("size+dtype match in launch order (a read takes the latest earlier write of its element count "
                "and dtype)" + (f"; {ambiguous} of {len(inter)} intermediates ambiguous (an outside tensor has the "
                                "same size and dtype)" if ambiguous else "; unambiguous"))
        if unknown:
            rule += (f"; incomplete: {len(unknown)} of {len(nodes)} kernels write tensors the trace does not tell "
                     "(where read later, those count as outside tensors)")
        complete = not unknown and not uncosted and bw
        fused_floor = max(sum(n.compute_us for n in nodes), fused_bytes / (bw * 1e3)) if complete else float("nan")
        if not complete and not unknown:
            rule += "; no one-kernel floor: " + ("no device bandwidth" if not bw else
                                                 f"{len(uncosted)} kernels without a floor")
    sure = float(sum(v.tensor.nbytes * (1 + len(v.readers)) for v in inter if not v.ambiguous))
    return dict(step=step, nodes=nodes, values=values, rule=rule,
                headroom_bytes=headroom if nodes else None, headroom_unambiguous_bytes=sure if nodes else None, fused_bytes=fused_bytes if nodes else None,
                fused_flops=flops, fused_floor_us=fused_floor if nodes else float("nan"),
                split_floor_us=float(sum(n.floor_us for n in nodes if n.floor_us == n.floor_us)),
                split_bytes=float(sum(n.bytes for n in nodes if n.bytes == n.bytes)), unknown_io=len(unknown))


def _nan_none(x):
    return None if x is None or x != x else float(x)


def fusion_summary(trace) -> dict:
    """Summary keys for the JSON contract: per step kernels, fused ops, fusion ratio, headroom."""
    df = trace.kernels
    indices = [s.index for s in trace.steps] or [0]
    per = []
    by_step = dict(tuple(df.groupby("step", sort=False))) if len(df) else {}
    for k in indices:
        sk = by_step.get(k, df.iloc[0:0])
        known = [ops for ops in sk["fused_ops"] if isinstance(ops, list) and ops != ["unknown"]]
        cats = {}
        for cat, ops in zip(sk["category"], sk["fused_ops"]):
            c = cats.setdefault(str(cat), {"kernels": 0, "fused_ops": 0})
            c["kernels"] += 1
            c["fused_ops"] += len(ops) if isinstance(ops, list) and ops != ["unknown"] else 0
        f = step_fusion(trace, k, sk)
        per.append(dict(step=k, kernels=len(sk), op_calls=len(f["nodes"]),
                        fused_ops=sum(len(o) for o in known), kernels_unknown_ops=len(sk) - len(known),
                        aten_ops_per_kernel=(sum(len(o) for o in known) / len(known)) if known else None,
                        by_category=cats, headroom_bytes=_nan_none(f["headroom_bytes"]),
                        headroom_unambiguous_bytes=_nan_none(f["headroom_unambiguous_bytes"]),
                        intermediates=sum(1 for v in f["values"] if v.intermediate),
                        fused_bytes=_nan_none(f["fused_bytes"]), fused_flops=f["fused_flops"],
                        fused_floor_us=_nan_none(f["fused_floor_us"]), split_floor_us=f["split_floor_us"],
                        split_bytes=f["split_bytes"], rule=f["rule"]))
    return {"fusion_headroom_bytes": [p["headroom_bytes"] for p in per],
            "fused_floor_us_per_step": [p["fused_floor_us"] for p in per],
            "fusion_rule": [p["rule"] for p in per],
            "fusion_per_step": per}
