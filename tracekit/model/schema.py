"""The kernel table's schema: every column any stage fills, with its type, meaning and stage.

Each row of ``Trace.kernels`` is one execution of a device activity (kernel, memcpy, memset) or,
on a CPU-only trace, one top-level CPU op; rows are in time order. ``validate`` enforces the schema
(no undeclared column, no missing one, each of its declared type); the pipeline calls it after the
last stage, and tests call it on every committed trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Column:
    name: str
    kind: str          # "str" (text or None), "float" (NaN = unknown), "int", "bool", "object"
    stage: str         # the stage that fills it
    meaning: str


COLUMNS: tuple[Column, ...] = (
    Column("name", "str", "load", "kernel name as the trace spells it"),
    Column("kind", "str", "load", '"kernel" | "memcpy" | "memset" | "cpu_op"'),
    Column("category", "str", "classify", "gemm, attention, elementwise, ... (classify.CATEGORIES)"),
    Column("device", "int", "load", "GPU index (-1 for CPU rows)"),
    Column("stream", "int", "load", "stream id (-1 where none)"),
    Column("start_us", "float", "load", "start, microseconds, exactly as the trace has it"),
    Column("dur_us", "float", "load", "duration, microseconds, exact (never rounded); NaN: not timed (MLX)"),
    Column("grid", "object", "load", "list of 3 ints or None"),
    Column("block", "object", "load", "list of 3 ints or None"),
    Column("step", "int", "load", "0-based step index, -1 when outside every step"),
    Column("correlation", "int", "load", "runtime/driver correlation id (-1 where none)"),
    Column("launch", "str", "load", "the runtime call that launched it (cudaLaunchKernel, cudaGraphLaunch...) or ''"),
    Column("graph", "bool", "load", "replayed from a CUDA/HIP graph (no CPU op launched it directly)"),
    Column("op", "str", "load", "launching CPU op (innermost, e.g. aten::addmm) or None"),
    Column("op_dims", "object", "load", "the op's Input Dims (a list per input) or None"),
    Column("op_types", "object", "load", "the op's Input type or None"),
    Column("op_strides", "object", "load", "the op's Input Strides or None"),
    Column("op_concrete", "object", "load", "the op's Concrete Inputs or None"),
    Column("op_source", "str", "load", 'how op was found: "external_id", "graph_capture", "self", "mlx_graph" or ""'),
    Column("kernel_file", "str", "load", "Inductor kernel source path the op names (args kernel_file) or None"),
    Column("module", "str", "load", "a graph-replayed kernel's nn.Module: the innermost 'nn.Module: X' Python frame "
           "around its capture-time launch (traces recorded with_stack), else None"),
    Column("op_id", "int", "load", "identity of the launching op call (kernels of one call share it; -1 none)"),
    Column("op_rf_id", "int", "load", "the launching op's Record function id: the execution trace's rf_id of that "
           "call (fusion.exact joins on it; -1 none)"),
    Column("event_bytes", "float", "load", "bytes the trace itself gives a memcpy/memset (NaN for kernels)"),
    Column("event_index", "int", "load", "position of the row's event in the trace's traceEvents list (explain "
           "--perfetto annotates that event); -1 for rows not read from one trace event (CPU-only rows, MLX)"),
    Column("collective", "object", "collectives", "a communication kernel's collective (load.collectives): {name, "
           "bytes (S, the whole buffer), dtype, group, group_size, source}; None for other rows"),
    Column("fused_ops", "object", "fusion", "list of lowercase aten-style op names the kernel performs"),
    Column("io", "object", "fusion", "ops.IO: tensors the row's op call reads and writes, or None"),
    Column("et_io", "object", "fusion", "fusion.exact.ExactIO: what the row's op call reads and writes by storage "
           "(storage id, byte range), from the execution trace node with its op_rf_id; None when not joined"),
    Column("dtype", "str", "cost", "dtype the work runs in (selects the peak), or None"),
    Column("compute_unit", "str", "cost", '"matrix" (tensor-core peak) | "vector" | "link" (a collective or peer '
           'copy: its bytes cross the GPU\'s fastest link, spec [link]) | "pcie" (a host copy) | None'),
    Column("flops", "float", "cost", "floating-point operations (NaN when no model applies)"),
    Column("bytes", "float", "cost", "minimal bytes: inputs read once + outputs written once (NaN unknown)"),
    Column("cost_note", "str", "cost", "which model costed the row, or why it has no floor"),
    Column("floor_us", "float", "roofline", "max(flops/peak, bytes/bandwidth), microseconds (NaN unknown)"),
    Column("bound", "str", "roofline", '"compute" | "memory" | "launch" (floor below the device\'s shortest '
                                     'kernel, spec [launch] kernel_us) | "link" (a collective or a copy: bytes / the '
                                     'spec\'s link bandwidth, [link]) | None'),
    Column("gap", "float", "roofline", "time / gap_floor_us: the time of all the op call's kernels on the row "
                                     "that carries its floor (NaN when no floor)"),
    Column("covered", "bool", "roofline", "the row's time is set against a floor: its own, or its op call's "
                                          "carried by a sibling kernel"),
    Column("gap_floor_us", "float", "roofline", "what gap divides by: max(floor_us, or l2_floor_us when hot or assumed, the "
                                              "op call's kernels x the shortest kernel), µs (NaN without a floor)"),
    Column("l2", "str", "roofline", '"hot" (an input a recent kernel wrote, resident in L2: cost.l2) | "assumed" (not '
                                    'proven, but it ran below its DRAM floor and L2 can explain it: cost_note says why) | '
                                    '"cold" | None (no execution-trace join, or the spec has no l2_gbs)'),
    Column("l2_floor_us", "float", "roofline", "hot rows: max(compute term, bytes / the spec's l2_gbs), assumed rows: "
                                               "the same with the bytes beyond the L2's size at DRAM speed, µs (NaN else)"),
)

KERNEL_COLUMNS = [c.name for c in COLUMNS]
BY_NAME = {c.name: c for c in COLUMNS}
_EMPTY = {"str": None, "float": np.nan, "int": -1, "bool": False, "object": None}


def empty_value(column: str):
    """The value a column holds before its stage fills it."""
    return _EMPTY[BY_NAME[column].kind]


def fill_missing(cols: dict[str, list], n: int) -> dict[str, list]:
    """Add every declared column a loader did not fill, at its empty value."""
    for c in COLUMNS:
        if c.name not in cols:
            cols[c.name] = [_EMPTY[c.kind]] * n
    return cols


class SchemaError(AssertionError):
    """The kernel table does not match its declared schema (a bug in a stage, not bad input)."""


def validate(df: pd.DataFrame) -> pd.DataFrame:
    """Raise SchemaError unless ``df`` has exactly the declared columns, each of its declared type."""
    extra = [c for c in df.columns if c not in BY_NAME]
    missing = [c for c in KERNEL_COLUMNS if c not in df.columns]
    if extra or missing:
        raise SchemaError(f"kernel table columns: undeclared {extra}, missing {missing}")
    if not len(df):
        return df
    for c in COLUMNS:
        dtype = df[c.name].dtype
        ok = {"float": pd.api.types.is_float_dtype(dtype),
              "int": pd.api.types.is_integer_dtype(dtype),
              "bool": pd.api.types.is_bool_dtype(dtype),
              "str": dtype == object or pd.api.types.is_string_dtype(dtype),
              "object": dtype == object}[c.kind]
        if not ok:
            raise SchemaError(f"kernel table column {c.name!r} is {dtype}, declared {c.kind}")
    return df
