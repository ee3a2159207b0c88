"""Cost every row and set it against the device: floor = max(FLOPs/peak, bytes/bandwidth), gap = dur/floor."""

from __future__ import annotations

import math
import re
from collections import namedtuple
from typing import Callable

import numpy as np
import pandas as pd

from tracekit.cost.devices import LINK_UNITS
from tracekit.cost.l2 import ASSUMED_NOTE, BELOW_NOTE, assume_hot, l2_floors
from tracekit.cost.rates import rate_for
from tracekit.model.keys import ValueKeys, first_rows, ids
from tracekit.ops import Cost, OpCall, broadcast, cost_of, lookup
from tracekit.ops.collectives import BUS_FACTOR, bus_bytes
from tracekit.ops.tensors import FLOAT_DTYPES, result_dtype
from tracekit.ops.inductor import inductor_cost, is_inductor_kernel
from tracekit.ops.serving import engine_keys

MAX_COST = float(1 << 53)     # FLOPs or bytes of one row, and a collective's message: beyond it, no cost
OUT_OF_RANGE = "cost out of range (FLOPs or bytes not finite, negative or over 2^53): no floor"
RolesFn = Callable[[str, object], 'list[str] | None']   # (kernel op, kernel_file) -> pointer names
SourceFn = Callable[[str, object], 'str | None']         # (kernel op, kernel_file) -> its kept source

_DEVICE_TO_DEVICE = re.compile(r"dtod|device -> device|d2d|device_to_device", re.IGNORECASE)
_PEER = re.compile(r"ptop|peer|p2p", re.IGNORECASE)
_COST_INPUTS = ("name", "kind", "category", "op", "op_dims", "op_types", "op_strides", "op_concrete",
                "kernel_file", "fused_ops", "event_bytes", "collective")

_Row = namedtuple("_Row", _COST_INPUTS)


def row_cost(row, roles_of: RolesFn | None, engine=None, source_of: SourceFn | None = None) -> Cost | str:
    """The cost of one row (a namedtuple of ``_COST_INPUTS``), or why it has none. ``engine``: the row's
    step as its engine annotation says (``load.engine_steps.EngineStep``): paged attention reads the
    keys it names (``keys_for``) instead of the labelled bound."""
    if row.kind in ("memcpy", "memset"):
        return _transfer_cost(row)
    if row.category == "communication" and row.kind == "kernel":
        return collective_cost(row.collective)
    op, dims = row.op, row.op_dims
    if not isinstance(op, str):
        return "no launching op found (graph replay or op-less launch)"
    if not isinstance(dims, list):
        return f"{op}: input shapes not recorded (profile with record_shapes=True)"
    call = OpCall(op, dims, row.op_types or [], row.op_strides, row.op_concrete, kernel=row.name)
    call.kv_keys = engine_keys(call, engine)
    if is_inductor_kernel(op) or is_inductor_kernel(row.name):
        roles = roles_of(op, row.kernel_file) if roles_of else None
        source = source_of(op, row.kernel_file) if source_of else None
        return inductor_cost(call, list(row.fused_ops or []), roles, source)
    cost = cost_of(call)
    if isinstance(cost, str) and lookup(op) is None and row.category in ("elementwise", "reduction"):
        return generic_cost(call, row.category) or cost
    return cost


def _is_paged(op) -> bool:
    family = lookup(op)
    return family is not None and family.name == "paged_attention"


def generic_cost(call: OpCall, category: str) -> Cost | None:
    """An elementwise or reduction kernel whose op has no record: its tensor inputs read once and, for
    elementwise work, the broadcast result written once (a reduction's result size is unknown, so
    its bytes are the inputs alone: a lower bound). None when the op records no tensors."""
    inputs = call.tensors()
    if not inputs:
        return None
    base = result_dtype(inputs)
    nbytes = float(sum(t.nbytes for t in inputs))
    if category == "elementwise":
        try:
            numel = math.prod(broadcast(*(t.shape for t in inputs)))
        except ValueError:
            return None
        nbytes += numel * base.itemsize
        note = f"generic elementwise (no record for {call.name}): inputs once + broadcast result once"
    else:
        numel = max(t.numel for t in inputs)
        note = f"generic reduction (no record for {call.name}): inputs once, result not counted (a lower bound)"
    dtype = base.dtype if base.dtype in FLOAT_DTYPES else "fp32"
    return Cost(float(numel), nbytes, dtype, "vector", note)


