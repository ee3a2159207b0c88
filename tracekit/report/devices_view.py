"""``explain --devices`` for people and spreadsheets: the ``devices`` section (``report.devices``) as a
plain-text table that fits 80 columns (devices as rows, one block per group of alike steps and per top
kernel group), as Markdown, and as CSV (one row per step or kernel group and device)."""

from __future__ import annotations

import csv
import io
import math
import re

from tracekit.report.fmt import clip, compact_name

KIND = {"datasheet": "D", "measured": "M", None: "-"}
LEGEND = ("roof: compute/bandwidth roof, D datasheet, M measured, - none; * the trace's device (only it has "
          "meas÷: costed kernel time ÷ the floor left of it); ridge in FLOP/byte; times in µs")


def sig3(x, sep: str = "") -> str:
    """A number to 3 significant digits (1.46, 8.55, 206, 1.2k, 269M, 2.81T), '-' for none; ``sep`` goes between
    the number and a k/M/G suffix."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale * 0.9995:
            return f"{_g3(x / scale)}{sep}{suffix}"
    return _g3(x) if abs(x) >= 0.01 or x == 0 else f"{x:.1g}"


def _g3(x: float) -> str:
    """3 significant digits, trailing zeros kept (12.0, 1.50, 206)."""
    return f"{x:#.3g}".rstrip(".")


def bytes3(x) -> str:
    """Bytes to 3 significant digits: '2.62 MB', '512 B'."""
    s = sig3(x, " ")
    return s if s == "-" else (s + "B" if s[-1].isalpha() else s + " B")


def us3(x, unit: bool = True) -> str:
    """µs (the unit of every time tracekit writes) to 3 significant digits, whole µs with separators
    from 1,000 and M from a million: '0.547 µs', '1.46 µs', '1,850 µs', '1.23M µs'; without ``unit``
    the number alone, for the 80-column table whose legend says µs."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "0"
    if x >= 999_999.5:
        text = f"{_g3(x / 1e6)}M"
    elif x >= 999.5:
        text = f"{x:,.0f}"
    elif x < 0.0009995:
        text = "<0.001"
    else:
        text = _g3(x)
    return f"{text} µs" if unit else text


def times(x) -> str:
    if x is None:
        return "-"
    return f"{x:.1f}×" if x < 100 else f"{x:.0f}×"


def roof_cell(d: dict) -> str:
    return f"{KIND.get(d.get('compute_roof'), '-')}/{KIND.get(d.get('memory_roof'), '-')}"


def device_cell(d: dict, width: int = 13) -> str:
    return clip(d["spec"], width - 1) + ("*" if d["trace_device"] else "")


def step_label(group: dict, names=None) -> str:
    """The steps a block shows, by the names the trace gives them (``names``: step index → name, ``.get``),
    else by index: 'ProfilerStep#3', 'ProfilerStep#2–4, alike', 'warmup … step_9 (5 alike)'. Reads the
    names one at a time (a group may hold 100k steps)."""
    s = group["steps"]
    if names:
        def label(i) -> str:
            return clip(str(names.get(i, f"step {i}")), 32)
        first = label(s[0])
        if len(s) == 1:
            return first
        head = re.fullmatch(r"(.*?)(\d+)", first)
        if head is not None and _numbered_run(map(label, s), head.group(1), int(head.group(2))):
            return f"{first}–{int(head.group(2)) + len(s) - 1}, alike"                # ProfilerStep#2–4, alike
        return (f"{first}, {label(s[1])}" if len(s) == 2 else f"{first} … {label(s[-1])}") + f" ({len(s)} alike)"
    if len(s) == 1:
        return f"step {s[0]}"
    run = s == list(range(s[0], s[0] + len(s)))
    return (f"steps {s[0]}-{s[-1]}" if run else "steps " + ",".join(map(str, s[:6])) + ("…" if len(s) > 6 else "")) \
        + f" ({len(s)} alike)"


def _numbered_run(labels, prefix: str, start: int) -> bool:
    """Every label is ``prefix`` and the next number from ``start`` on."""
    for k, text in enumerate(labels):
        m = re.fullmatch(r"(.*?)(\d+)", text)
        if m is None or m.group(1) != prefix or int(m.group(2)) != start + k:
            return False
    return True


