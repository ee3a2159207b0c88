"""``tracekit compare`` for people and spreadsheets: the compare document (``report.compare``) as text
that fits 80 columns, as Markdown and as CSV."""

from __future__ import annotations

import csv
import io

from tracekit.report.compare import PER_STEP
from tracekit.report.devices_view import times, us3
from tracekit.report.fmt import clip, compact_name

TIME_KEYS = {"kernel_us", "floor_us", "one_kernel_floor_us"}
RATIO_KEYS = {"measured_over_floor", "measured_over_one_kernel"}


def cell(key: str, value) -> str:
    if value is None:
        return "-"
    if key in TIME_KEYS:
        return us3(value)
    if key in RATIO_KEYS:
        return times(value)
    return f"{value:g}" if abs(value - round(value)) > 1e-9 else f"{value:.0f}"


def side_what(s: dict) -> str:
    what = [s["framework"], s["device"] or "unnamed device", f"spec {s['spec'] or 'none (no floors)'}",
            f"{s['steps']} step(s)" if s["framework"] != "mlx" else "one graph",
            None if s["timed"] else "no timings"]
    return ", ".join(x for x in what if x)


def side_line(tag: str, s: dict) -> str:
    return clip(f"{tag}: {s['path']} — {side_what(s)}", 80)


def fused_text(w: dict | None, names: bool = True, width: int = 200) -> str:
    """'mm+add: nvjet_…' — the side's fused-op sets and kernel names in one class."""
    if not w:
        return "-"
    ops = ", ".join(w["fused_op_sets"]) or "?"
    if not names:
        return clip(ops, width)
    kernels = ", ".join(compact_name(n, 40) for n in w["names"][:3]) + (" …" if len(w["names"]) > 3 else "")
    return clip(f"{ops}: {kernels}", width)


WORK_COLS = (("work", 12, "<"), ("side", 4, "<"), ("kernels", 7, ">"), ("time", 8, ">"), ("floor", 8, ">"),
             ("meas÷", 6, ">"))


def to_text(doc: dict) -> str:
    out = [side_line("A", doc["a"]), side_line("B", doc["b"]),
           "floors: each side on its own device spec; measured ÷ floor where it has times", "",
           f"{'per step (median)':<24}{'A':>14}{'B':>14}"]
    for key, label in PER_STEP:
        d = doc["per_step"][key]
        out.append(f"  {label:<22}{cell(key, d['a']):>14}{cell(key, d['b']):>14}")
    out += ["", "work matched by op (per step)"]
    used = sum(w for _, w, _ in WORK_COLS) + len(WORK_COLS)
    head = " ".join(f"{n:{a}{w}}" for n, w, a in WORK_COLS) + " fused ops: kernels"
    out.append(head)
    for row in doc["work"]:
        for tag in ("a", "b"):
            w = row[tag]
            first = row["work"] if tag == "a" else ("  by " + row["matched_by"].split()[0] if row["matched_by"] else "")
            cells = [clip(first, 12), tag.upper(), cell("kernels", w["kernels"]) if w else "0",
                     cell("kernel_us", w["kernel_us"]) if w else "-", cell("floor_us", w["floor_us"]) if w else "-",
                     cell("measured_over_floor", w["measured_over_floor"]) if w else "-"]
            line = " ".join(f"{c:{a}{width}}" for c, (_, width, a) in zip(cells, WORK_COLS))
            out.append((line + " " + fused_text(w, width=80 - used)).rstrip())
    return "\n".join(out) + "\n"


def to_markdown(doc: dict) -> str:
    from tracekit.report.markdown import md_code, md_table, md_text

    a, b = doc["a"], doc["b"]
    out = ["### tracekit compare", "", f"**A** {md_code(a['path'], 300)}: {md_text(side_what(a), 300)}  ",
           f"**B** {md_code(b['path'], 300)}: {md_text(side_what(b), 300)}", "",
           "Floors on each side's own device spec; measured ÷ floor where a side has kernel times.", ""]
    out += md_table(["per step (median)", "A", "B"], "lrr",
                    [[label, cell(k, doc["per_step"][k]["a"]), cell(k, doc["per_step"][k]["b"])]
                     for k, label in PER_STEP])
    rows = []
    for row in doc["work"]:
        for tag in ("a", "b"):
            w = row[tag]
            rows.append([md_text(row["work"]) if tag == "a" else md_text(f"by {row['matched_by']}" if row["matched_by"]
                                                                          else ""), tag.upper(),
                         cell("kernels", w["kernels"]) if w else "0", fused_text(w, names=False, width=120)
                         if w else "-", ", ".join(md_code(n, 50) for n in (w["names"] if w else [])[:4]) or "-",
                         cell("kernel_us", w["kernel_us"]) if w else "-", cell("floor_us", w["floor_us"]) if w else "-",
                         cell("measured_over_floor", w["measured_over_floor"]) if w else "-"])
    out += ["", "**Work matched by op** (per step)", ""]
    out += md_table(["work", "side", "kernels", "fused ops", "kernel names", "time", "floor", "measured ÷"],
                    "llrllrrr", [[r[0], r[1], r[2], md_text(r[3], 120), *r[4:]] for r in rows])
    return "\n".join(out) + "\n"


CSV_FIELDS = ["section", "key", "side", "path", "spec", "kernels", "fused_ops", "kernel_us", "floor_us",
              "one_kernel_floor_us", "measured_over_floor", "measured_over_one_kernel", "matched_by", "fused_op_sets",
              "names"]


def to_csv(doc: dict) -> str:
    """Per side one ``per_step`` row (the medians) and one ``work`` row per class it runs."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for tag in ("a", "b"):
        side = doc[tag]
        w.writerow({"section": "per_step", "key": "median", "side": tag.upper(), "path": side["path"],
                    "spec": side["spec"], **{k: doc["per_step"][k][tag] for k, _ in PER_STEP}})
    for row in doc["work"]:
        for tag in ("a", "b"):
            x = row[tag]
            if not x:
                continue
            w.writerow({"section": "work", "key": row["work"], "side": tag.upper(), "path": doc[tag]["path"],
                        "spec": doc[tag]["spec"], "kernels": x["kernels"], "fused_ops": x["fused_ops"],
                        "kernel_us": x["kernel_us"], "floor_us": x["floor_us"],
                        "measured_over_floor": x["measured_over_floor"], "matched_by": row["matched_by"],
                        "fused_op_sets": " ".join(x["fused_op_sets"]), "names": " | ".join(x["names"])})
    return buf.getvalue()