def collective_cost(c: dict | None) -> Cost | str:
    """A collective kernel: its bus bytes (ops.collectives, NCCL-tests' convention) over the link, no FLOPs."""
    if not isinstance(c, dict):
        return "collective not identified (no Collective name, kernel name or c10d op names it)"
    size = c.get("bytes")
    if size is not None and not (isinstance(size, (int, float)) and 0 <= size <= MAX_COST):
        return f"{c.get('name')}: message size out of range (not a number of bytes from 0 to 2^53)"
    nbytes = bus_bytes(c.get("name"), size, c.get("group_size"))
    if nbytes is None:
        why = "moves no data" if c.get("name") not in BUS_FACTOR else "message or group size not recorded"
        return f"{c.get('name')}: {why}"
    n = c.get("group_size")
    ranks = f", {n} ranks" if n else ""
    rule = "the switch reduces: S each way" if c["name"] == "all_reduce_multimem" else "NCCL-tests"
    return Cost(0.0, nbytes, c.get("dtype"), "link", f"{c['name']} bus bytes ({rule}): "
                f"{nbytes / size if size else 0:.4g} x {size:.0f} B{ranks}")


def _transfer_cost(row) -> Cost | str:
    """A copy or memset: the bytes the trace gives it (a device copy reads and writes them)."""
    nbytes = row.event_bytes
    if row.kind == "memset":
        if nbytes != nbytes:
            return "memset without a byte count"
        return Cost(0.0, nbytes, None, "vector", "memset: bytes written")
    if nbytes != nbytes:
        return "copy without a byte count"
    if _PEER.search(row.name):              # "Memcpy PtoP (Device -> Device)": between two GPUs
        return Cost(0.0, nbytes, None, "link", "peer copy: bytes over the fastest link (spec [link])")
    if _DEVICE_TO_DEVICE.search(row.name):
        return Cost(0.0, 2.0 * nbytes, None, "vector", "device copy: bytes read + written")
    return Cost(0.0, nbytes, None, "pcie", "host copy: bytes over PCIe, one direction (spec [link] pcie_gbs)")


def cost_rows(df: pd.DataFrame, roles_of: RolesFn | None = None, engine_steps: dict | None = None,
              source_of: SourceFn | None = None) -> pd.DataFrame:
    """Fill dtype, compute_unit, flops, bytes and cost_note. Kernels sharing one op call: the op's cost
    goes to the longest of them, the others point to it. ``roles_of`` gives an Inductor kernel's
    pointer names from its kept source (fusion.KernelSources.roles), so in/out pointers count twice.
    ``engine_steps``: step index → its engine annotation (``EngineStep``), whose KV key counts the
    step's paged attention rows read. ``source_of`` gives its kept source (fusion.KernelSources.source):
    the M, N, K a GEMM template states and how far each pointer's loads reach."""
    if df.empty:
        return df
    memo: dict = {}
    keys = ValueKeys()
    engine_steps = engine_steps or {}
    cols = [df[c].tolist() for c in _COST_INPUTS]
    steps = df["step"].tolist() if engine_steps else None
    c = dict(zip(_COST_INPUTS, cols))
    try:       # rows alike in every key field (the same shape objects) take their first row's answer
        firsts = first_rows(c["name"], c["kind"], c["op"], ids(c["op_dims"]), ids(c["op_types"]),
                            ids(c["op_strides"]), ids(c["op_concrete"]), c["kernel_file"],
                            [None if e != e else e for e in c["event_bytes"]], ids(c["collective"]),
                            *([steps] if engine_steps else []))
    except TypeError:                         # a value that cannot be hashed: every row its own
        firsts = list(range(len(df)))
    figures = {}
    for j in dict.fromkeys(firsts):           # the rows that start a key, in table order
        row = _Row._make([col[j] for col in cols])
        event = row.event_bytes if row.event_bytes == row.event_bytes else None   # NaN: no memo key
        engine = engine_steps.get(steps[j]) if engine_steps and _is_paged(row.op) else None
        key = (row.name, row.kind, row.op, keys(row.op_dims), keys(row.op_types), keys(row.op_strides),
               keys(row.op_concrete), row.kernel_file, event, repr(row.collective), engine)
        cost = memo.get(key)
        if cost is None:
            cost = memo[key] = row_cost(row, roles_of, engine, source_of)
        figures[j] = (cost.dtype, cost.unit, cost.flops, cost.bytes, cost.model) if isinstance(cost, Cost) \
            else (None, None, np.nan, np.nan, cost)
    dtype, unit, flops, nbytes, note = map(list, zip(*[figures[j] for j in firsts]))
    df["dtype"], df["compute_unit"], df["cost_note"] = dtype, unit, note
    df["flops"] = np.array(flops, dtype=float)
    df["bytes"] = np.array(nbytes, dtype=float)
    _drop_out_of_range(df)
    no_op = df["op"].isna() & (df["kind"] == "kernel")
    df.loc[no_op & df["graph"], "cost_note"] = "graph replay: no capture-time op (tracekit capture maps it)"
    df.loc[no_op & ~df["graph"] & (df["launch"] == ""), "cost_note"] = "launch event not in the trace: op unknown"
    _share_op_cost(df)
    return df