STEP_COLS = (("device", 13, "<"), ("roof", 4, "<"), ("compute", 7, ">"), ("memory", 7, ">"), ("bound", 7, "<"),
             ("ridge", 5, ">"), ("1 kernel", 8, ">"), ("meas÷", 5, ">"), ("floor sum", 9, ">"), ("meas÷", 5, ">"))
KERNEL_COLS = (("device", 13, "<"), ("roof", 4, "<"), ("compute", 7, ">"), ("memory", 7, ">"), ("bound", 7, "<"),
               ("ridge", 5, ">"), ("floor", 8, ">"), ("meas÷", 5, ">"))


def _line(cols, cells) -> str:
    return " ".join(f"{c:{a}{w}}" for (_, w, a), c in zip(cols, cells)).rstrip()


def _step_cells(d: dict, unit: bool = True) -> list[str]:
    return [device_cell(d), roof_cell(d), us3(d["compute_us"], unit), us3(d["memory_us"], unit), d["bound"] or "-",
            sig3(d["ridge"]), us3(d["one_kernel_floor_us"], unit), times(d["measured_over_one_kernel"]),
            us3(d["floor_sum_us"], unit), times(d["measured_over_floor_sum"])]


def _kernel_cells(d: dict, unit: bool = True) -> list[str]:
    return [device_cell(d), roof_cell(d), us3(d["compute_us"], unit), us3(d["memory_us"], unit), d["bound"] or "-",
            sig3(d["ridge"]), us3(d["floor_us"], unit), times(d["measured_over_floor"])]


def _roofs_text(s: dict, step: dict | None) -> str:
    """A spec's compute roof for the step's main dtype and its bandwidth, each marked D or M."""
    roofs = s["roofs"]
    d = next((d for d in (step or {}).get("devices", []) if d["spec"] == s["id"]), {})
    key = d.get("peak_key")
    peak = roofs.get(f"peak.{key}") if key else None
    bw = roofs.get("memory.bandwidth_gbs")
    used = f"{key} for {step['dtype']}" if d.get("peak_stand_in") and step.get("dtype") else key
    return ", ".join([f"{used} {peak['tflops']:g} TFLOP/s {KIND[peak['kind']]}" if peak else "no rate for the step's dtype",
                      f"{bw['gbs']:g} GB/s {KIND[bw['kind']]}" if bw else "no bandwidth"])


def _spec_line(s: dict, step: dict | None) -> str:
    return clip(f"  {s['id'] + ('*' if s['trace_device'] else ''):<14}{_roofs_text(s, step)}  {s['name']}", 80)


class _Names:
    """Step index → the step's name, for the steps of a devices section, read from its rows when asked
    (a dict of 100k names took 8 MB): the row at the index's position when it is that step's, else a
    dict made once."""

    def __init__(self, steps):
        self.steps, self.by_index = steps, None

    def __bool__(self) -> bool:
        return any(s.get("name") for s in self.steps[:1])

    def get(self, i, default=None):
        steps = self.steps
        if isinstance(i, int) and 0 <= i < len(steps) and steps[i]["step"] == i:
            return steps[i].get("name") or default
        if self.by_index is None:
            self.by_index = {s["step"]: s.get("name") for s in steps if s.get("name")}
        return self.by_index.get(i, default)


def _names(section: dict) -> _Names:
    return _Names(section["steps"])


def _first_steps(section: dict, group: dict) -> dict:
    first = group["steps"][0]
    return next(s for s in section["steps"] if s["step"] == first)


def _step_head(step: dict, group: dict, names: dict | None = None) -> list[str]:
    """Two lines: the step(s), kernels, fused ops and measured time; the work and what one kernel moves."""
    measured = f"; measured {us3(group['costed_us_median'])} per step" if group["costed_us_median"] is not None else ""
    work = f"  work: {sig3(step['flops'])} FLOPs" + (f" ({step['dtype']} {step['compute_unit'] or ''})".replace(" )", ")")
                                                   if step["dtype"] else "")
    if step["one_kernel_bytes"]:
        work += f", one kernel moves {bytes3(step['one_kernel_bytes'])}"
        work += f" ({sig3(step['intensity'])} FLOP/B)" if step["intensity"] else ""
    kernels = f"{step['kernels']} kernel" + ("" if step["kernels"] == 1 else "s")
    return [clip(f"{step_label(group, names)}: {kernels}, {step['fused_ops']} fused ops{measured}", 80),
            clip(work, 80)]


