"""The compute rate a kernel's floor divides its FLOPs by, with the stand-ins used when a spec lacks it.

A floor must stay a lower bound, so a rate the spec lacks is never read as infinite (a compute term of
0) and is stood in for only by a rate the missing one cannot exceed (docs/devices.md, "Missing rates"):

1. the spec's own key: matrix work ``matmul_peak``'s key (fp64 -> fp64_tensor, fp32 -> fp32_tensor
   when listed; fp16_fp16acc -> fp16 when not listed), vector work fp64 -> fp64, anything else fp32;
2. fp16 <-> bf16 (matrix work, fp16_fp16acc included): the same 16-bit tensor path; every builtin spec
   that lists both gives them the same rate;
3. matrix work wider than 16 bits (fp64, fp32, tf32) and any vector work: the fastest 16-bit-or-wider
   float rate the spec lists: a wider dtype never computes faster than a narrower one, nor a vector
   unit faster than the matrix units;
4. else (bf16/fp16 with neither listed: the cpu spec's fp32 does not bound an AMX bf16 matmul; fp8,
   int8): unknown. The row gets no floor, its note says why.
"""

from __future__ import annotations

from tracekit.cost.devices import LINK_UNITS, canonical_dtype

_SIXTEEN_OR_WIDER = ("fp64", "fp64_tensor", "fp32", "fp32_tensor", "tf32", "bf16", "fp16", "fp16_fp16acc")
_WIDE = ("fp64", "fp64_tensor", "fp32", "fp32_tensor", "tf32")
_SAME_WIDTH = {"fp16": ("bf16",), "bf16": ("fp16",), "fp16_fp16acc": ("fp16", "bf16")}


def own_key(spec, key: str, unit: str | None) -> str:
    """The [peak] key the spec's own rule reads for canonical ``key`` on ``unit`` (it may be absent)."""
    if unit == "matrix":
        if key in ("fp64", "fp32") and f"{key}_tensor" in spec.peak_tflops:
            return f"{key}_tensor"
        if key == "fp16_fp16acc" and key not in spec.peak_tflops:
            return "fp16"
        return key
    return "fp64" if key == "fp64" else "fp32"


def rate_for(spec, dtype: str | None, unit: str | None) -> tuple[str | None, float | None, bool]:
    """(peak key, TFLOP/s, stand-in) for a kernel of ``dtype`` on ``unit``; (None, None, False) when
    the spec has no rate that bounds it or the row crosses a link. ``stand-in`` is True when the key is
    not the kernel's own dtype (rules 2 and 3 of the module docstring)."""
    key = canonical_dtype(dtype)
    if unit in LINK_UNITS or spec is None or not isinstance(dtype, str):
        return None, None, False
    if key is None:                 # int64, bool: vector work runs on the fp32 ALUs at best; a matrix, unknown
        if unit == "matrix":
            return None, None, False
        key = "fp32"
    peaks = spec.peak_tflops
    first = own_key(spec, key, unit)
    if first in peaks:
        return first, peaks[first], False
    if unit == "matrix":
        for other in _SAME_WIDTH.get(key, ()):
            if other in peaks:
                return other, peaks[other], True
    if key in _WIDE or unit != "matrix":
        listed = [k for k in _SIXTEEN_OR_WIDER if k in peaks]
        if listed:
            best = max(listed, key=lambda k: peaks[k])
            return best, peaks[best], True
    return None, None, False