def _drop_out_of_range(df: pd.DataFrame) -> None:
    """A cost a gate could not trust (not finite, negative, or past 2^53) is no cost: the row keeps no
    FLOPs or bytes and says why (analyze counts these rows in one warning)."""
    flops, nbytes = df["flops"].to_numpy(), df["bytes"].to_numpy()
    costed = ~(np.isnan(flops) & np.isnan(nbytes))
    ok = np.isfinite(flops) & np.isfinite(nbytes) & (flops >= 0) & (nbytes >= 0) & (flops <= MAX_COST) \
        & (nbytes <= MAX_COST)
    bad = costed & ~ok
    if bad.any():
        df.loc[bad, ["flops", "bytes"]] = np.nan
        df.loc[bad, "cost_note"] = OUT_OF_RANGE


def _share_op_cost(df: pd.DataFrame) -> None:
    """One op call, several kernels: keep the cost on the longest kernel only."""
    has_op = (df["op_id"] != -1) & df["flops"].notna()
    if not has_op.any():
        return
    counts = df.loc[has_op, "op_id"].map(df.loc[has_op, "op_id"].value_counts())
    multi = counts[counts > 1].index
    if len(multi) == 0:
        return
    sub = df.loc[multi]
    longest = sub.groupby("op_id")["dur_us"].idxmax()
    main_name = df.loc[longest.values, "name"].set_axis(longest.index)
    others = multi.difference(longest.values)
    df.loc[others, ["flops", "bytes"]] = np.nan
    main_of = dict(zip(main_name.index.tolist(), main_name.tolist()))       # a dict: no Series lookup a row
    df.loc[others, "cost_note"] = [f"op cost counted on sibling kernel {main_of[i][:60]}"
                                   for i in df.loc[others, "op_id"].tolist()]


def roofline_terms(df: pd.DataFrame, spec) -> tuple[np.ndarray, np.ndarray]:
    """Each row's compute term (FLOPs / the rate cost.rates gives its dtype and unit; 0 without FLOPs;
    NaN where the FLOPs have no rate that bounds them) and memory term (bytes / bandwidth; NaN where
    bytes are unknown), in µs."""
    peaks = {}
    peak = []
    for d, u in zip(df["dtype"].tolist(), df["compute_unit"].tolist()):
        key = (d, u)
        if key not in peaks:
            rate = rate_for(spec, d, u)[1] if isinstance(d, str) else None
            peaks[key] = rate if rate else np.nan
        peak.append(peaks[key])
    peak_tflops = np.array(peak, dtype=float)
    flops = df["flops"].to_numpy(dtype=float)
    nbytes = df["bytes"].to_numpy(dtype=float)
    units = df["compute_unit"].to_numpy()
    with np.errstate(all="ignore"):          # spec numbers are bounded (cost.devices): nothing overflows
        # FLOPs with no rate: unknown (NaN), never free; bytes over a link have no compute roof
        compute_us = np.where(flops > 0, flops / (peak_tflops * 1e6), 0.0)
        compute_us = np.where(np.isin(units, LINK_UNITS), 0.0, compute_us)
        bw = spec.bandwidth_gbs or np.nan
        memory_us = nbytes / (bw * 1e3)
        for unit in LINK_UNITS:               # collectives and copies cross a link, not memory (spec [link])
            here = units == unit
            if here.any():
                memory_us = np.where(here, nbytes / ((spec.transfer_gbs(unit) or np.nan) * 1e3), memory_us)
    return compute_us, memory_us


