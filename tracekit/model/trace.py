"""The one data model every stage shares: a pandas kernel table plus per-step facts.

``Trace`` is what ``load`` produces and what classify, cost, fusion, report, check and diff read.
Its ``kernels`` table has the columns ``model.schema`` declares (type, meaning, the stage that fills
each), in that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from tracekit.model.schema import KERNEL_COLUMNS  # noqa: F401  (loaders build rows in this order)


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
    # the loader's events, kept only while graph-replayed rows still need their capture mapped
    source_events: list | None = field(default=None, repr=False)

    @property
    def is_cpu_only(self) -> bool:
        return bool(len(self.kernels)) and bool((self.kernels["kind"] == "cpu_op").all())

