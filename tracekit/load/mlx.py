"""MLX graphs (``mx.export_to_dot``) in the shared kernel-list model.

A dot file holds structure only: array nodes (letters, or names given at export) and primitive
nodes whose label is the primitive ("Matmul", "CompiledBroadcastAddBroadcastMaximum"). Shapes and
dtypes come from the NNN.json that ``tracekit capture`` writes beside each NNN.dot; without it rows
carry counts but no FLOPs or floors. A graph has no timings: every row's dur_us is NaN.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import orjson
import pandas as pd

from tracekit.errors import TracekitError
from tracekit.limits import read_input
from tracekit.load.fields import mlx_sidecar
from tracekit.model.schema import KERNEL_COLUMNS, fill_missing
from tracekit.model.trace import Trace
from tracekit.ops.mlx import ATEN, COMPILED, VIEWS, fused_parts

PYDOT_MAX_CHARS = 1 << 20              # dot text in another layout than MLX's (docs/limits.md)
NOT_KERNELS = VIEWS | {"Load"}          # Load reads a file (mx.load), no device work

REDUCE_LABELS = {"Sum", "Prod", "Max", "Min", "And", "Or"}         # the dot's names for Reduce
BITWISE = {"BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift", "RightShift"}
REDUCES = REDUCE_LABELS | {"ArgReduce", "LogSumExp"}

# MLX dtype names -> Kineto "Input type" strings
KINETO_TYPES = {"float32": "float", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float64": "double",
                "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
                "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
                "uint64": "unsigned long", "bool": "bool", "complex64": "c10::complex<float>"}


@dataclass
class DotGraph:
    """An MLX dot graph as a networkx MultiDiGraph: array and primitive nodes, ordered edges."""

    g: nx.MultiDiGraph
    prims: list[str]            # primitive node ids in a topological (file) order

    def label(self, p: str) -> str:
        return self.g.nodes[p]["label"]

    def inputs(self, p: str) -> list[str]:
        return [u for u, _, d in sorted(self.g.in_edges(p, data=True), key=lambda e: e[2]["pos"])]

    def outputs(self, p: str) -> list[str]:
        return [v for _, v, d in sorted(self.g.out_edges(p, data=True), key=lambda e: e[2]["pos"])]

    def producer(self, a: str) -> tuple[str, int] | None:
        return next(((p, d["pos"]) for p, _, d in self.g.in_edges(a, data=True)), None)


_ID = r'"(?:[^"\\]|\\.)*"|[\w.]+'
_NODE = re.compile(rf'^\{{\s*(?:rank\s*=\s*(source|sink)\s*;\s*)?({_ID})\s*(?:\[(.*)\])?\s*;?\s*\}}$')
_EDGE = re.compile(rf'^({_ID})\s*->\s*({_ID})\s*;?$')
_ATTR = re.compile(r'(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s\]]+)')


def _unquote(s: str) -> str:
    return s[1:-1].replace('\\"', '"') if len(s) >= 2 and s[0] == s[-1] == '"' else s


def parse_dot(text: str, where: str = "dot") -> DotGraph:
    """Parse MLX's dot output. MLX wraps every node in its own ``{ }`` subgraph, which
    ``nx.nx_pydot.read_dot`` flattens without the labels, and names a primitive node by the
    primitive's address, which arrays made by one compiled function share: each declaration is
    read as its own node (``id``, ``id#2``, ...). Other dot layouts go through pydot."""
    nodes, edges, body = [], [], text.strip()
    if not body.startswith("digraph") or not body.endswith("}"):
        raise TracekitError(f"{where}: not a dot digraph (expected MLX mx.export_to_dot output)")
    current, count = {}, {}                 # primitive id -> its latest declaration, declarations so far
    try:
        for ln in filter(None, (x.strip() for x in body[body.index("{") + 1:-1].splitlines())):
            if m := _NODE.match(ln):
                name, attrs = _unquote(m.group(2)), {k: _unquote(v) for k, v in _ATTR.findall(m.group(3) or "")}
                attrs.update({"rank": m.group(1)} if m.group(1) else {})
                if "label" in attrs:
                    count[name] = count.get(name, 0) + 1
                    current[name] = name = f"{name}#{count[name]}" if count[name] > 1 else name
                nodes.append((name, attrs))
            elif m := _EDGE.match(ln):
                edges.append(tuple(current.get(x, x) for x in map(_unquote, m.groups())))
            else:
                raise ValueError(ln)
    except ValueError:
        nodes, edges = _pydot_statements(text, where)
    return _build(nodes, edges, where)


def _pydot_statements(text: str, where: str) -> tuple[list, list]:
    """Node and edge statements of dot text in any layout, subgraphs included (pydot)."""
    import pydot

    if len(text) > PYDOT_MAX_CHARS:         # pydot parses ~100 KB a second: bounded, not a stall
        raise TracekitError(f"{where}: dot text not in mx.export_to_dot's layout is read with pydot, up to "
                            f"{PYDOT_MAX_CHARS >> 10} KiB; this one is {len(text) >> 10} KiB")
    try:
        graph = (pydot.graph_from_dot_data(text) or [None])[0]
    except Exception:   # noqa: BLE001 - pydot raises bare parser exceptions
        graph = None
    if graph is None:
        raise TracekitError(f"{where}: unreadable dot (expected MLX mx.export_to_dot output)")
    nodes, edges, todo = [], [], [graph]
    while todo:
        sub = todo.pop(0)
        rank = sub.obj_dict.get("attributes", {}).get("rank")
        for n in sub.get_nodes():
            if n.get_name() not in ("node", "edge", "graph"):
                attrs = {k: _unquote(str(v)) for k, v in n.get_attributes().items()}
                nodes.append((_unquote(n.get_name()), {**attrs, **({"rank": rank} if rank else {})}))
        edges += [(_unquote(str(e.get_source())), _unquote(str(e.get_destination()))) for e in sub.get_edges()]
        todo += sub.get_subgraphs()
    return nodes, edges


def _build(nodes: list, edges: list, where: str) -> DotGraph:
    g, count = nx.MultiDiGraph(), {}
    for seq, (name, attrs) in enumerate(nodes):
        if name not in g:
            g.add_node(name, kind="primitive" if "label" in attrs else "array", seq=seq)
        g.nodes[name].update(attrs)
    for u, v in edges:                  # pos: input position at a primitive, output position from one
        for x in (u, v):
            if x not in g:
                g.add_node(x, kind="array", seq=len(g))
        key = (u, "out") if g.nodes[u]["kind"] == "primitive" else (v, "in")
        count[key] = count.get(key, -1) + 1
        g.add_edge(u, v, pos=count[key])
    try:
        order = list(nx.lexicographical_topological_sort(g, key=lambda n: g.nodes[n]["seq"]))
    except nx.NetworkXUnfeasible:
        raise TracekitError(f"{where}: graph has a cycle: not an MLX compute graph") from None
    return DotGraph(g, [n for n in order if g.nodes[n]["kind"] == "primitive"])


def read_dot(path: str | Path) -> DotGraph:
    try:
        return parse_dot(read_input(path, "dot graph", gunzip=False).decode(errors="replace"), str(path))
    except OSError as exc:
        raise TracekitError(f"{path}: cannot read ({exc.strerror or exc})") from None


EW = set("Add Subtract Multiply Divide Remainder Maximum Minimum Power ArcTan2 LogAddExp Select Abs Negative "
         "Exp Expm1 Log Log2 Log10 Log1p Sin Cos Tan Sinh Cosh Tanh ArcSin ArcCos ArcTan ArcSinh ArcCosh "
         "ArcTanh Sigmoid Sign Sqrt Rsqrt Square Erf ErfInv Floor Ceil Round Conjugate Real Imag AsType Full "
         "Copy StopGradient Contiguous BitwiseInvert".split()) | BITWISE
COMPARE = set("Equal NotEqual Greater GreaterEqual Less LessEqual LogicalAnd LogicalOr LogicalNot".split())
LIKE_FIRST = set("Softmax RMSNorm LayerNorm RoPE Sort CumSum CumProd CumMax CumMin CumLogSumExp".split())
SAME_DTYPE = (EW - {"AsType", "Select"}) | REDUCE_LABELS | set(
    "Broadcast Transpose Reshape Slice ExpandDims Squeeze Flatten Unflatten Matmul AddMM Concatenate Pad "
    "Split AsStrided LogSumExp".split())


def _bcast(shapes: list[list[int]]) -> list[int]:
    rank = max(map(len, shapes), default=0)
    return [max(s[i - rank + len(s)] if i - rank + len(s) >= 0 else 1 for s in shapes) for i in range(rank)]


def propagate(dot: DotGraph, known: dict) -> None:
    """Spread shapes and dtypes through primitives whose rule fixes them (MLX broadcasts and casts
    explicitly, so elementwise inputs and outputs agree), until nothing changes."""
    S = {a: list(v["shape"]) for a, v in known.items()}
    D = {a: v["dtype"] for a, v in known.items()}

    def unify(store: dict, group: list[str], value=None) -> bool:
        value = next((store[a] for a in group if a in store), None) if value is None else value
        new = [a for a in group if a not in store] if value is not None else []
        store.update(dict.fromkeys(new, value))
        return bool(new)

    prims = [(dot.label(p), dot.inputs(p), dot.outputs(p)) for p in dot.prims]
    for _ in range(64):
        changed = False
        for label, ins, outs in prims:
            if not ins or not outs:
                continue
            if label in EW or label in COMPARE:
                changed |= unify(S, ins + outs)
            elif label in LIKE_FIRST:
                changed |= unify(S, ins[:1] + outs)
            elif label == "Transpose" and len(S.get(ins[0], S.get(outs[0], []))) == 2:
                changed |= unify(S, outs, S[ins[0]][::-1] if ins[0] in S else None)
                changed |= unify(S, ins[:1], S[outs[0]][::-1] if outs[0] in S else None)
            elif label in ("Matmul", "AddMM") and len(ins) >= 2:    # [..., M, K] @ [..., K, N]
                a, b, o = S.get(ins[0]), S.get(ins[1]), S.get(outs[0])
                if a and b and min(len(a), len(b)) >= 2:
                    changed |= unify(S, outs, _bcast([a[:-2], b[:-2]]) + [a[-2], b[-1]])
                if o and b and not a and min(len(o), len(b)) >= 2:
                    changed |= unify(S, ins[:1], o[:-1] + [b[-2]])
                changed |= unify(S, ins[2:3] + outs) if label == "AddMM" else False
            elif label == "ScaledDotProductAttention" and len(ins) >= 3 and ins[0] in S and ins[2] in S:
                changed |= unify(S, outs, S[ins[0]][:-1] + S[ins[2]][-1:])
            elif label.startswith("Compiled") and all(a in S for a in ins):
                changed |= unify(S, outs, _bcast([S[a] for a in ins]))
            parts = fused_parts(label) if label.startswith("Compiled") else []
            if label in SAME_DTYPE or label in LIKE_FIRST or label == "Gather":
                changed |= unify(D, (ins + outs) if label in SAME_DTYPE else ins[:1] + outs)
            elif label in COMPARE:
                changed |= unify(D, ins) | unify(D, outs, "bool")
            elif label == "Select":
                changed |= unify(D, ins[1:] + outs) | unify(D, ins[:1], "bool")
            elif label in ("ArgReduce", "ArgSort"):
                changed |= unify(D, outs, "uint32")
            elif parts and not any(x == "AsType" or x in COMPARE for x in parts):
                changed |= unify(D, ins + outs)
        if not changed:
            break
    for a in set(S) & set(D):
        known.setdefault(a, {"shape": S[a], "dtype": D[a]})


def _shape_of(arrays: dict, a: str):
    info = arrays.get(a)
    return (list(info["shape"]), KINETO_TYPES.get(info["dtype"], info["dtype"])) if info else None


def kineto_call(label: str, ins: list[str], outs: list[str], arrays: dict) -> tuple:
    """(op, op_dims, op_types, op_concrete) for one primitive; dims None when shapes are unknown."""
    op = COMPILED if label.startswith("Compiled") else f"aten::{ATEN[label]}" if label in ATEN \
        else "aten::matmul" if label == "Matmul" else f"mlx::{label}"
    shaped, out_shaped = [_shape_of(arrays, a) for a in ins], [_shape_of(arrays, a) for a in outs]
    if None in shaped or (op == COMPILED and None in out_shaped):
        return op, None, None, None
    dims, types = [s for s, _ in shaped], [t for _, t in shaped]
    out0, concrete = (out_shaped or [None])[0], None
    if op == COMPILED:                             # inputs, then outputs, marked in op_concrete
        dims, types = dims + [s for s, _ in out_shaped], types + [t for _, t in out_shaped]
        concrete = ["in"] * len(ins) + ["out"] * len(outs)
    elif label == "Matmul" and len(dims) == 2 and len(dims[0]) == len(dims[1]) in (2, 3):
        op = {2: "aten::mm", 3: "aten::bmm" if dims[0][0] == dims[1][0] else op}[len(dims[0])]
    elif label == "AddMM" and len(dims) == 3:      # MLX inputs (a, b, c) -> aten::addmm (c, a, b)
        dims, types = [dims[2], dims[0], dims[1]], [types[2], types[0], types[1]]
    elif label == "Concatenate":                   # aten::cat takes one TensorList
        dims, types = [dims], types[:1]
    elif label == "Full" and out0:                 # fill_: the result, written once
        dims, types = [out0[0]], [out0[1]]
    elif label in REDUCES and out0 and len(out0[0]) == len(dims[0]):
        concrete = ["", str([i for i, (a, b) in enumerate(zip(dims[0], out0[0])) if a != b])]
    return op, dims, types, concrete


def broadcast_source(dot: DotGraph, a: str) -> str:
    """The array a chain of Broadcast views starts from: MLX's Broadcast is a stride-0 view, so an
    elementwise kernel reads the bias [N] once, not the [M, N] it is broadcast to (a compiled kernel
    already lists the unbroadcast input)."""
    for _ in range(64):
        found = dot.producer(a)
        if found is None or dot.label(found[0]) != "Broadcast" or not dot.inputs(found[0]):
            return a
        a = dot.inputs(found[0])[0]
    return a


ROW_CONSTANTS = dict(kind="kernel", step=0, op_source="mlx_graph", launch="")


def graph_table(dot: DotGraph, info: dict | None) -> tuple[pd.DataFrame, dict]:
    """Kernel rows for one graph (views dropped) and counts: primitives, views by name, unshaped kernels."""
    info = info or {}
    arrays, regions = info.get("arrays", {}), info.get("compiled", {})
    rows, views = [], {}
    for p in dot.prims:
        label, ins, outs = dot.label(p), dot.inputs(p), dot.outputs(p)
        same = [arrays.get(a, {}).get("dtype") for a in ins[:1] + outs[:1]]
        if label in NOT_KERNELS or (label == "AsType" and len(same) == 2 and None not in same and same[0] == same[1]):
            key = label if label in NOT_KERNELS else "AsType (same dtype)"
            views[key] = views.get(key, 0) + 1
            continue
        if label in EW or label in COMPARE:
            ins = [broadcast_source(dot, a) for a in ins]
        op, dims, types, concrete = kineto_call(label, ins, outs, arrays)
        compiled = label.startswith("Compiled")
        fused = [x.lower() for x in regions.get(p) or fused_parts(label) if x not in VIEWS] if compiled \
            else [label.lower()]
        rows.append(dict(name=label, op=op, op_dims=dims, op_types=types, op_concrete=concrete, fused_ops=fused,
                         device=0 if info.get("device_type") == "gpu" else -1, **ROW_CONSTANTS))
    cols = {c: [r[c] for r in rows] for c in (rows[0] if rows else {})}
    df = pd.DataFrame(fill_missing(cols, len(rows)), columns=KERNEL_COLUMNS)
    unshaped = int(df["op_dims"].isna().sum()) if len(df) else 0
    return df, {"primitives": len(dot.prims), "views": views, "kernels_without_shapes": unshaped}


def _read_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = orjson.loads(read_input(path, "JSON file", gunzip=False))
    except orjson.JSONDecodeError as exc:
        raise TracekitError(f"{path}: unreadable JSON ({exc})") from None
    return mlx_sidecar(data, path) if isinstance(data, dict) else None


def load_dot(path: Path, meta: dict | None = None) -> Trace:
    """One graph (NNN.dot, with NNN.json beside it when the capture wrote one) as a Trace."""
    dot, found = read_dot(path), _read_json(path.with_suffix(".json"))
    info = found or {}
    df, counts = graph_table(dot, info)
    warnings = ["MLX graph: export_to_dot records structure only, no timings (dur_us and gap are empty)"]
    if found is None:
        warnings.append("no shape file beside this dot (NNN.json from tracekit capture): "
                        "kernel counts only, no FLOPs, bytes or floors")
    elif counts["kernels_without_shapes"]:
        warnings.append(f"shapes unknown for {counts['kernels_without_shapes']} of {len(df)} kernels: "
                        "those rows have no floor")
    warnings += [w for w in info.get("warnings", []) + (meta or {}).get("warnings", []) if w not in warnings]
    name = info.get("device_name")
    return Trace(path=str(path), kernels=df, steps=[], step_rule="whole graph", device_name=name,
                 device_properties=[{"name": name, "type": info.get("device_type")}] if name else [],
                 metadata={"framework": "mlx", "graph": path.stem, "mlx": counts, "evaluated_by": info.get("call"),
                           "shapes": info.get("coverage"), "device_type": info.get("device_type") if found else None},
                 warnings=warnings)


def load_mlx(path: str | Path) -> list[Trace]:
    """A .dot file, or a capture bundle folder with graphs/NNN.dot, as one Trace per graph."""
    p = Path(path)
    if not p.exists():
        raise TracekitError(f"{p}: no such file or folder")
    if not p.is_dir():                  # a file, or something that is not one (refused by the reader)
        return [load_dot(p)]
    meta = _read_json(p / "meta.json")
    folder = p / "graphs" if (p / "graphs").is_dir() else p
    dots = sorted(folder.glob("*.dot"))
    if not dots:
        raise TracekitError(f"{p}: MLX bundle holds no graphs (graphs/*.dot); did the script call mx.eval?")
    return [load_dot(d, meta) for d in dots]