def apply_roofline(df: pd.DataFrame, spec, measured_here: bool = True) -> pd.DataFrame:
    """floor_us, bound and gap from the costed rows and a DeviceSpec (None: no floors). ``measured_here``:
    the times were recorded on this spec's device; a view on another device (cost.multi) does not read
    a row below its floor as served from L2 (it ran on other hardware)."""
    if df.empty:
        return df
    if spec is None:
        df["floor_us"], df["bound"], df["gap"] = np.nan, None, np.nan
        df["covered"], df["gap_floor_us"], df["l2"], df["l2_floor_us"] = False, np.nan, None, np.nan
        return df
    compute_us, memory_us = roofline_terms(df, spec)
    notes = df["cost_note"]                  # a view on another device: drop the last device's no-floor notes
    # ... and its reasons for rows below their floor (cost.l2): each is appended last, so cut to the end
    marks = ("; no floor: spec ", ASSUMED_NOTE, BELOW_NOTE)
    if any(m in n for n in notes.tolist() if type(n) is str for m in marks):     # (none on a first costing)
        text, cut = notes.astype(str), "|".join(map(re.escape, marks))
        df["cost_note"] = notes.where(~text.str.contains(cut), text.str.replace(f"(?:{cut}).*$", "", regex=True))
    known = ~np.isnan(df["bytes"].to_numpy(dtype=float))
    floor = np.where(known, np.maximum(compute_us, memory_us), np.nan)
    floor = np.where(np.isfinite(floor) & (floor > 0), floor, np.nan)
    df["floor_us"] = floor
    no_rate = known & np.isnan(compute_us)
    if no_rate.any():                        # FLOPs whose dtype the spec has no bounding rate for
        df.loc[no_rate, "cost_note"] = [f"{n}; no floor: spec {spec.id} has no {d} {u} rate (docs/devices.md)"
                                        for n, d, u in df.loc[no_rate, ["cost_note", "dtype", "compute_unit"]]
                                        .itertuples(index=False)]
    units = df["compute_unit"].to_numpy()
    for unit, key in (("link", "a link bandwidth"), ("pcie", "pcie_gbs")):
        lost = (units == unit) & known & np.isnan(floor)
        if lost.any():                       # bytes known, but the spec cannot say how fast they cross
            df.loc[lost, "cost_note"] = df.loc[lost, "cost_note"] + f"; no floor: spec {spec.id} has no [link] {key}"
    bound = np.where(np.isnan(floor), None, np.where(compute_us > memory_us, "compute", "memory"))
    bound = np.where(np.isin(df["compute_unit"].to_numpy(), LINK_UNITS) & ~np.isnan(floor), "link", bound)
    shortest = launch_floor(df, spec, measured_here)
    if shortest:                 # no kernel runs faster than the device lets one start and finish
        bound = np.where(floor < shortest, "launch", bound)
    df["bound"] = bound
    state, hot = l2_floors(df, spec, compute_us, floor)       # inputs a recent kernel left in L2 (cost.l2)
    df["l2"], df["l2_floor_us"] = state, hot
    slots = _op_level_gaps(df, floor, shortest, np.where(np.isnan(hot), floor, hot))
    if measured_here:
        assume_hot(df, spec, compute_us, memory_us, floor, slots)  # beat the DRAM floor: L2 assumed (cost.l2)
    return df


