"""Cost every row and set it against the device: floor = max(FLOPs/peak, bytes/bandwidth), gap = dur/floor."""

from __future__ import annotations

import re
from typing import Callable

import numpy as np
import pandas as pd

from tracekit.cost.registry import Cost, OpCall, cost_of
from tracekit.cost.triton import INDUCTOR_KERNEL, triton_cost

RolesFn = Callable[[str, object], 'list[str] | None']   # (kernel op, kernel_file) -> pointer names

_DEVICE_TO_DEVICE = re.compile(r"dtod|device -> device|d2d", re.IGNORECASE)


def _row_cost(name: str, kind: str, op, dims, types, strides, concrete, kernel_file, fused,
              roles_of: RolesFn | None, event_bytes: float) -> Cost | str:
    if kind == "memcpy":
        if not _DEVICE_TO_DEVICE.search(name):
            return "host/peer copy: link bandwidth is not in the device spec"
        if event_bytes != event_bytes:
            return "copy without a byte count"
        return Cost(0.0, 2.0 * event_bytes, None, "vector", "device copy: bytes read + written")
    if kind == "memset":
        if event_bytes != event_bytes:
            return "memset without a byte count"
        return Cost(0.0, event_bytes, None, "vector", "memset: bytes written")
    if not isinstance(op, str):
        return "no launching op found (graph replay or op-less launch)"
    if not isinstance(dims, list):
        return f"{op}: input shapes not recorded (profile with record_shapes=True)"
    call = OpCall(op, dims, types or [], strides, concrete, kernel=name)
    if INDUCTOR_KERNEL.match(op) or INDUCTOR_KERNEL.match(name):
        roles = roles_of(op, kernel_file) if roles_of else None
        return triton_cost(call, list(fused or []), roles)
    return cost_of(call)


def cost_rows(df: pd.DataFrame, roles_of: RolesFn | None = None) -> pd.DataFrame:
    """Fill dtype, flops, bytes and cost_note. Kernels sharing one op call: the op's cost goes to the
    longest of them, the others point to it. ``roles_of`` gives an Inductor kernel's pointer names
    from its kept source (fusion.KernelSources.roles), so in/out pointers count twice."""
    if df.empty:
        return df
    memo: dict = {}
    dtype, flops, nbytes, note, unit = [], [], [], [], []
    columns = ("name", "kind", "op", "op_dims", "op_types", "op_strides", "op_concrete", "kernel_file",
               "fused_ops", "bytes")
    for row in zip(*(df[c].tolist() for c in columns)):
        event_bytes = row[9] if row[9] == row[9] else None          # NaN never equals itself: no memo key
        key = (row[0], row[1], row[2], repr(row[3]), repr(row[4]), repr(row[6]), row[7], event_bytes)
        cost = memo.get(key)
        if cost is None:
            cost = memo[key] = _row_cost(*row[:9], roles_of, row[9])
        if isinstance(cost, Cost):
            dtype.append(cost.dtype)
            flops.append(cost.flops)
            nbytes.append(cost.bytes)
            note.append(cost.model)
            unit.append(cost.unit)
        else:
            dtype.append(None)
            flops.append(np.nan)
            nbytes.append(np.nan)
            note.append(cost)
            unit.append(None)
    df["dtype"], df["flops"], df["bytes"], df["cost_note"] = dtype, flops, nbytes, note
    no_op = df["op"].isna() & (df["kind"] == "kernel")
    df.loc[no_op & df["graph"], "cost_note"] = "graph replay: no capture-time op (tracekit capture maps it)"
    df.loc[no_op & ~df["graph"] & (df["launch"] == ""), "cost_note"] = "launch event not in the trace: op unknown"
    df["_unit"] = unit
    _share_op_cost(df)
    return df


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
    df.loc[others, "cost_note"] = [f"op cost counted on sibling kernel {main_name[i][:60]}"
                                   for i in df.loc[others, "op_id"]]


def apply_roofline(df: pd.DataFrame, spec) -> pd.DataFrame:
    """floor_us, bound and gap from the costed rows and a DeviceSpec (None: no floors)."""
    if df.empty:
        return df
    if spec is None:
        df["floor_us"], df["bound"], df["gap"] = np.nan, None, np.nan
        return df.drop(columns="_unit", errors="ignore")
    peaks = {}
    peak = []
    for d, u in zip(df["dtype"], df["_unit"]):
        key = (d, u)
        if key not in peaks:
            rate = None
            if isinstance(d, str):
                rate = spec.matmul_peak(d) if u == "matrix" else spec.vector_peak(d)
            peaks[key] = rate if rate else np.nan
        peak.append(peaks[key])
    peak_tflops = np.array(peak, dtype=float)
    flops = df["flops"].to_numpy(dtype=float)
    nbytes = df["bytes"].to_numpy(dtype=float)
    compute_us = np.where(flops > 0, flops / (peak_tflops * 1e6), 0.0)
    bw = spec.bandwidth_gbs or np.nan
    memory_us = nbytes / (bw * 1e3)
    known = ~np.isnan(nbytes)
    compute_us = np.where(np.isnan(compute_us), 0.0, compute_us)   # no rate for the dtype: memory term only
    floor = np.where(known, np.maximum(compute_us, memory_us), np.nan)
    floor = np.where(floor > 0, floor, np.nan)
    df["floor_us"] = floor
    df["bound"] = np.where(np.isnan(floor), None, np.where(compute_us > memory_us, "compute", "memory"))
    df["gap"] = df["dur_us"].to_numpy(dtype=float) / floor
    return df.drop(columns="_unit")
