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
"""

from __future__ import annotations

import numpy as np
import pandas as pd

RECENT_KERNELS = 4     # "recently written": by one of the last 4 kernels launched on the device


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