def launch_floor(df: pd.DataFrame, spec, measured_here: bool = True) -> float | None:
    """The shortest a separate kernel runs on the device: the spec's ``[launch] kernel_us``, or the table's
    own shortest kernel where one ran shorter (the spec's figure is one kernel's minimum, not the device's:
    a bf16 fill_ of a few elements ran 0.576 µs on the H200 whose one-element add_ never ran under 0.959).
    Copies and memsets count too: the floor applies to them, so none may beat it (a 0.736 µs DtoD copy of
    a graph replay had read 0.82x against the shortest kernel's 0.896). A spec without ``kernel_us`` uses
    the table's shortest alone, where the times were measured on that spec's device (``measured_here``):
    no activity of the trace beat it, so a gap is never set against a floor of nanoseconds; on another
    device's spec, none (the trace's times say nothing of that device's launches)."""
    if not spec.launch_us and not measured_here:
        return None
    dur = df.loc[df["kind"].isin(("kernel", "memcpy", "memset")), "dur_us"].to_numpy(dtype=float)
    dur = dur[dur > 0]
    if not spec.launch_us:
        return float(dur.min()) if len(dur) else None
    return min(spec.launch_us, float(dur.min())) if len(dur) else spec.launch_us


def carrier_text(df: pd.DataFrame, col: str) -> pd.Series:
    """``col`` as text, a kernel whose cost its op call's carrier holds and that has the carrier's name
    (a chunk of a foreach or fused optimizer op) taking the carrier's value, so that it groups with it;
    other kernels of the call (a split-K reduce, a memset) keep their own."""
    text = df[col].astype(object).where(df[col].notna(), None)
    sibling = df["covered"] & df["floor_us"].isna() & (df["op_id"] != -1) if "covered" in df else None
    if sibling is not None and sibling.any():
        carriers = df[df["floor_us"].notna() & (df["op_id"] != -1)].drop_duplicates("op_id").set_index("op_id")
        chunk = sibling & (df["op_id"].map(carriers["name"]) == df["name"])
        text = text.where(~chunk, df["op_id"].map(carriers[col]))
    return text.fillna("-").astype(str)


def _op_level_gaps(df: pd.DataFrame, floor: np.ndarray, launch_us: float | None = None,
                   gap_base: np.ndarray | None = None) -> np.ndarray:
    """gap = time / max(floor, launch floor), where the time of an op call with several kernels (split-K
    reduce, cuDNN helpers, a foreach op launched in chunks) is all its kernels' time, set against the floor
    the op's carrier kernel holds (its hot-L2 floor where ``gap_base`` gives one), and the launch floor is
    the call's kernels x the shortest kernel (a separate kernel cannot run shorter: docs/method.md);
    ``gap_floor_us`` keeps what gap divides by
    beside the roofline ``floor_us``; ``covered`` marks every row whose time is counted against a floor.
    Returns each row's launch floor (its call's kernels x the shortest kernel; 0 without one)."""
    dur = df["dur_us"].to_numpy(dtype=float)
    has_floor = ~np.isnan(floor)
    op_id = df["op_id"].to_numpy()
    carried = set(op_id[has_floor & (op_id != -1)].tolist())
    covered = has_floor | ((op_id != -1) & df["op_id"].isin(carried).to_numpy())
    op_time = dur.copy()
    kernels = np.ones(len(df))
    sibling_ops = (op_id != -1) & covered
    if sibling_ops.any():
        calls = df.loc[sibling_ops].groupby("op_id")["dur_us"]
        carrier = has_floor & (op_id != -1)
        op_time = np.where(carrier, df["op_id"].map(calls.sum()).to_numpy(dtype=float), dur)
        kernels = np.where(carrier, df["op_id"].map(calls.size()).to_numpy(dtype=float), 1.0)
    base = floor if gap_base is None else gap_base        # a hot row: its hot-L2 floor
    gap_floor = np.maximum(base, kernels * launch_us) if launch_us else base
    df["gap"] = op_time / gap_floor
    df["covered"] = covered
    df["gap_floor_us"] = gap_floor
    return kernels * launch_us if launch_us else np.zeros(len(df))
