"""The one data model every stage shares: a pandas kernel table plus per-step facts.

``Trace`` is what ``load`` produces and what classify, cost, fusion, report, check and diff read.
Each row of ``Trace.kernels`` is one execution of a device activity (kernel, memcpy or memset), or,
on a CPU-only trace, one top-level CPU op. Rows are in time order. Columns (see ``KERNEL_COLUMNS``):

name          str    kernel name as the trace spells it
kind          str    "kernel" | "memcpy" | "memset" | "cpu_op"
category      str    classify.CATEGORIES (gemm, attention, elementwise, ...)
device        int    GPU index (-1 for CPU rows)
stream        int    stream id (-1 where none)
start_us      float  start, microseconds, exactly as the trace has it
dur_us        float  duration, microseconds, exact (never rounded)
grid, block   object list of 3 ints or None
step          int    0-based step index, -1 when outside every step
correlation   int    runtime/driver correlation id (-1 where none)
launch        str    the runtime call that launched it (cudaLaunchKernel, cudaGraphLaunch, ...) or ""
graph         bool   replayed from a CUDA/HIP graph (no CPU op launched it directly)
op            str    launching CPU op (innermost, e.g. "aten::addmm") or None
op_dims       object op's "Input Dims" (list per input) or None
op_types      object op's "Input type" or None
op_strides    object op's "Input Strides" or None
op_concrete   object op's "Concrete Inputs" or None
op_source     str    how ``op`` was found: "external_id", "graph_capture", "self" or ""
kernel_file   str    Inductor kernel source path the op names (args "kernel_file"), or None
op_id         int    identity of the launching op instance (kernels of one op call share it; -1 none)
dtype         str    dtype the kernel computes in, set by cost ("bf16", "fp32", ...) or None
flops         float  floating-point operations (NaN when no model applies)
bytes         float  minimal bytes: inputs read once + outputs written once (NaN when unknown);
                     load fills it for memcpy/memset rows from the event's own byte count
floor_us      float  max(flops/peak, bytes/bandwidth) in microseconds (NaN when unknown)
bound         str    "compute" | "memory" | None
gap           float  dur_us / floor_us (NaN when no floor)
cost_note     str    which model costed the row, or why it has no floor
fused_ops     object list of lowercase op names the kernel performs (fusion fills it in)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

KERNEL_COLUMNS = [
    "name", "kind", "category", "device", "stream", "start_us", "dur_us", "grid", "block",
    "step", "correlation", "launch", "graph", "op", "op_dims", "op_types", "op_strides",
    "op_concrete", "op_source", "kernel_file", "op_id", "dtype", "flops", "bytes", "floor_us", "bound", "gap",
    "cost_note", "fused_ops",
]


@dataclass
class Step:
    """One step: a ProfilerStep#N range, a --step-marker match, or the whole trace."""

    index: int
    name: str
    start_us: float
    end_us: float


@dataclass
class Trace:
    """A normalised trace: the kernel table, its steps and where it came from."""

    path: str
    kernels: pd.DataFrame
    steps: list[Step]
    step_rule: str                      # "ProfilerStep", "marker:<regex>", "whole trace"
    device_name: str | None             # deviceProperties name, or None (CPU-only / unknown)
    device_properties: list[dict] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)   # trace-level fields (schemaVersion, distributedInfo...)
    warnings: list[str] = field(default_factory=list)
    spec: object = None                 # cost.devices.DeviceSpec chosen for floors, or None

    @property
    def is_cpu_only(self) -> bool:
        return bool(len(self.kernels)) and bool((self.kernels["kind"] == "cpu_op").all())

