"""One measured number (``Figure``: value, how it was measured) and one calibration run
(``Calibration``: the device, software versions, figures, and what was left out and why)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracekit.calibrate.timing import Sample
from tracekit.cost.devices import LAUNCH_KEYS, MEMORY_KEYS, PEAK_KEYS

ALL_KEYS = tuple([f"peak.{k}" for k in PEAK_KEYS] + [f"memory.{k}" for k in MEMORY_KEYS]
                 + [f"launch.{k}" for k in LAUNCH_KEYS])
VALUE_RULE = ("value = the best batch (a roof is a ceiling, so the floor it sets stays a lower bound; STREAM "
              "reports its best trial too); median = the rate sustained over all the batches")
ONE_MATMUL = {      # the frameworks offer one matmul per dtype: its rate goes under the plain key
    "peak.fp64_tensor": "one float64 matmul is measured and written as fp64 (a spec without fp64_tensor "
                        "uses fp64 for matmuls); the framework cannot choose tensor cores or not",
    "peak.fp32_tensor": "one float32 matmul (tf32 off) is measured and written as fp32 (a spec without "
                        "fp32_tensor uses fp32 for matmuls); the framework cannot choose matrix cores or not",
}


def unit_of(key: str) -> str:
    if key == "peak.int8":
        return "TOPS"
    if key.startswith("peak."):
        return "TFLOP/s"
    return {"memory.l2_bytes": "bytes", "launch.kernel_us": "us"}.get(key, "GB/s")


def significant(value: float, digits: int = 4) -> float:
    return float(f"{value:.{digits}g}")


@dataclass
class Figure:
    """A number for the spec: ``value`` (the best batch) in the spec's unit (TFLOP/s, TOPS, GB/s, µs, bytes)."""

    key: str                       # "peak.bf16", "memory.bandwidth_gbs", "launch.kernel_us", ...
    value: float
    kind: str                      # measured | device (read from the device, not timed)
    what: str                      # the work timed, with its sizes
    median: float | None = None    # the median batch (the sustained rate), same unit
    sample: Sample | None = None
    extra: str = ""                # what else the run saw (kernels that ran, eager launch interval)

    def how(self) -> dict:
        out = {"what": self.what, "unit": unit_of(self.key)}
        if self.sample is not None:
            out.update(repeats=len(self.sample.seconds), calls_per_repeat=self.sample.calls,
                       timer=self.sample.timer, best=self.value, median=self.median,
                       spread_pct=self.sample.spread_pct, value_is="best")
        if self.extra:
            out["extra"] = self.extra
        return out

    def source(self, context: str) -> str:
        """The spec file's source string: who, when, on what, the work, the timing, best and median."""
        if self.sample is None:
            return f"{context}: {self.what}" + (f"; {self.extra}" if self.extra else "")
        u, s = unit_of(self.key), self.sample
        spread = f", spread (IQR/median) {s.spread_pct:.1f}%" if s.spread_pct is not None else ""
        text = (f"{context}: {self.what}; {len(s.seconds)} batches of {s.calls} back-to-back calls, "
                f"{s.timer}; best {self.value:g} {u}, median {self.median:g} {u}{spread}; {VALUE_RULE}")
        return text + (f"; {self.extra}" if self.extra else "")


def said(progress, figure: Figure) -> Figure:
    """One progress line for a figure just measured; returns it."""
    runs = f"best of {len(figure.sample.seconds)}, median {figure.median:g}" if figure.sample else figure.kind
    progress(f"  {figure.key:24s} {figure.value:>10g} {unit_of(figure.key):8s} ({runs})")
    return figure


def rate(key: str, work: float, scale: float, what: str, s: Sample, extra: str = "") -> Figure:
    """A rate from ``work`` units per call (FLOP, bytes): per second over ``scale`` (1e12: TFLOP/s)."""
    return Figure(key, significant(work / s.best_s / scale), "measured", what,
                  significant(work / s.median_s / scale), s, extra)


def duration(key: str, per_call: int, what: str, s: Sample, extra: str = "") -> Figure:
    """Microseconds per unit of work, ``per_call`` units (kernels) in one call; value = the shortest."""
    return Figure(key, significant(s.best_s / per_call * 1e6), "measured", what,
                  significant(s.median_s / per_call * 1e6), s, extra)


@dataclass
class Calibration:
    """Everything one run found: written as a spec file, a table, or JSON."""

    backend: str                   # cuda | mps | cpu | mlx-gpu | mlx-cpu
    device: str                    # the device's own name
    vendor: str                    # a devices.VENDORS entry
    properties: dict               # what devices.match_device reads (name, totalGlobalMem, ...)
    versions: dict[str, str]
    date: str
    quick: bool
    figures: list[Figure] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def add(self, figure: Figure | None) -> None:
        if figure is not None:
            self.figures.append(figure)

    def skip(self, key: str, reason: str) -> None:
        self.skipped[key] = " ".join(reason.split())[:400]

    def context(self) -> str:
        versions = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        mode = ", --quick (sizes too small to be roofs)" if self.quick else ""
        return f"measured by tracekit calibrate {self.date} on {self.device} ({self.backend}; {versions}{mode})"

    def values(self) -> dict[str, float]:
        return {f.key: f.value for f in self.figures}

    def leave_out_the_rest(self, reason: str) -> None:
        """Every spec key neither measured nor already skipped gets ``reason`` (fp64_tensor and
        fp32_tensor their own)."""
        have = set(self.values())
        for key, why in ONE_MATMUL.items():
            if key not in have and key not in self.skipped:
                self.skip(key, why)
        for key in ALL_KEYS:
            if key not in have and key not in self.skipped:
                self.skip(key, reason)

    def to_json(self) -> dict:
        return {"backend": self.backend, "device": self.device, "vendor": self.vendor,
                "properties": self.properties, "versions": self.versions, "date": self.date,
                "quick": self.quick, "value_is": "best",
                "figures": {f.key: {"value": f.value, "kind": f.kind, **f.how()} for f in self.figures},
                "skipped": dict(self.skipped)}
