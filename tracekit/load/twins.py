"""Kernels launched before the trace began: the op and shapes of an identical kernel in the trace.

When the CPU ran ahead of the GPU before profiling started, the first kernels of the trace have no
launch event and so no op. Two ways to find the call that launched one, both labelled
``op_source = "twin"`` so the borrowing is visible:

- **by sequence**: the op-less kernels of a stream, in time order, are the tail of an iteration the
  program runs again inside the trace. Where that whole sequence of kernels (name, grid, block)
  occurs among the stream's launched kernels, each kernel takes the op of the kernel at its place;
  where it occurs several times, only places on which every occurrence agrees are taken. Kernels
  of one borrowed op call stay one op call (split-K siblings keep sharing their floor).
- **by identity**: any kernel still op-less takes the op of the one kind of identical kernel (same
  name, grid, block and stream) that has one; kernels with several different twins keep none.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TWIN_COLUMNS = ("op", "op_dims", "op_types", "op_strides", "op_concrete", "kernel_file")


def _key(row) -> tuple:
    return (row.name, repr(row.grid), repr(row.block), row.stream)


def _signatures(df: pd.DataFrame, launched: pd.Series) -> dict:
    """{index: (op, dims, types, strides) as text} of every kernel that has an op: what a twin takes."""
    sub = df.loc[launched, list(TWIN_COLUMNS[:4])]
    return {idx: tuple(repr(v) for v in row) for idx, row in zip(sub.index, sub.itertuples(index=False))}


def _by_sequence(df: pd.DataFrame, orphan: pd.Series, launched: pd.Series, sigs: dict) -> dict:
    """{orphan index: donor index} from whole-sequence matches on each stream."""
    found: dict = {}
    codes = pd.Series(pd.factorize(pd.Series(list(zip(df["name"], df["grid"].astype(str),
                                                          df["block"].astype(str))), index=df.index))[0],
                      index=df.index)
    for stream in df.loc[orphan, "stream"].unique():
        mine = df.loc[orphan & (df["stream"] == stream), "start_us"].sort_values().index
        donors = df.loc[launched & (df["stream"] == stream), "start_us"].sort_values().index
        seq, pool, n = codes[mine].to_numpy(), codes[donors].to_numpy(), len(mine)
        if n == 0 or len(pool) < n:
            continue
        starts = np.flatnonzero(pool[: len(pool) - n + 1] == seq[0])
        hits = [int(c) for c in starts if np.array_equal(pool[c:c + n], seq)]
        for i, idx in enumerate(mine):
            choices = {sigs[donors[c + i]] for c in hits}
            if len(choices) == 1:
                found[idx] = donors[hits[0] + i]
    return found


def _by_identity(df: pd.DataFrame, orphan: pd.Series, launched: pd.Series, sigs: dict) -> dict:
    """{orphan index: donor index} for kernels with exactly one kind of identical launched kernel."""
    donors: dict[tuple, tuple | None] = {}
    with_op = df[launched]
    for idx, row in zip(with_op.index, with_op[["name", "grid", "block", "stream"]].itertuples(index=False)):
        key, sig = _key(row), sigs[idx]
        seen = donors.get(key, (idx, sig))
        donors[key] = (idx, sig) if seen is not None and seen[1] == sig else None
    found = {}
    for idx, row in zip(df.index[orphan], df.loc[orphan, ["name", "grid", "block", "stream"]].itertuples(index=False)):
        hit = donors.get(_key(row))
        if hit is not None:
            found[idx] = hit[0]
    return found


def adopt_twins(df: pd.DataFrame) -> int:
    """Fill op columns of op-less, launch-less kernels from their twins; returns how many."""
    orphan = (df["kind"] == "kernel") & df["op"].isna() & (df["launch"] == "") & ~df["graph"]
    if not orphan.any():
        return 0
    launched = (df["kind"] == "kernel") & df["op"].notna()
    sigs = _signatures(df, launched)
    found = _by_sequence(df, orphan, launched, sigs)
    rest = orphan.copy()
    rest[list(found)] = False
    found.update(_by_identity(df, rest, launched, sigs))
    next_id = min(int(df["op_id"].min()) - 1 if len(df) else -2, -2)
    last: dict = {}                         # stream -> (donor op call, the borrowed call's id)
    for idx in sorted(found, key=lambda i: df.at[i, "start_us"]):
        donor = found[idx]
        for col in TWIN_COLUMNS:
            df.at[idx, col] = df.at[donor, col]
        df.at[idx, "op_source"] = "twin"
        donor_call, stream = int(df.at[donor, "op_id"]), df.at[idx, "stream"]
        prev = last.get(stream)
        if prev is None or donor_call == -1 or prev[0] != donor_call:
            prev = (donor_call, next_id)      # a new call, unless the kernel before took the same call
            next_id -= 1
        last[stream] = prev
        df.at[idx, "op_id"] = prev[1]
    return len(found)
