"""Kernels launched before the trace began: the op and shapes of an identical kernel in the trace.

When the CPU ran ahead of the GPU before profiling started, the first kernels of the trace have no
launch event and so no op. A kernel with the same name, grid, block and stream elsewhere in the same
trace that has an op is, in practice, the same call site: its op and shapes are taken, labelled
``op_source = "twin"`` so the borrowing is visible. Kernels with several different twins keep none.
"""

from __future__ import annotations

import pandas as pd

TWIN_COLUMNS = ("op", "op_dims", "op_types", "op_strides", "op_concrete", "kernel_file")


def _key(row) -> tuple:
    return (row.name, repr(row.grid), repr(row.block), row.stream)


def adopt_twins(df: pd.DataFrame) -> int:
    """Fill op columns of op-less, launch-less kernels from identical kernels; returns how many."""
    orphan = (df["kind"] == "kernel") & df["op"].isna() & (df["launch"] == "") & ~df["graph"]
    if not orphan.any():
        return 0
    donors: dict[tuple, tuple | None] = {}
    with_op = df[(df["kind"] == "kernel") & df["op"].notna()]
    for row in with_op[["name", "grid", "block", "stream", *TWIN_COLUMNS]].itertuples(index=False):
        key = _key(row)
        values = tuple(getattr(row, c) for c in TWIN_COLUMNS)
        seen = donors.get(key, values)
        donors[key] = values if seen is not None and repr(seen[:4]) == repr(values[:4]) else None
    adopted = 0
    next_id = int(df["op_id"].min()) - 1 if len(df) else -2
    next_id = min(next_id, -2)
    for idx, row in zip(df.index[orphan], df.loc[orphan, ["name", "grid", "block", "stream"]].itertuples(index=False)):
        values = donors.get(_key(row))
        if values is None:
            continue
        for col, value in zip(TWIN_COLUMNS, values):
            df.at[idx, col] = value
        df.at[idx, "op_source"] = "twin"
        df.at[idx, "op_id"] = next_id           # its own op call
        next_id -= 1
        adopted += 1
    return adopted
