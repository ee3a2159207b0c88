"""Which tensors each kernel reads and writes, the per-step dataflow and the one-kernel floor.

With an execution trace joined (``et_io`` on every row of a step, ``fusion.exact``), tensors are
storage ranges and the step's numbers are exact. Without one, Kineto records each op's *input*
shapes and dtypes, not its outputs and not tensor identities: ``node_io`` takes an op call's reads
and writes (outputs with shapes and dtypes) from the op's record in the op table (``tracekit.ops``);
Inductor kernels get their roles (in_ptr / out_ptr / in_out_ptr) from the kernel source kept with the
trace. Ops without a record, and Inductor kernels without a source, have unknown outputs (None): no
guessing; tensors are then linked by size and launch order, and the floor is a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tracekit.fusion.exact import as_tensor, step_dataflow
from tracekit.fusion.nodes import Node, build_nodes, content_key, group_nodes, step_rows
from tracekit.model.rows import Rows
from tracekit.ops import IO, Tensor


# ---- the tensor values of one step ---------------------------------------------------------------

@dataclass
class Value:
    """One tensor version: written by ``producer`` (None: from outside the step), read by ``readers``."""

    tensor: Tensor
    producer: int | None
    readers: list[int]
    ambiguous: bool = False          # an outside tensor has the same size and dtype
    final: bool = False              # exact: live at the end of the step and not read later, or state
    state: bool = False              # exact: written into storage that held data from before the step

    @property
    def intermediate(self) -> bool:
        return self.producer is not None and bool(self.readers)


def _read_sigs(io: IO, memo: dict) -> tuple:
    """(element count, dtype) of each tensor ``io`` reads and writes, and the set of read ones that repeat,
    once per IO object (rows share them); a broadcast view, or a gather capped at its source, counts the
    elements stored (the tensor an earlier call wrote); a partial read (a strided conv's input) the whole
    tensor, which its producer wrote."""
    got = memo.get(id(io))
    if got is None:
        sigs = [(t.numel if t.stored is None or t.partial else t.stored, t.dtype) for t in io.reads]
        counts: dict = {}
        for sig in sigs:
            counts[sig] = counts.get(sig, 0) + 1
        got = memo[id(io)] = (io, sigs, [(t.numel, t.dtype) for t in io.writes or ()],
                              {sig for sig, n in counts.items() if n > 1})
    return got


def link(nodes: list[Node], memo: dict | None = None) -> tuple[list[Value], list[Value]]:
    """Tensor versions by size and launch order: a read takes the latest earlier write of the same
    element count and dtype in the step (a view between kernels keeps both). Only one input of a
    kernel binds to that write; a read with no write to take is an outside tensor of that op call:
    nothing in a Kineto trace proves that two op calls read one tensor, so same-sized outside reads
    of different calls (the equal-shaped weights of two layers) stay two tensors. Returns those values
    and, from the same pass, the outside reads merged: every same-sized outside read taken as one
    tensor (the fewest bytes the step could read: what a provable bound needs; the written values are
    the same either way). ``memo``: each op call's tensor sizes, shared by the steps of one table."""
    values: list[Value] = []
    last: dict = {}
    outside: dict = {}
    merged: dict = {}
    outside_sigs: set = set()
    memo = {} if memo is None else memo
    for node in nodes:
        if node.io is None:
            continue
        _, sigs, write_sigs, repeated = _read_sigs(node.io, memo)
        bound: set = set()
        seen: dict = {}
        index = node.index
        for t, sig in zip(node.io.reads, sigs):
            v = last.get(sig)
            if v is not None and sig not in bound:
                bound.add(sig)
                values[v].readers.append(index)
                values[v].ambiguous |= sig in outside_sigs or sig in repeated
                continue
            nth = seen.get(sig, 0)
            seen[sig] = nth + 1
            k = (index, sig, nth)
            if k not in outside:
                outside[k] = len(values)
                outside_sigs.add(sig)
                values.append(Value(t, None, []))
            readers = values[outside[k]].readers
            if not readers or readers[-1] != index:      # indices rise: the last reader is the only test
                readers.append(index)
            m = merged.get((sig, nth))
            if m is None:
                merged[(sig, nth)] = m = Value(t, None, [])
            if not m.readers or m.readers[-1] != index:
                m.readers.append(index)
        for t, sig in zip(node.io.writes or (), write_sigs):
            last[sig] = len(values)
            values.append(Value(t, index, []))
    return values, list(merged.values())


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

def exact_values(nodes: list[Node]) -> list[Value]:
    """Tensor values of a step whose op calls all joined the execution trace: external storage ranges
    (read from outside, once each) and written versions (``final``: live at the end and not read later,
    or state written into storage from before the step)."""
    versions, external = step_dataflow([n.exact for n in nodes])
    values = [Value(as_tensor(replace(e.access, nbytes=e.nbytes)), None, list(e.readers)) for e in external]
    for v in versions:
        values.append(Value(as_tensor(v.access), v.producer, list(v.readers),
                            final=v.live and (v.state or not v.readers), state=v.state))
    return values


def _outside_bytes(nodes: list[Node], outside: list[Value], exact: bool) -> float:
    """Bytes read from outside the step. By size (not exact), an op call's outside reads are its own
    tensors, and a call reads no more from outside than its cost model says it reads at all (an Inductor
    kernel handed a whole embedding table reads the rows it gathers: its bytes say so, its pointer does
    not); a call without a cost adds nothing, as its FLOPs add nothing (the estimate is over the costed
    calls)."""
    if exact:
        return float(sum(v.tensor.nbytes for v in outside))
    per: dict[int, float] = {}
    for v in outside:
        reader = next((r for r in v.readers if nodes[r].bytes == nodes[r].bytes), v.readers[0])
        per[reader] = per.get(reader, 0.0) + v.tensor.nbytes
    total = 0.0
    for i, b in per.items():
        n = nodes[i]
        writes = sum(t.nbytes for t in n.io.writes or ()) if n.io is not None else 0
        total += min(b, max(0.0, n.bytes - writes)) if n.bytes == n.bytes else 0.0
    return total


def step_fusion(trace, step: int, sk=None, rows: list | None = None, memo: dict | None = None):
    """The step's op-call chain, tensor values, and the one-kernel floor next to the per-kernel floors.
    ``sk``: the step's rows when the caller already has them; ``rows``: the step's entry of
    ``step_rows`` (every step from one pass over the table). ``kind`` "exact" when every op call of
    the step joined the execution trace, else "estimate" (size+dtype links, costed kernels only, a
    tensor re-read by several calls counted per call); ``bound_us`` is always a provable lower bound
    (the estimate with every same-sized outside read taken as one tensor). ``memo``: shared by the
    steps of one table (each op call's tensor sizes worked out once)."""
    if rows is not None:
        nodes, n_rows = group_nodes(rows, trace.spec, "io" in trace.kernels), len(rows)
    else:
        if sk is None:
            df = trace.kernels
            sk = df[df["step"] == step]
        nodes, n_rows = build_nodes(sk.sort_values("start_us", kind="stable"), trace.spec), len(sk)
    exact = bool(nodes) and all(n.exact is not None for n in nodes)
    values, merged_outside = (exact_values(nodes), []) if exact else link(nodes, memo)
    unknown = [] if exact else [n for n in nodes if n.io is None or n.io.writes is None]
    inter = [v for v in values if v.intermediate]
    outside = [v for v in values if v.producer is None]
    if exact:
        finals = [v for v in values if v.final]
        dead = [v for v in values if v.producer is not None and not v.readers and not v.final]
        headroom = float(sum(v.tensor.nbytes * (len(v.readers) + (0 if v.state else 1)) for v in inter)
                         + sum(v.tensor.nbytes for v in dead))
    else:
        finals = [v for v in values if v.producer is not None and not v.readers]
        headroom = float(sum(v.tensor.nbytes * (1 + len(v.readers)) for v in inter))
    ext, final = _outside_bytes(nodes, outside, exact), sum(v.tensor.nbytes for v in finals)
    fused_bytes = float(ext + final)
    flops = float(sum(n.flops for n in nodes if n.flops == n.flops))
    compute = float(sum(n.compute_us for n in nodes))
    uncosted = [n for n in nodes if not n.floor_us == n.floor_us]
    uncosted_kernels = sum(len(n.rows) for n in uncosted)
    bw = trace.spec.bandwidth_gbs if trace.spec is not None else None
    kind = "exact" if exact else "estimate"
    if exact:
        rule = (f"exact: tensors by storage from the execution trace ({len(nodes)} op calls joined by "
                "record-function id)")
    elif len(nodes) == 1 and not uncosted:
        rule = "single kernel: nothing to fuse"
        headroom, fused_bytes = 0.0, nodes[0].bytes
    else:
        ambiguous = sum(1 for v in inter if v.ambiguous)
        rule = ("size+dtype match in launch order (a read takes the latest earlier write of its element count "
                "and dtype)" + (f"; {ambiguous} of {len(inter)} intermediates ambiguous (an outside tensor has the "
                                "same size and dtype)" if ambiguous else "; unambiguous"))
        if unknown:
            rule += (f"; incomplete: {len(unknown)} of {len(nodes)} kernels write tensors the trace does not tell "
                     "(where read later, those count as outside tensors)")
    if uncosted:
        rule += f"; {uncosted_kernels} of {n_rows} kernels without a floor (their FLOPs and bytes left out)"
    if not nodes:
        rule = "no kernels in this step: nothing to run"
    if not bw:
        rule += "; no one-kernel floor: no device bandwidth"
    fused_floor = max(compute, fused_bytes / (bw * 1e3)) if bw else float("nan")
    bound, least = fused_floor, fused_bytes
    if not exact and nodes:
        least = _outside_bytes(nodes, merged_outside, False) + final
        bound = max(compute, least / (bw * 1e3)) if bw else float("nan")
    if not exact and len(nodes) == 1 and not uncosted:
        fused_floor = bound = nodes[0].floor_us
        least = fused_bytes
    sure = headroom if exact else float(sum(v.tensor.nbytes * (1 + len(v.readers)) for v in inter if not v.ambiguous))
    return dict(step=step, nodes=nodes, values=values, rule=rule, kind=kind, bound_us=bound, bound_bytes=float(least),
                headroom_bytes=headroom, headroom_unambiguous_bytes=sure,
                fused_bytes=fused_bytes, fused_flops=flops, fused_compute_us=compute, fused_floor_us=fused_floor,
                external_input_bytes=float(ext), external_inputs=len(outside),
                final_output_bytes=float(final), final_outputs=len(finals),
                intermediate_bytes=float(sum(v.tensor.nbytes for v in inter)),
                split_floor_us=float(sum(n.floor_us for n in nodes if n.floor_us == n.floor_us)),
                split_bytes=float(sum(n.bytes for n in nodes if n.bytes == n.bytes)), unknown_io=len(unknown),
                uncosted_kernels=uncosted_kernels, joined_kernels=sum(len(n.rows) for n in nodes if n.exact))


def _nan_none(x):
    return None if x is None or x != x else float(x)


_UNKNOWN = ["unknown"]          # compared with, never changed: no list made per comparison


def known_fused_ops(lists) -> list[list[str]]:
    """The fused-op lists that say what a kernel did (["unknown"] and missing lists left out)."""
    return [ops for ops in lists if isinstance(ops, list) and ops != _UNKNOWN]


def fused_op_count(lists) -> int:
    """Fused ops of a set of kernels: the one per-step count every report uses."""
    return sum(len(ops) for ops in known_fused_ops(lists))


def _step_figures(f: dict) -> dict:
    """The figures of ``step_fusion``'s answer the summary keeps, in the summary's order."""
    return {"op_calls": len(f["nodes"]), "rest": dict(
        headroom_bytes=_nan_none(f["headroom_bytes"]),
        headroom_unambiguous_bytes=_nan_none(f["headroom_unambiguous_bytes"]),
        intermediates=sum(1 for v in f["values"] if v.intermediate),
        fused_bytes=_nan_none(f["fused_bytes"]), fused_flops=f["fused_flops"],
        fused_floor_us=_nan_none(f["fused_floor_us"]), fused_floor_kind=f["kind"],
        fused_floor_bound_us=_nan_none(f["bound_us"]), fused_bound_bytes=f["bound_bytes"],
        external_input_bytes=f["external_input_bytes"], external_inputs=f["external_inputs"],
        final_output_bytes=f["final_output_bytes"], final_outputs=f["final_outputs"],
        intermediate_bytes=f["intermediate_bytes"], fused_compute_us=f["fused_compute_us"],
        kernels_uncosted=f["uncosted_kernels"], op_calls_unknown_io=f["unknown_io"],
        kernels_joined_et=f["joined_kernels"], split_floor_us=f["split_floor_us"],
        split_bytes=f["split_bytes"], rule=f["rule"])}


def fusion_summary(trace) -> dict:
    """Summary keys for the JSON contract: per step kernels, fused ops, fusion ratio, headroom."""
    df = trace.kernels
    indices = trace.steps.indices() or [0]
    rows = step_rows(df)
    memo: dict = {}
    by_step: dict = {}                        # step -> (categories, fused_ops lists) in table order
    for step, cat, ops in zip(df["step"].tolist(), df["category"].tolist(), df["fused_ops"].tolist()):
        got = by_step.get(step)
        if got is None:
            got = by_step[step] = ([], [])
        got[0].append(cat)
        got[1].append(ops)
    kept, empty = {}, None                    # one step without rows stands for all of them
    same: dict = {}                           # content_key -> the step's figures
    for i, k in enumerate(indices):
        categories, fused = by_step.get(k, ([], []))
        if not fused and not rows.get(k):
            empty = empty or _step_figures(step_fusion(trace, k, rows=[], memo=memo))
            continue
        known = known_fused_ops(fused)
        cats = {}
        for cat, ops in zip(categories, fused):
            c = cats.get(str(cat))
            if c is None:
                c = cats[str(cat)] = {"kernels": 0, "fused_ops": 0}
            c["kernels"] += 1
            c["fused_ops"] += len(ops) if isinstance(ops, list) and ops != _UNKNOWN else 0
        if rows.get(k):
            key = content_key(rows[k])
            f = same.get(key)
            if f is None:                     # a step like an earlier one (a training loop) is that step's sums
                f = same[key] = _step_figures(step_fusion(trace, k, rows=rows[k], memo=memo))
        else:
            f = empty = empty or _step_figures(step_fusion(trace, k, rows=[], memo=memo))
        kept[i] = _fusion_row(k, f, fused, known, cats)
    template = _fusion_row(None, empty, [], [], {}) if empty is not None else {}
    per = Rows(len(indices), template, {"step": indices}, kept)     # empty steps made when read (model.rows)
    return {"fusion_headroom_bytes": per.column("headroom_bytes"),
            "fused_floor_us_per_step": per.column("fused_floor_us"),
            "fused_floor_kind_per_step": per.column("fused_floor_kind"),
            "fusion_rule": per.column("rule"),
            "fusion_per_step": per}


def _fusion_row(k, f: dict, fused: list, known: list, cats: dict) -> dict:
    """One step's ``fusion_per_step`` record (``f``: ``_step_figures``)."""
    return dict(step=k, kernels=len(fused), op_calls=f["op_calls"],
                fused_ops=fused_op_count(known), kernels_unknown_ops=len(fused) - len(known),
                aten_ops_per_kernel=(sum(len(o) for o in known) / len(known)) if known else None,
                by_category=cats, **f["rest"])
