"""Hot-L2 floors: why a kernel can beat its DRAM floor.

Inside a profiled loop a kernel often reads a tensor the kernel just before it wrote, still resident
in L2; it then moves those bytes at L2 speed, not DRAM speed, and runs below a floor of
bytes / DRAM bandwidth (GPT-2's fp32 -> bf16 ``copy_``: 0.83-0.96x). A row is **hot** when one of
its inputs (by storage, from the execution trace join: ``et_io``) was written by one of the last
``RECENT_KERNELS`` kernels on the device, that producer wrote no more than the L2 holds, and the row's
own bytes fit in L2 too; its hot floor is max(compute term, bytes / the spec's ``l2_gbs``, the bytes of
the inputs that were NOT recently written / DRAM bandwidth) (the writes land in L2 as well: a write-back
cache; a decode GEMM whose activation is hot still streams its weights from DRAM). Other rows with a known input are **cold**; rows
without an execution-trace join, or on a spec without ``l2_gbs``/``l2_bytes``, are neither (None).

A memory-bound row that no execution trace proves hot but that ran faster than its DRAM floor is
**assumed** hot (``assume_hot``): the measurement shows the DRAM floor is not a bound for it, and the
only faster source is L2; its floor is then what L2 allows (``assumed_floor``), and its ``cost_note``
says why. Rows that do not beat their DRAM floor keep it (docs/method.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

RECENT_KERNELS = 4     # "recently written": by one of the last 4 kernels launched on the device
ASSUMED_NOTE = "; L2 assumed: "   # how an assumed row's cost_note continues (stripped when floors are set again)
BELOW_NOTE = "; below its floor: "   # ... and a row below its floor that L2 cannot explain
_ASSUMABLE_KINDS = ("kernel", "memcpy", "memset")


def l2_floors(df: pd.DataFrame, spec, compute_us: np.ndarray, floor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: "hot" / "cold" / None, and the hot-L2 floor in µs (NaN unless hot)."""
    n = len(df)
    state = np.full(n, None, dtype=object)
    hot_floor = np.full(n, np.nan)
    l2_gbs, l2_bytes = getattr(spec, "l2_gbs", None), getattr(spec, "l2_bytes", None)
    dram_gbs = getattr(spec, "bandwidth_gbs", None)
    if not l2_gbs or not l2_bytes or not dram_gbs or "et_io" not in df or n == 0:
        return state, hot_floor
    io = df["et_io"].to_numpy()
    kinds = df["kind"].to_numpy()
    nbytes = df["bytes"].to_numpy(dtype=float)
    order = np.lexsort((df["start_us"].to_numpy(dtype=float), df["device"].astype(str).to_numpy()))
    written: dict = {}            # (device, storage) -> (kernel position, bytes the producer wrote)
    devices = df["device"].astype(str).to_numpy()
    position = 0
    for i in order:
        if kinds[i] != "kernel":
            continue
        x = io[i]
        if hasattr(x, "rf_id") and hasattr(x, "reads"):      # an execution-trace join (fusion.exact.ExactIO)
            if floor[i] == floor[i] and nbytes[i] == nbytes[i]:
                fresh = [_recent(written.get((devices[i], a.t.storage)), position, l2_bytes) for a in x.reads]
                hot = nbytes[i] <= l2_bytes and any(fresh)
                state[i] = "hot" if hot else "cold"
                if hot:
                    cold = min(nbytes[i], float(sum(a.nbytes for a, f in zip(x.reads, fresh) if not f)))
                    hot_floor[i] = max(compute_us[i], nbytes[i] / (l2_gbs * 1e3), cold / (dram_gbs * 1e3))
            out = float(sum(a.nbytes for a in x.writes))
            for a in x.writes:
                written[(devices[i], a.t.storage)] = (position, out)
        position += 1
    return state, hot_floor


def _recent(write, position: int, l2_bytes: float) -> bool:
    """A (position, bytes) write is recent: by one of the last RECENT_KERNELS kernels, and small enough to
    still be in L2."""
    return write is not None and position - write[0] <= RECENT_KERNELS and write[1] <= l2_bytes


def assumed_floor(nbytes: np.ndarray, compute_us: np.ndarray, spec) -> np.ndarray:
    """The floor a row can be held to when its inputs may be in L2 but nothing says which: max(compute
    term, bytes / ``l2_gbs``, the bytes beyond what the L2 holds / DRAM bandwidth), µs (NaN without
    ``l2_gbs``). Every byte is allowed L2 speed, up to the L2's size: a lower bound whatever was resident."""
    l2_gbs, l2_bytes, dram = getattr(spec, "l2_gbs", None), getattr(spec, "l2_bytes", None), spec.bandwidth_gbs
    if not l2_gbs or not l2_bytes or not dram:
        return np.full(len(nbytes), np.nan)
    beyond = np.maximum(nbytes - l2_bytes, 0.0)
    return np.maximum(compute_us, np.maximum(nbytes / (l2_gbs * 1e3), beyond / (dram * 1e3)))


