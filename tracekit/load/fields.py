"""What the loaders accept in an event's fields (and in an MLX shape sidecar), and the notes they keep
on what they dropped.

The loader's rule (docs/limits.md): a field the kernel table is built from (name, ts, dur, the ids
that join launches and ops, tid) must be well-formed, else the trace is unusable and the error names
the event; a detail that only feeds costing (an op's shapes, a copy's byte count, grid/block) is
dropped when malformed, counted, and reported in one warning.
"""

from __future__ import annotations

import math
from pathlib import Path

from tracekit.errors import TracekitError

MAX_ABS_TS_US = 1e17        # ~3,000 years of microseconds: any real timestamp, epoch-based included
MAX_DUR_US = 1e13           # ~116 days for one event
MAX_SHAPE_DEPTH = 3         # Input Dims: [inputs][tensor list][dims]
MAX_ELEMENTS = 1 << 53      # elements of one tensor (counted exactly in a float64); larger shapes are refused
ID_KEYS = ("correlation", "External id")


def number(value) -> float | None:
    """A finite float from a JSON number or numeric string; None for anything else (bool, NaN, inf)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        x = float(value)
    elif isinstance(value, str):
        try:
            x = float(value)
        except ValueError:
            return None
    else:
        return None
    return x if math.isfinite(x) else None


def label(e: dict) -> str:
    """How an error names an event: its name, quoted and cut short."""
    name = e.get("name", "?")
    text = repr(name)
    return f"({text[:80]}…)" if len(text) > 80 else f"({text})"


def bad_event(path: Path, index: int, what: str) -> TracekitError:
    return TracekitError(f"{path}: event #{index} {what}")


def check_time(e: dict, path: Path, i: int, dur: bool = True) -> None:
    """ts (and dur) present, finite numbers, in range; written back as floats."""
    for key in ("ts", "dur") if dur else ("ts",):
        if key not in e:
            raise bad_event(path, i, f"{label(e)} has no {key!r} field")
        x = number(e[key])
        if x is None:
            raise bad_event(path, i, f"{label(e)} has a non-numeric or non-finite {key} ({_short(e[key])})")
        if key == "dur" and x < 0:
            raise bad_event(path, i, f"{label(e)} has a negative duration ({x})")
        if abs(x) > (MAX_DUR_US if key == "dur" else MAX_ABS_TS_US):
            raise bad_event(path, i, f"{label(e)} has an implausible {key} ({x:g} us)")
        e[key] = x


def check_common(e: dict, path: Path, i: int) -> dict:
    """A kept event's name (a string), tid/pid (scalars) and args (an object, ids scalars); its args."""
    if not isinstance(e.get("name"), str):
        what = "no 'name' field" if "name" not in e else f"a name that is not a string ({_short(e['name'])})"
        raise bad_event(path, i, f"({e.get('cat')}) has {what}")
    for key in ("tid", "pid"):
        v = e.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, str, float))):
            raise bad_event(path, i, f"{label(e)} has {key!r} given as a {type(v).__name__}, not a number")
    args = e.get("args")
    if args is None:
        return {}
    if not isinstance(args, dict):
        raise bad_event(path, i, f"{label(e)} has 'args' that is not an object")
    for key in ID_KEYS:
        v = args.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, str))):
            raise bad_event(path, i, f"{label(e)} has {key!r} given as a {type(v).__name__}, not an integer id")
        if isinstance(v, int) and not -(1 << 63) <= v < (1 << 63):
            raise bad_event(path, i, f"{label(e)} has a {key!r} beyond 64 bits ({_short(v)})")
    return args


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _depth_ok(value, depth: int) -> bool:
    """A list nested at most ``depth`` deep whose leaves are ints (no bools)."""
    if isinstance(value, list):
        return depth > 0 and all(_depth_ok(v, depth - 1) for v in value)
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shape_ok(value, depth: int) -> bool:
    """Like ``_depth_ok``, and every tensor shape (a list of ints) has dims ≥ 0 whose product is at most
    ``MAX_ELEMENTS``: a negative dim or an overflowing size would become negative or absurd FLOPs,
    bytes and floors, which a gate would read."""
    if not isinstance(value, list):
        return _is_int(value)
    if depth <= 0:
        return False
    if all(_is_int(v) for v in value):
        size = 1
        for v in value:
            if v < 0 or v > MAX_ELEMENTS:
                return False
            size *= v
            if size > MAX_ELEMENTS:
                return False
        return True
    return all(_shape_ok(v, depth - 1) for v in value)


def _scalar_list(value, n: int) -> bool:
    return isinstance(value, list) and len(value) == n and all(
        v is None or (isinstance(v, (str, int, float)) and not isinstance(v, bool)) for v in value)


