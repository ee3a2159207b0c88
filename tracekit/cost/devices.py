"""Device specs: peak rates and memory facts loaded from TOML files, and matching a trace's device.

One TOML file per device (``tracekit/specs/<id>.toml``, format in docs/devices.md). Every number
carries its source. ``match_device`` picks the builtin spec for one ``deviceProperties`` entry of
a Kineto trace, or returns None when no spec (or more than one) fits: never a guess.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from tracekit.errors import TracekitError
from tracekit.limits import MAX_SMALL_FILE, read_input

PEAK_KEYS = (
    "fp64", "fp64_tensor", "fp32", "fp32_tensor", "tf32",
    "bf16", "fp16", "fp16_fp16acc", "fp8", "int8",
)
MEMORY_KEYS = ("bandwidth_gbs", "l2_bytes", "elementwise_gbs", "l2_gbs")   # elementwise_gbs: informational
# (a + b); l2_gbs: bytes per second a kernel moves when its tensors are resident in L2 (hot-L2 floors, cost.l2)
LAUNCH_KEYS = ("kernel_us",)       # the shortest a kernel runs on the device (launch and teardown)
LINK_KEYS = ("nvlink_gbs", "xgmi_gbs", "pcie_gbs")   # GB/s per direction, all links of one GPU (collectives)
LINK_UNITS = ("link", "pcie")   # compute_unit of rows whose bytes cross a link (transfer_gbs): bound "link"
VENDORS = ("nvidia", "amd", "apple", "cpu")
_TOP_KEYS = {
    "id", "name", "vendor", "match", "match_properties", "min_memory_gb", "max_memory_gb",
    "notes", "peak", "memory", "launch", "skipped", "link",
}
KINDS = ("measured", "datasheet", "device")   # optional per-number `kind`: how the number was obtained

# dtype spellings seen in traces and in torch -> canonical peak key
_ALIASES = {
    "fp64": "fp64", "float64": "fp64", "double": "fp64", "f64": "fp64",
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "f32": "fp32",
    "tf32": "tf32", "tensorfloat32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "f16": "fp16",
    "fp16_fp16acc": "fp16_fp16acc",
    "fp8": "fp8", "e4m3": "fp8", "e5m2": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8",
    "int8": "int8", "i8": "int8",
    "fp64_tensor": "fp64_tensor", "fp32_tensor": "fp32_tensor",
}


def canonical_dtype(dtype: str | None) -> str | None:
    """Canonical peak key for a dtype spelling ('torch.bfloat16' -> 'bf16'); None if unknown."""
    if not isinstance(dtype, str):
        return None
    key = dtype.strip().lower()
    if key.startswith("torch."):
        key = key[len("torch."):]
    return _ALIASES.get(key)


@dataclass(frozen=True)
class DeviceSpec:
    """One device: dense peak TFLOP/s per dtype key, memory bandwidth, L2 size, and sources."""

    id: str
    name: str
    vendor: str
    peak_tflops: dict[str, float]
    bandwidth_gbs: float | None
    l2_bytes: int | None
    sources: dict[str, str]
    path: str
    notes: str = ""
    match: tuple[str, ...] = ()
    match_properties: dict[str, Any] = field(default_factory=dict)
    min_memory_gb: float | None = None
    max_memory_gb: float | None = None
    launch_us: float | None = None        # shortest kernel time on the device ([launch] kernel_us)
    elementwise_gbs: float | None = None  # bytes read + written per s by a large a + b (not used by floors)
    l2_gbs: float | None = None           # bytes per s with the tensors in L2 (hot-L2 floors, cost.l2)
    kinds: dict[str, str] = field(default_factory=dict)     # "peak.bf16" -> measured | datasheet | device
    skipped: dict[str, str] = field(default_factory=dict)   # "peak.fp8" -> why it was not measured
    links: dict[str, float] = field(default_factory=dict)   # [link] nvlink_gbs / xgmi_gbs / pcie_gbs, per direction

    def transfer_gbs(self, unit: str) -> float | None:
        """GB/s per direction for bytes a row moves over a link rather than memory: ``"link"`` (a
        collective, a peer copy) the fastest link, ``"pcie"`` (a host copy) the PCIe link; else None."""
        return self.link_gbs if unit == "link" else self.links.get("pcie_gbs") if unit == "pcie" else None

    @property
    def link_gbs(self) -> float | None:
        """The fastest link one GPU has to its peers, GB/s per direction: what a collective's bus bytes
        cross at best (a floor, so the fastest; None when the spec gives no link)."""
        return max(self.links.values()) if self.links else None

    @property
    def measured(self) -> tuple[str, ...]:
        """The numbers marked ``kind = "measured"`` ("peak.bf16", "memory.bandwidth_gbs", ...)."""
        return tuple(k for k, v in self.kinds.items() if v == "measured")

    def __hash__(self) -> int:
        return hash((self.id, self.path))

    def peak(self, dtype: str) -> float | None:
        """TFLOP/s for a kernel computing in `dtype` (fp64, fp32, tf32, bf16, fp16, fp16_fp16acc,
        fp8, int8 or an alias such as 'bfloat16', 'half', 'double', 'e4m3'); None when no rate.

        fp16_fp16acc falls back to fp16 when the spec omits it: datasheets of datacenter parts
        quote one fp16 rate; GeForce specs list the (faster) fp16-accumulate rate explicitly.
        """
        key = canonical_dtype(dtype)
        if key is None:
            return None
        if key == "fp16_fp16acc" and key not in self.peak_tflops:
            key = "fp16"
        return self.peak_tflops.get(key)

    def matmul_peak(self, dtype: str) -> float | None:
        """Rate for matrix multiplies: fp64 -> fp64_tensor if present else fp64; fp32 ->
        fp32_tensor (AMD matrix cores) if present else fp32, never tf32 unless asked."""
        key = canonical_dtype(dtype)
        if key in ("fp64", "fp32"):
            rate = self.peak_tflops.get(f"{key}_tensor")
            return rate if rate is not None else self.peak_tflops.get(key)
        return self.peak(dtype) if key is not None else None

    def vector_peak(self, dtype: str) -> float | None:
        """Rate for non-matrix (elementwise, reduction) work: fp64 -> fp64, anything else -> fp32."""
        key = canonical_dtype(dtype)
        if key is None:
            return None
        return self.peak_tflops.get("fp64" if key == "fp64" else "fp32")


# the sane range of each spec number (inclusive): a value outside is a typo or an attack, and it would
# make floors absurd (bandwidth 1e-300: floors of 1e300 µs, every gap 0×, every max_gap passes) or overflow
SANE_RANGE = {"peak": (1e-6, 1e5, "TFLOP/s"), "memory.bandwidth_gbs": (1e-2, 1e5, "GB/s"),
              "memory.elementwise_gbs": (1e-2, 1e5, "GB/s"), "memory.l2_bytes": (1.0, 2.0 ** 40, "bytes"),
              "memory.l2_gbs": (1e-2, 1e6, "GB/s"),
              "launch": (1e-3, 1e6, "µs"), "link": (1e-3, 1e5, "GB/s")}


def sane_range(section: str, key: str) -> tuple[float, float, str]:
    found = SANE_RANGE.get(f"{section}.{key}") or SANE_RANGE.get(section)
    if found is None:                                  # a number tracekit reads must have a range here
        raise TracekitError(f"[{section}] {key}: no sane range is known for this spec number")
    return found


def _sourced_number(table: Any, section: str, key: str, where: str) -> tuple[float, str, str | None]:
    if not isinstance(table, dict) or set(table) - {"value", "source", "kind"}:
        raise TracekitError(f"{where}: [{section}] {key} must be {{ value = ..., source = \"...\" }}")
    kind = table.get("kind")
    if kind is not None and kind not in KINDS:
        raise TracekitError(f"{where}: [{section}] {key}.kind must be one of {', '.join(KINDS)}")
    value, source = table.get("value"), table.get("source")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise TracekitError(f"{where}: [{section}] {key}.value must be a positive number")
    low, high, unit = sane_range(section, key)
    if not low <= value <= high:                      # inf and NaN fail this too
        raise TracekitError(f"{where}: [{section}] {key}.value {value:g} {unit} is outside the sane range "
                            f"{low:g} to {high:g} {unit} (docs/limits.md)")
    if not isinstance(source, str) or not source.strip():
        raise TracekitError(f"{where}: [{section}] {key} needs a non-empty source")
    return float(value), source.strip(), kind


def _parse(data: bytes, where: str) -> DeviceSpec:
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        msg = str(exc).replace("\n", " ")
        raise TracekitError(f"{where}: not valid TOML: {msg}") from None
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise TracekitError(f"{where}: unknown key(s) {', '.join(unknown)}")
    for key in ("id", "name", "vendor"):
        if not isinstance(doc.get(key), str) or not doc[key].strip():
            raise TracekitError(f"{where}: missing or empty string key '{key}'")
    if doc["vendor"] not in VENDORS:
        raise TracekitError(f"{where}: vendor must be one of {', '.join(VENDORS)}")
    patterns = doc.get("match", [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise TracekitError(f"{where}: match must be a list of regex strings")
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise TracekitError(f"{where}: bad match regex {pattern!r}: {exc}") from None
    props = doc.get("match_properties", {})
    if not isinstance(props, dict):
        raise TracekitError(f"{where}: match_properties must be a table")
    bounds = {}
    for key in ("min_memory_gb", "max_memory_gb"):
        value = doc.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 <= value <= 1e6):
            raise TracekitError(f"{where}: {key} must be a number from 0 to 1e6 (GB, 1e9 bytes)")
        bounds[key] = None if value is None else float(value)

    sources: dict[str, str] = {}
    peaks: dict[str, float] = {}
    memory: dict[str, float] = {}
    launch: dict[str, float] = {}
    links: dict[str, float] = {}
    kinds: dict[str, str] = {}
    for section, allowed, out in (("peak", PEAK_KEYS, peaks), ("memory", MEMORY_KEYS, memory),
                                  ("launch", LAUNCH_KEYS, launch), ("link", LINK_KEYS, links)):
        table = doc.get(section, {})
        if not isinstance(table, dict):
            raise TracekitError(f"{where}: [{section}] must be a table")
        for key, entry in table.items():
            if key not in allowed:
                raise TracekitError(
                    f"{where}: unknown [{section}] key '{key}' (allowed: {', '.join(allowed)})")
            out[key], sources[f"{section}.{key}"], kind = _sourced_number(entry, section, key, where)
            if kind is not None:
                kinds[f"{section}.{key}"] = kind
    if not peaks and "bandwidth_gbs" not in memory:
        raise TracekitError(f"{where}: needs at least one [peak] rate or memory.bandwidth_gbs")
    l2 = memory.get("l2_bytes")
    skipped = doc.get("skipped", {})      # "section.key" = "why it was left out" (written by calibrate)
    if not isinstance(skipped, dict) or not all(isinstance(v, str) for v in skipped.values()):
        raise TracekitError(f"{where}: [skipped] must map \"section.key\" to a reason string")
    return DeviceSpec(
        id=doc["id"].strip(), name=doc["name"].strip(), vendor=doc["vendor"],
        peak_tflops=peaks, bandwidth_gbs=memory.get("bandwidth_gbs"),
        l2_bytes=None if l2 is None else int(l2), sources=sources, path=where,
        notes=str(doc.get("notes", "")).strip(), match=tuple(patterns), match_properties=props,
        min_memory_gb=bounds["min_memory_gb"], max_memory_gb=bounds["max_memory_gb"],
        launch_us=launch.get("kernel_us"), elementwise_gbs=memory.get("elementwise_gbs"), kinds=kinds,
        l2_gbs=memory.get("l2_gbs"),
        skipped=dict(skipped), links=links,
    )


def load_spec(path: str | Path) -> DeviceSpec:
    """Load a ``--spec`` value: a spec file, or a builtin spec id (``h200-measured``) when no file of
    that name exists; TracekitError naming the file when it is unreadable or malformed."""
    if isinstance(path, str) and _could_be_id(path) and not Path(path).exists():
        for spec in _builtin():
            if spec.id == path:
                return spec
        known = ", ".join(s.id for s in _builtin())
        raise TracekitError(f"{path}: cannot read spec file (no such file) and no builtin spec has that id "
                            f"(known: {known})")
    data = bytes(read_input(path, "spec file", limit=MAX_SMALL_FILE, gunzip=False))   # a FIFO never blocks
    return _parse(data, str(path))


def _could_be_id(value: str) -> bool:
    """Ids are bare names (``h200-measured``); anything with a folder or a .toml suffix is a path."""
    return bool(value) and "/" not in value and "\\" not in value and not value.endswith(".toml")


@functools.lru_cache(maxsize=1)
def _builtin() -> tuple[DeviceSpec, ...]:
    folder = resources.files("tracekit") / "specs"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)
    specs = tuple(_parse(f.read_bytes(), str(f)) for f in files)
    ids = [s.id for s in specs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise TracekitError(f"builtin specs: duplicate id(s) {', '.join(dupes)}")
    return specs


def builtin_specs() -> list[DeviceSpec]:
    """All specs shipped in tracekit/specs, sorted by file name (loaded once)."""
    return list(_builtin())


def spec_by_id(spec_id: str) -> DeviceSpec:
    """The builtin spec with this id; TracekitError listing the known ids otherwise."""
    for spec in _builtin():
        if spec.id == spec_id:
            return spec
    known = ", ".join(s.id for s in _builtin())
    raise TracekitError(f"unknown device spec '{spec_id}' (known: {known})")


def resolve_spec(value: str) -> DeviceSpec:
    """A `--spec` argument: a path to a .toml file, or a builtin id (the same as ``load_spec``)."""
    return load_spec(value)


def _fits(spec: DeviceSpec, props: dict, name: str) -> bool:
    if not any(re.search(p, name, re.IGNORECASE) for p in spec.match):
        return False
    for key, want in spec.match_properties.items():
        if key not in props or props[key] != want:
            return False
    if spec.min_memory_gb is not None or spec.max_memory_gb is not None:
        mem = props.get("totalGlobalMem")
        if isinstance(mem, bool) or not isinstance(mem, (int, float)):
            return False
        gb = mem / 1e9
        if spec.min_memory_gb is not None and gb < spec.min_memory_gb:
            return False
        if spec.max_memory_gb is not None and gb > spec.max_memory_gb:
            return False
    return True


def match_device(props: dict) -> DeviceSpec | None:
    """The builtin spec for one trace ``deviceProperties`` entry, or None when none or several fit."""
    name = props.get("name") if isinstance(props, dict) else None
    if not isinstance(name, str) or not name.strip():
        return None
    hits = [s for s in _builtin() if _fits(s, props, name)]
    return hits[0] if len(hits) == 1 else None