def kernel_title(k: dict, width: int = 80) -> str:
    """One line: the kernel's short name, its op (when not the name itself), dtype and unit, count and time."""
    op = k["op"].removeprefix("aten::") if k["op"] and k["op"] != k["name"] else None
    what = ", ".join(x for x in (op, f"{k['dtype']} {k['compute_unit']}" if k["dtype"] else None) if x)
    tail = (f" ({what})" if what else "") + f", {k['count_per_step']:g}/step" + (
        f", {us3(k['dur_us_per_step'])}" if k["dur_us_per_step"] is not None else "")
    return clip(compact_name(k["name"], max(20, width - len(tail))) + tail, width)


def to_text(sections: list[dict], labels: list[str]) -> str:
    """The table view of each trace's section (``labels``: one header line per trace)."""
    out = []
    for section, label in zip(sections, labels):
        first = section["steps"][0] if section["steps"] else None
        out += [clip(label, 80), "devices (own first; roofs for the step's main dtype):"]
        out += [_spec_line(s, first) for s in section["specs"]]
        out += _wrap(LEGEND) + [""]
        for group in section["step_groups"]:
            step = _first_steps(section, group)
            out += _step_head(step, group, _names(section))
            out.append(_line(STEP_COLS, [c for c, _, _ in STEP_COLS]))
            out += [_line(STEP_COLS, _step_cells(d, unit=False)) for d in step["devices"]]
            out.append("")
        if section["kernels"]:
            out.append("top kernels (per step):")
        for k in section["kernels"]:
            out.append(kernel_title(k))
            out.append(_line(KERNEL_COLS, [c for c, _, _ in KERNEL_COLS]))
            out += [_line(KERNEL_COLS, _kernel_cells(d, unit=False)) for d in k["devices"]] + [""]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _wrap(text: str, width: int = 80) -> list[str]:
    import textwrap
    return textwrap.wrap(text, width, subsequent_indent="  ") or [""]


def to_markdown(sections: list[dict], labels: list[str]) -> str:
    from tracekit.report.markdown import md_code, md_table, md_text

    out = []
    for section, label in zip(sections, labels):
        out += [f"### tracekit explain --devices: {md_text(label, 200)}", "", md_text(LEGEND, 400), ""]
        first = section["steps"][0] if section["steps"] else None
        out += md_table(["device", "name", "roofs (step's main dtype)"], "lll",
                        [[md_text(s["id"] + ("*" if s["trace_device"] else ""), 40), md_text(s["name"], 60),
                          md_text(_roofs_text(s, first), 120)] for s in section["specs"]]) + [""]
        for group in section["step_groups"]:
            step = _first_steps(section, group)
            out += [f"**{md_text(' — '.join(x.strip() for x in _step_head(step, group, _names(section))), 400)}**", ""]
            out += md_table(["device", "roof", "compute", "memory", "bound", "ridge (FLOP/B)", "one-kernel floor",
                             "measured ÷", "floor sum", "measured ÷"], "llrrlrrrrr",
                            [[md_text(c, 40) for c in _step_cells(d)] for d in step["devices"]]) + [""]
        if section["kernels"]:
            rows = [[md_code(compact_name(k["name"], 50)) if i == 0 else ""] + [md_text(c, 40) for c in _kernel_cells(d)]
                    for k in section["kernels"] for i, d in enumerate(k["devices"])]
            out += ["**Top kernels** (per step)", ""]
            out += md_table(["kernel", "device", "roof", "compute", "memory", "bound", "ridge (FLOP/B)", "floor",
                             "measured ÷"], "lllrrlrrr", rows) + [""]
    return "\n".join(out)


