"""One costed trace set against several devices.

FLOPs, minimal bytes, dtype and unit do not depend on the device, so a trace is loaded and costed
once and only the roofline is redone per device spec (``on_device``: a cheap copy of the kernel
table). Also: which roofs of a spec are datasheet figures and which were measured (``roof_kind``),
the peak key a kernel runs at (``peak_key``) and the ridge point (``ridge``).
"""

from __future__ import annotations

import copy

from tracekit.cost.devices import DeviceSpec, load_spec
from tracekit.cost.rates import rate_for
from tracekit.cost.roofline import apply_roofline
from tracekit.errors import TracekitError

MAX_DEVICES = 16


def parse_devices(text: str) -> list[DeviceSpec]:
    """``--devices h200,rtx5090,my.toml``: spec ids or files, comma-separated, each loaded now (before
    any trace is read); a spec named twice counts once. TracekitError (one line) on a bad entry."""
    names = [n.strip() for n in str(text).split(",")]
    if not names or any(not n for n in names):
        raise TracekitError(f"--devices {text!r}: give spec ids or files separated by commas (e.g. h200,rtx5090)")
    if len(names) > MAX_DEVICES:
        raise TracekitError(f"--devices: at most {MAX_DEVICES} specs (got {len(names)})")
    specs: list[DeviceSpec] = []
    for name in names:
        spec = load_spec(name)
        if not any(same_spec(spec, s) for s in specs):
            specs.append(spec)
    return specs


def same_spec(a: DeviceSpec | None, b: DeviceSpec | None) -> bool:
    return a is not None and b is not None and a.id == b.id and a.path == b.path


def peak_key(spec: DeviceSpec, dtype: str | None, unit: str | None) -> str | None:
    """The ``[peak]`` key whose rate a kernel of ``dtype`` on ``unit`` is floored at (cost.rates: its own
    key, or a stand-in that bounds it); None when the spec has no such rate."""
    return rate_for(spec, dtype, unit)[0]


def compute_rate(spec: DeviceSpec, dtype: str | None, unit: str | None) -> float | None:
    """TFLOP/s for a kernel of ``dtype`` on ``unit`` (what the roofline uses); None without one."""
    return rate_for(spec, dtype, unit)[1]


def roof_kind(spec: DeviceSpec, source_key: str | None) -> str | None:
    """"measured" or "datasheet" for one roof (``peak.bf16``, ``memory.bandwidth_gbs``); None when the
    spec lacks it. A number's own ``kind`` in the spec file decides (``DeviceSpec.kinds``, written by
    ``tracekit calibrate``); without one, a source that starts with "measured" marks a measured roof."""
    if not source_key or source_key not in spec.sources:
        return None
    kind = (getattr(spec, "kinds", None) or {}).get(source_key)
    if kind in ("measured", "datasheet"):
        return kind
    return "measured" if spec.sources[source_key].strip().lower().startswith("measured") else "datasheet"


def ridge(spec: DeviceSpec, dtype: str | None, unit: str | None) -> float | None:
    """Ridge point in FLOP/byte: the peak for ``dtype`` on ``unit`` over the bandwidth (TFLOP/s·1e12 ÷
    GB/s·1e9); None without either."""
    rate = compute_rate(spec, dtype, unit)
    if not rate or not spec.bandwidth_gbs:
        return None
    return rate * 1e3 / spec.bandwidth_gbs


def on_device(trace, spec: DeviceSpec):
    """The trace as if costed for ``spec``: a shallow copy whose kernel table is a copy with floor, bound,
    gap and covered redone (the loaded, classified and costed rows are shared, never re-read); rows below
    their floor there are not read as served from L2 (they ran on the trace's own device)."""
    view = copy.copy(trace)
    view.kernels = apply_roofline(trace.kernels.copy(), spec, measured_here=same_spec(spec, trace.spec))
    view.spec = spec
    view.warnings = list(trace.warnings)
    return view
