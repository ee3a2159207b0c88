"""A calibration as a device spec file (the format of docs/devices.md, every number ``kind = "measured"``
or ``"device"``, what was left out under ``[skipped]``), and the measured figures set beside the
builtin spec that matches the device."""

from __future__ import annotations

import textwrap

from tracekit.calibrate.figures import ALL_KEYS, VALUE_RULE, Calibration, unit_of
from tracekit.cost.devices import DeviceSpec, match_device, sane_range

SECTIONS = ("peak", "memory", "launch")
NOISY_PCT = 10           # interquartile range over median above which the table calls a figure noisy


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def spec_toml(cal: Calibration, spec_id: str, name: str | None = None) -> str:
    """The spec file's text: top keys, [peak] [memory] [launch] with a source per number, [skipped]."""
    context = cal.context()
    quick = " --quick: sizes too small to be roofs, for tests only." if cal.quick else ""
    notes = (f"Roofs measured by `tracekit calibrate` on this machine, not datasheet peaks: gaps against them "
             f"are attainable gaps. {cal.device} ({cal.backend}), {cal.date}; "
             + ", ".join(f"{k} {v}" for k, v in cal.versions.items())
             + f". Each source says the work, sizes, batches, best and median; {VALUE_RULE}.{quick}")
    lines = [f"id = {toml_string(spec_id)}",
             f"name = {toml_string(name or cal.device + ' (measured)')}",
             f"vendor = {toml_string(cal.vendor)}",
             "match = []   # measured: never picked by device name; pass this file with --spec",
             f"notes = {toml_string(notes)}"]
    by_section: dict[str, list[str]] = {s: [] for s in SECTIONS}
    skipped = dict(cal.skipped)
    for fig in sorted(cal.figures, key=lambda f: ALL_KEYS.index(f.key)):
        section, key = fig.key.split(".", 1)
        low, high, unit = sane_range(section, key)
        if not low <= fig.value <= high:               # a spec with it would be refused on load
            skipped[fig.key] = (f"measured {fig.value:g} {unit}, outside the sane range {low:g} to {high:g} "
                                f"{unit} (docs/limits.md)")
            continue
        by_section[section].append(f"{key} = {{ value = {_number(fig.value)}, kind = {toml_string(fig.kind)}, "
                                   f"source = {toml_string(fig.source(context))} }}")
    for section in SECTIONS:
        if by_section[section]:
            lines += ["", f"[{section}]", *by_section[section]]
    if skipped:
        lines += ["", "[skipped]   # not measured here, and why (tracekit reads these; they set no number)"]
        lines += [f"{toml_string(k)} = {toml_string(v)}" for k, v in sorted(skipped.items(),
                                                                            key=lambda kv: ALL_KEYS.index(kv[0]))]
    return "\n".join(lines) + "\n"


def builtin_value(spec: DeviceSpec, key: str) -> float | None:
    """The builtin spec's number for a measured key: a matrix rate as ``matmul_peak`` reads it (fp64 ->
    fp64_tensor where listed), the elementwise figure against the memory bandwidth."""
    section, name = key.split(".", 1)
    if section == "peak":
        return spec.matmul_peak(name)
    return {"memory.bandwidth_gbs": spec.bandwidth_gbs, "memory.elementwise_gbs": spec.bandwidth_gbs,
            "memory.l2_bytes": spec.l2_bytes, "launch.kernel_us": spec.launch_us}.get(key)


def compare(values: dict[str, float], spec: DeviceSpec) -> list[dict]:
    """One row per measured key: measured, the builtin's value, measured / builtin, and whether the
    builtin's own number is a measurement rather than a datasheet figure."""
    rows = []
    for key in ALL_KEYS:
        if key not in values:
            continue
        ref = builtin_value(spec, key)
        rows.append({"key": key, "measured": values[key], "builtin": ref,
                     "ratio": (values[key] / ref) if ref else None,
                     "builtin_measured": spec.kinds.get("memory.bandwidth_gbs" if key == "memory.elementwise_gbs"
                                                        else key) == "measured"})
    return rows


def matching_builtin(cal: Calibration) -> DeviceSpec | None:
    """The builtin spec ``match_device`` picks for the device's properties (None: none or several)."""
    return match_device(cal.properties)


def table(cal: Calibration, builtin: DeviceSpec | None, wrote: str | None) -> str:
    """The human report: measured (best), median, the builtin spec's figure and the ratio; what was left
    out and why; where the spec went. Fits 80 columns."""
    out = [f"tracekit calibrate: {cal.device} ({cal.backend}), {cal.date}",
           "  " + ", ".join(f"{k} {v}" for k, v in cal.versions.items())]
    if cal.quick:
        out.append("  --quick: small sizes, few repeats (for tests): not roofs")
    if builtin is None:
        out += textwrap.wrap(f"no builtin spec matches '{cal.device[:40]}': no datasheet figures to set "
                             "beside these (specs with match = [], such as cpu and h200-measured, are used only "
                             "when asked for)", 78, initial_indent="  ", subsequent_indent="  ")
        rows = [{"key": f.key, "measured": f.value, "builtin": None, "ratio": None, "builtin_measured": False}
                for f in sorted(cal.figures, key=lambda f: ALL_KEYS.index(f.key))]
    else:
        out.append(f"  beside: builtin spec '{builtin.id}' ({builtin.name[:40]})")
        rows = compare(cal.values(), builtin)
    median = {f.key: f.median for f in cal.figures}
    ref_head = builtin.id[:12] if builtin else "builtin"
    out += ["", f"{'key':22} {'best':>10} {'unit':7} {'median':>10} {ref_head:>12} {'ratio':>6}"]
    starred = False
    for r in rows:
        ref = "-" if r["builtin"] is None else f"{r['builtin']:.4g}" + ("*" if r["builtin_measured"] else "")
        starred |= r["builtin_measured"] and r["builtin"] is not None
        b = median.get(r["key"])
        b_text = "-" if b is None else f"{b:.4g}"
        value = f"{r['measured']:.0f}" if r["key"] == "memory.l2_bytes" else f"{r['measured']:.4g}"
        ref = f"{r['builtin']:.0f}" if r["key"] == "memory.l2_bytes" and r["builtin"] else ref
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        out.append(f"{r['key']:22} {value:>10} {unit_of(r['key']):7} {b_text:>10} {ref:>12} {ratio:>6}")
    out.append("")
    out.append("best: the fastest batch (the spec's value); median: sustained over the batches")
    if builtin:
        out.append(f"ratio: best / {builtin.id}'s figure (matrix rates as its matmul_peak reads them)")
    if starred:
        out.append("* the builtin's own number is a measurement, not a datasheet figure")
    noisy = [f.key for f in cal.figures if f.sample is not None and (f.sample.spread_pct or 0) > NOISY_PCT]
    if noisy:
        out += textwrap.wrap(f"noisy (batches spread over {NOISY_PCT}% of the median): {', '.join(noisy)}; was "
                             "the device busy? Run again on an idle machine", 78)
    if cal.skipped:
        out.append("left out:")
        for key, reason in sorted(cal.skipped.items(), key=lambda kv: ALL_KEYS.index(kv[0])):
            out += textwrap.wrap(f"{key}: {reason}", 78, initial_indent="  ", subsequent_indent="    ")
    if wrote:
        out += [f"wrote {wrote}", "  (give it to explain, check or diff as --spec FILE)"]
    return "\n".join(line.rstrip() for line in out) + "\n"