def to_html(section: dict, table) -> str:
    """One trace's floors on each device as HTML for the --html page (``table``: html's table writer)."""
    from html import escape

    first = section["steps"][0] if section["steps"] else None
    out = [f'<p class="note">{escape(LEGEND)}</p>',
           table(["device", "name", "roofs (step's main dtype)"],
                 [[s["id"] + ("*" if s["trace_device"] else ""), s["name"], _roofs_text(s, first)]
                  for s in section["specs"]], left=(0, 1, 2))]
    for group in section["step_groups"]:
        step = _first_steps(section, group)
        out.append(f"<h3>{escape(' — '.join(x.strip() for x in _step_head(step, group, _names(section))))}</h3>")
        out.append(table(["device", "roof", "compute", "memory", "bound", "ridge (FLOP/B)", "one-kernel floor",
                          "measured ÷", "floor sum", "measured ÷"], [_step_cells(d) for d in step["devices"]],
                         left=(0, 1, 4)))
    return "".join(out)


CSV_FIELDS = ["graph", "level", "steps", "name", "op", "dtype", "compute_unit", "count_per_step", "device",
              "trace_device", "compute_roof", "memory_roof", "peak_tflops", "ridge_flop_per_byte", "compute_us",
              "memory_us", "bound", "one_kernel_floor_us", "floor_us", "measured_us", "measured_over_one_kernel",
              "measured_over_floor"]


def to_csv(sections: list[dict]) -> str:
    """One row per (alike steps, device) and per (kernel group, device); floors per step."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for g, section in enumerate(sections):
        for group in section["step_groups"]:
            step = _first_steps(section, group)
            for d in step["devices"]:
                own = d["trace_device"]
                w.writerow(dict(graph=g, level="step", steps=" ".join(map(str, group["steps"])), name=step["name"],
                                dtype=step["dtype"], compute_unit=step["compute_unit"], count_per_step=step["kernels"],
                                **_common(d), one_kernel_floor_us=d["one_kernel_floor_us"], floor_us=d["floor_sum_us"],
                                measured_us=group["costed_us_median"] if own else None,
                                measured_over_one_kernel=group["measured_over_one_kernel_median"] if own else None,
                                measured_over_floor=group["measured_over_floor_sum_median"] if own else None))
        for k in section["kernels"]:
            for d in k["devices"]:
                w.writerow(dict(graph=g, level="kernel", name=k["name"], op=k["op"], dtype=k["dtype"],
                                compute_unit=k["compute_unit"], count_per_step=k["count_per_step"], **_common(d),
                                floor_us=d["floor_us"], measured_us=k["dur_us_per_step"] if d["trace_device"] else None,
                                measured_over_floor=d["measured_over_floor"]))
    return buf.getvalue()


def _common(d: dict) -> dict:
    return dict(device=d["spec"], trace_device=d["trace_device"], compute_roof=d["compute_roof"],
                memory_roof=d["memory_roof"], peak_tflops=d["peak_tflops"], ridge_flop_per_byte=d["ridge"],
                compute_us=d["compute_us"], memory_us=d["memory_us"], bound=d["bound"])


def write_devices(traces: list, docs: list[dict], specs: list, fmt: str, top: int) -> None:
    """explain --devices on stdout: JSON (each explain document with its ``devices`` key), CSV, Markdown
    or the table."""
    import sys

    import orjson

    from tracekit.outputs import json_chunks
    from tracekit.report.devices import devices_section

    sections = [devices_section(t, specs, top) for t in traces]
    if fmt == "json":
        for doc, section in zip(docs, sections):
            doc["devices"] = section
        doc = docs[0] if len(docs) == 1 else {"graphs": docs}
        for piece in json_chunks(doc, orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS):
            sys.stdout.buffer.write(piece)              # in pieces: 100k steps on two devices are 208 MB of JSON
        sys.stdout.buffer.write(b"\n")
        return
    if fmt == "csv":
        sys.stdout.write(to_csv(sections))
        return
    labels = [trace_label(t, i if len(traces) > 1 else None) for i, t in enumerate(traces)]
    sys.stdout.write(to_markdown(sections, labels) if fmt == "markdown" else to_text(sections, labels))


def trace_label(trace, graph: int | None = None) -> str:
    from pathlib import Path

    name = "/".join(Path(str(trace.path)).parts[-3:]) if graph is not None else Path(str(trace.path)).name
    spec = trace.spec.id if trace.spec is not None else "none"
    head = f"graph {graph}: " if graph is not None else ""
    return f"{head}{name}: ran on {trace.device_name or 'an unnamed device'} (spec {spec})"