def op_fields(args: dict) -> tuple[list | None, list | None, list | None, list | None, bool]:
    """(Input Dims, Input type, Input Strides, Concrete Inputs, ok) of one op's args. Shapes are kept
    only when consistent: dims a list of (nested) int lists, the others lists of the same length;
    else all four are None and ok is False."""
    dims, types = args.get("Input Dims"), args.get("Input type")
    strides, concrete = args.get("Input Strides"), args.get("Concrete Inputs")
    if dims is None and types is None and strides is None and concrete is None:
        return None, None, None, None, True
    ok = isinstance(dims, list) and all(_shape_ok(d, MAX_SHAPE_DEPTH - 1) for d in dims)
    n = len(dims) if ok else 0
    ok = ok and (types is None or (_scalar_list(types, n) and all(isinstance(t, str) or t is None for t in types)))
    ok = ok and (strides is None or (isinstance(strides, list) and len(strides) == n
                                     and all(_depth_ok(s, MAX_SHAPE_DEPTH - 1) for s in strides)))
    ok = ok and (concrete is None or _scalar_list(concrete, n))
    return (dims, types, strides, concrete, True) if ok else (None, None, None, None, False)


def grid_value(value):
    """A device event's grid / block as written (a list of at most 3 ints), else None."""
    return value if isinstance(value, list) and len(value) <= 3 and _depth_ok(value, 1) else None


SHAPE_KEYS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
SHAPES_DROPPED = ("{n} ops have Input Dims/type/Strides/Concrete Inputs that are malformed, of different lengths, "
                  "or with a negative dim or a tensor over 2^53 elements: their shapes are unknown (no cost for "
                  "their kernels)")


def clean_device_args(args: dict, kind: str, notes: "Notes") -> None:
    """Drop (and count) a device event's malformed details: bytes of a copy, grid, block."""
    if kind != "kernel" and "bytes" in args and not (number(args["bytes"]) or -1) >= 0:
        del args["bytes"]
        notes.add("{n} memcpy/memset events have a 'bytes' that is not a number ≥ 0: their bytes are unknown")
    for key in ("grid", "block"):
        if key in args and grid_value(args[key]) is None:
            del args[key]
            notes.add("{n} device events have a grid or block that is not a list of ints: dropped")


def clean_op_args(args: dict, notes: "Notes") -> None:
    """Drop (and count) an op's inconsistent shapes and a kernel_file that is no path."""
    if not op_fields(args)[4]:
        for key in SHAPE_KEYS:
            args.pop(key, None)
        notes.add(SHAPES_DROPPED)
    if "kernel_file" in args and not isinstance(args["kernel_file"], str):
        del args["kernel_file"]
        notes.add("{n} ops have a kernel_file that is not a string: dropped")


def mlx_sidecar(info: dict, path: Path) -> dict:
    """A shape sidecar (or meta.json) with its malformed parts dropped and said in its warnings: arrays
    need a shape of ints ≥ 0 and a string dtype, compiled regions lists of names, text fields strings."""
    notes = [w for w in info.get("warnings") or [] if isinstance(w, str)] if isinstance(info.get("warnings"), list) \
        else []
    if info.get("warnings") not in (None, notes):
        notes.append(f"{path.name}: 'warnings' holds entries that are not text: ignored")
    arrays = info.get("arrays")
    if arrays is not None:
        ok = {a: v for a, v in arrays.items() if isinstance(v, dict) and isinstance(v.get("dtype"), str)
              and isinstance(v.get("shape"), list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                                                          for x in v["shape"])} if isinstance(arrays, dict) else {}
        if len(ok) != (len(arrays) if isinstance(arrays, dict) else -1):
            notes.append(f"{path.name}: {len(arrays) - len(ok) if isinstance(arrays, dict) else 'all'} arrays have no "
                         "usable shape or dtype (shape null, not a list of ints ≥ 0, or dtype not a string): "
                         "their kernels have no floor")
        info["arrays"] = ok
    regions = info.get("compiled")
    if regions is not None:
        ok = {k: v for k, v in regions.items() if isinstance(v, list) and all(isinstance(x, str) for x in v)} \
            if isinstance(regions, dict) else {}
        if len(ok) != (len(regions) if isinstance(regions, dict) else -1):
            notes.append(f"{path.name}: malformed 'compiled' regions ignored (their fused ops come from the label)")
        info["compiled"] = ok
    for key in ("device_type", "device_name", "call"):
        if info.get(key) is not None and not isinstance(info[key], str):
            notes.append(f"{path.name}: {key} is a {type(info[key]).__name__}, not a string: ignored")
            info[key] = None
    info["warnings"] = notes
    return info


class Notes:
    """Counts of what the loader skipped or dropped, turned into one warning each."""

    def __init__(self):
        self.counts: dict[str, int] = {}

    def add(self, what: str, n: int = 1) -> None:
        self.counts[what] = self.counts.get(what, 0) + n

    def warnings(self) -> list[str]:
        """One line per kind of note, ``{n}`` in its text replaced by the count."""
        return [what.replace("{n}", str(n)) for what, n in self.counts.items()]