def assume_hot(df: pd.DataFrame, spec, compute_us: np.ndarray, memory_us: np.ndarray, floor: np.ndarray,
               launch_slots: np.ndarray) -> None:
    """Rows not proven hot whose op call ran faster than their DRAM floor (gap < 1), memory-bound and
    not a link transfer, and no faster than L2 allows (``assumed_floor``; without ``l2_gbs``: the bytes
    beyond the L2's size at DRAM speed): ``l2`` "assumed", ``l2_floor_us`` = ``assumed_floor`` and the gap
    set against max(it, ``launch_slots``: the call's kernels x the launch floor); their ``cost_note`` says
    why. On a spec without ``l2_gbs`` they keep their gap (below 1) and the note names the missing number.
    Any other row below its floor gets a note saying why L2 cannot explain it (too fast even from L2,
    compute-bound, or a spec without ``l2_bytes``)."""
    l2_bytes = getattr(spec, "l2_bytes", None)
    if "gap" not in df or len(df) == 0:
        return
    gap = df["gap"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        below = gap < 1
    if not below.any():
        return
    idx = np.flatnonzero(below)
    nbytes = df["bytes"].to_numpy(dtype=float)[idx]
    op_time = gap[idx] * df["gap_floor_us"].to_numpy(dtype=float)[idx]
    hot = assumed_floor(nbytes, compute_us[idx], spec)
    dram = spec.bandwidth_gbs
    beyond_us = np.maximum(nbytes - (l2_bytes or np.inf), 0.0) / (dram * 1e3) if dram else np.full(len(idx), np.inf)
    with np.errstate(invalid="ignore"):
        fits = np.where(np.isnan(hot), op_time >= beyond_us, op_time >= hot * (1 - 1e-9))
    ok = (np.isfinite(floor[idx]) & (memory_us[idx] >= compute_us[idx]) & fits & bool(l2_bytes)
          & np.isin(df["kind"].to_numpy()[idx], _ASSUMABLE_KINDS)
          & ~np.isin(df["compute_unit"].to_numpy()[idx], ("link", "pcie"))
          & (df["l2"].astype(object).to_numpy()[idx] != "hot"))
    memory_bound = memory_us[idx] >= compute_us[idx]
    device = np.isin(df["kind"].to_numpy()[idx], _ASSUMABLE_KINDS)
    notes = []
    for b, g, h, good, mem, dev in zip(nbytes, gap[idx], hot, ok, memory_bound, device):
        if not good:
            notes.append(f"{BELOW_NOTE}ran {g:.2f}x it, " + (
                f"a CPU op: less work than the model counts (a conversion that returned its input), caches "
                f"faster than spec {spec.id}'s memory, or another machine's spec (tracekit calibrate)" if not dev else
                f"and spec {spec.id} has no l2_bytes to tell whether L2 served it" if mem and not l2_bytes else
                "too fast for its bytes even from L2: the model counts more than the kernel moved" if mem else
                "below its compute term: the model counts more FLOPs than the kernel did, or the spec's "
                "peak is below what this device reaches"))
            continue
        fit = (f"its {_mb(b)} fit the {_mb(l2_bytes)} L2" if b <= l2_bytes else
               f"{_mb(l2_bytes)} of its {_mb(b)} fit the L2")
        notes.append(f"{ASSUMED_NOTE}ran {g:.2f}x its DRAM floor and {fit}, so it is held to bytes / l2_gbs "
                     f"({h:.3g} µs); no execution trace shows its inputs written just before" if h == h else
                     f"{ASSUMED_NOTE}ran {g:.2f}x its DRAM floor and {fit}; spec {spec.id} has no l2_gbs to "
                     "floor it (tracekit calibrate measures one)")
    pos = df.index[idx]
    df.loc[pos, "cost_note"] = [f"{n}{w}" for n, w in zip(df.loc[pos, "cost_note"].astype(str), notes)]
    pos, hot, op_time, slots = pos[ok], hot[ok], op_time[ok], launch_slots[idx][ok]
    if len(pos) == 0:
        return
    df.loc[pos, "l2"] = "assumed"
    df.loc[pos, "l2_floor_us"] = hot
    base = np.where(np.isnan(hot), df.loc[pos, "gap_floor_us"].to_numpy(dtype=float), np.maximum(hot, slots))
    df.loc[pos, "gap_floor_us"] = base
    df.loc[pos, "gap"] = op_time / base


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.1f} MB"
