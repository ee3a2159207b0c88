"""Inline SVG charts for the HTML report: the roofline, the no-FLOP bandwidth strip and the per-step
timeline. Plain SVG written here (no JavaScript, no library, nothing fetched): hover text is each
mark's ``<title>``; every mark carries its numbers as ``data-`` attributes (tests read them back).
"""

from __future__ import annotations

import math
from html import escape

import pandas as pd

from tracekit.report.fmt import clip, compact_name, fmt_count, fmt_gap, fmt_us

COLORS = {"gemm": "#1f77b4", "gemv": "#6baed6", "conv": "#9467bd", "attention": "#d62728", "elementwise": "#ff7f0e",
          "reduction": "#2ca02c", "norm": "#17becf", "softmax": "#e377c2", "triton": "#bcbd22", "memcpy": "#8c564b",
          "memset": "#c49c94", "communication": "#7f7f7f", "other": "#393b79"}
W, H = 860, 440                   # roofline plot size
LEFT, RIGHT, TOP, BOTTOM = 84, 150, 16, 44


def _cls(category) -> str:
    """The colour class of a category (``c-gemm``...); a category without a colour is drawn as other."""
    return str(category) if str(category) in COLORS else "other"


def color(category) -> str:
    return COLORS.get(str(category), "#555")


def _a(s) -> str:
    return escape(str(s), quote=True)


def _rate(x: float, unit: str) -> str:
    return fmt_count(x) + unit


def _decade(d: int, unit: str = "") -> str:
    """A power of ten for a tick: 0.01, 0.1, 1, 10, 100, 1k ... 1P, then the unit."""
    if d < 0:
        return f"{10.0 ** d:.{-d}f}{unit}"
    prefix = ["", "k", "M", "G", "T", "P", "E"][min(d // 3, 6)]
    return f"{10 ** (d - 3 * min(d // 3, 6))}{prefix}{unit}"


def _decades(lo: float, hi: float) -> tuple[int, int]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return a, b if b > a else a + 1


class LogAxes:
    """Maps (x, y) in data units onto a log-log plot area."""

    def __init__(self, x: tuple[int, int], y: tuple[int, int], w: int = W, h: int = H):
        self.x, self.y, self.w, self.h = x, y, w, h

    def px(self, v: float) -> float:
        return LEFT + (math.log10(v) - self.x[0]) / (self.x[1] - self.x[0]) * (self.w - LEFT - RIGHT)

    def py(self, v: float) -> float:
        return TOP + (self.y[1] - math.log10(v)) / (self.y[1] - self.y[0]) * (self.h - TOP - BOTTOM)

    def grid(self, xlabel: str, ylabel: str, xunit: str, yunit: str) -> list[str]:
        out = []
        x0, x1, y0, y1 = LEFT, self.w - RIGHT, TOP, self.h - BOTTOM
        for d in range(self.x[0], self.x[1] + 1):
            p = self.px(10.0 ** d)
            out.append(f'<line class="grid" x1="{p:.1f}" y1="{y0}" x2="{p:.1f}" y2="{y1}"/>'
                       f'<text class="tick" x="{p:.1f}" y="{y1 + 14}" text-anchor="middle">{_a(_decade(d, xunit))}</text>')
        for d in range(self.y[0], self.y[1] + 1):
            p = self.py(10.0 ** d)
            out.append(f'<line class="grid" x1="{x0}" y1="{p:.1f}" x2="{x1}" y2="{p:.1f}"/>'
                       f'<text class="tick" x="{x0 - 4}" y="{p + 4:.1f}" text-anchor="end">{_a(_decade(d, yunit))}</text>')
        out.append(f'<rect class="frame" x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}"/>')
        out.append(f'<text class="axis" x="{(x0 + x1) / 2}" y="{self.h - 8}" text-anchor="middle">{_a(xlabel)}</text>')
        out.append(f'<text class="axis" transform="translate(14 {(y0 + y1) / 2}) rotate(-90)" '
                   f'text-anchor="middle">{_a(ylabel)}</text>')
        return out


def _radius(dur: float, total: float) -> float:
    return 3.0 + 16.0 * math.sqrt(max(dur, 0.0) / total) if total > 0 else 4.0


def _title(r, extra: str) -> str:
    return "\n".join([compact_name(r.name, 90), f"op: {clip(r.op_name, 60)} · {r.category} · {r.dtype_s}",
                      f"shapes: {clip(r.shapes or '-', 90)}",
                      f"{r.count:.3g} per step, {fmt_us(r.dur_us)} per step; floor {fmt_us(r.floor_us)}, "
                      f"gap {fmt_gap(r.gap)}, bound {r.bound_s}", extra])


def plotted(groups: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Groups on the FLOP roofline (FLOPs and bytes known, timed) and on the bandwidth strip (bytes
    known, no FLOPs, timed); collectives (bound "link": their bytes cross the link, not memory) on neither."""
    if groups.empty:
        return groups, groups
    timed = (groups["dur_us"].fillna(0) > 0) & (groups["bound_s"] != "link" if "bound_s" in groups else True)
    has_bytes = groups["bytes"].fillna(0) > 0
    has_flops = groups["flops"].fillna(0) > 0
    return groups[timed & has_bytes & has_flops], groups[timed & has_bytes & ~has_flops]


def roofs(spec) -> list[tuple[float, str]]:
    """(TFLOP/s, label) per distinct peak of the spec, highest first: matrix and vector units per dtype."""
    by_value: dict[float, list[str]] = {}
    for dtype, value in (spec.peak_tflops or {}).items() if spec is not None else ():
        by_value.setdefault(float(value), []).append(dtype)
    return sorted(((v, "/".join(ds)) for v, ds in by_value.items()), reverse=True)


def roofline_svg(groups: pd.DataFrame, spec, total_us: float) -> str:
    """Log-log roofline: x arithmetic intensity (FLOP/byte), y achieved FLOP/s, the spec's roofs; one
    circle per kernel group, area by its share of kernel time."""
    pts, _ = plotted(groups)
    if pts.empty:
        return '<p class="note">No kernel group with both FLOPs and bytes: nothing to place on a roofline.</p>'
    ai = (pts["flops"] / pts["bytes"]).to_numpy(dtype=float)
    perf = (pts["flops"] / (pts["dur_us"] * 1e-6)).to_numpy(dtype=float)
    bw = spec.bandwidth_gbs * 1e9 if spec is not None and spec.bandwidth_gbs else None
    peaks = roofs(spec)
    top = max([p * 1e12 for p, _ in peaks] + [perf.max()])
    ridge_hi = max([p * 1e12 / bw for p, _ in peaks] if bw else [1.0])
    ax = LogAxes(_decades(min(ai.min(), 1.0) / 2, max(ai.max(), ridge_hi) * 4), _decades(perf.min() / 2, top * 1.5))
    out = [f'<svg class="chart" id="roofline" viewBox="0 0 {W} {H}" '
           f'width="{W}" height="{H}" data-xmin="{ax.x[0]}" data-xmax="{ax.x[1]}" data-ymin="{ax.y[0]}" '
           f'data-ymax="{ax.y[1]}" data-left="{LEFT}" data-right="{W - RIGHT}" data-top="{TOP}" '
           f'data-bottom="{H - BOTTOM}">']
    out += ax.grid("arithmetic intensity (FLOP per minimal byte)", "achieved FLOP/s", "", "")
    xmin, xmax = 10.0 ** ax.x[0], 10.0 ** ax.x[1]
    if bw:
        hi = peaks[0][0] * 1e12 / bw if peaks else xmax
        lo = max(xmin, 10.0 ** ax.y[0] / bw)
        out.append(f'<line class="roof bw" x1="{ax.px(lo):.1f}" y1="{ax.py(lo * bw):.1f}" x2="{ax.px(hi):.1f}" '
                   f'y2="{ax.py(hi * bw):.1f}"><title>{_a(f"memory bandwidth {spec.bandwidth_gbs:g} GB/s")}</title></line>')
        out.append(f'<text class="rooflabel" x="{ax.px(lo) + 4:.1f}" y="{ax.py(lo * bw) - 6:.1f}">'
                   f'{_a(f"{spec.bandwidth_gbs / 1e3:g} TB/s")}</text>')
    last = -1e9
    for value, label in peaks:                       # highest first; labels kept 11 px apart
        y, start = value * 1e12, (value * 1e12 / bw if bw else xmin)
        ly = last = max(ax.py(y) + 4, last + 11)
        out.append(f'<line class="roof" x1="{ax.px(max(start, xmin)):.1f}" y1="{ax.py(y):.1f}" x2="{W - RIGHT}" '
                   f'y2="{ax.py(y):.1f}"><title>{_a(f"{label}: {value:g} TFLOP/s")}</title></line>'
                   f'<text class="rooflabel" x="{W - RIGHT + 4}" y="{ly:.1f}">{_a(f"{label} {value:g} T")}</text>')
    order = pts.assign(ai_=ai, perf_=perf).sort_values("dur_us", ascending=False)
    for r in order.itertuples():
        extra = f"{r.ai_:.3g} FLOP/byte, achieved {_rate(r.perf_, 'FLOP/s')}"
        out.append(f'<circle cx="{ax.px(r.ai_):.1f}" cy="{ax.py(r.perf_):.1f}" '
                   f'r="{_radius(r.dur_us, total_us):.1f}" class="mark c-{_cls(r.category)}" data-category="{_a(r.category)}" '
                   f'data-ai="{r.ai_:.6g}" data-perf="{r.perf_:.6g}" data-us="{r.dur_us:.6g}">'
                   f'<title>{_a(_title(r, extra))}</title></circle>')
    out.append("</svg>")
    return "".join(out)


def bandwidth_svg(groups: pd.DataFrame, spec, total_us: float) -> str:
    """Kernel groups that move bytes but do no FLOPs (copies, fills, indexing): achieved bytes/s on a
    log axis against the memory bandwidth, one row per category."""
    _, pts = plotted(groups)
    if pts.empty:
        return ""
    rate = (pts["bytes"] / (pts["dur_us"] * 1e-6)).to_numpy(dtype=float)
    bw = spec.bandwidth_gbs * 1e9 if spec is not None and spec.bandwidth_gbs else None
    cats = list(dict.fromkeys(pts["category"].astype(str)))
    h = TOP + BOTTOM + 26 * len(cats) + 10
    lo, hi = _decades(rate.min() / 2, max(rate.max(), bw or 0) * 2)
    ax = LogAxes((lo, hi), (0, 1), W, h)
    out = [f'<svg class="chart" id="bandwidth" viewBox="0 0 {W} {h}" width="{W}" '
           f'height="{h}">']
    x0, x1, y1 = LEFT, W - RIGHT, h - BOTTOM
    for d in range(lo, hi + 1):
        p = ax.px(10.0 ** d)
        out.append(f'<line class="grid" x1="{p:.1f}" y1="{TOP}" x2="{p:.1f}" y2="{y1}"/><text class="tick" '
                   f'x="{p:.1f}" y="{y1 + 14}" text-anchor="middle">{_a(_decade(d, "B/s"))}</text>')
    out.append(f'<rect class="frame" x="{x0}" y="{TOP}" width="{x1 - x0}" height="{y1 - TOP}"/>')
    out.append(f'<text class="axis" x="{(x0 + x1) / 2}" y="{h - 8}" text-anchor="middle">achieved bytes/s '
               '(minimal bytes / time)</text>')
    row = {c: TOP + 18 + 26 * i for i, c in enumerate(cats)}
    for c, y in row.items():
        out.append(f'<text class="tick" x="{x0 - 4}" y="{y + 4}" text-anchor="end">{_a(c)}</text>')
    if bw:
        out.append(f'<line class="roof bw" x1="{ax.px(bw):.1f}" y1="{TOP}" x2="{ax.px(bw):.1f}" y2="{y1}"/>'
                   f'<text class="rooflabel" x="{ax.px(bw) + 4:.1f}" y="{TOP + 12}">'
                   f'{_a(f"{spec.bandwidth_gbs / 1e3:g} TB/s")}</text>')
    for r, v in sorted(zip(pts.itertuples(), rate), key=lambda t: -t[0].dur_us):
        extra = f"{fmt_count(r.bytes)}B per step, achieved {_rate(v, 'B/s')}"
        out.append(f'<circle cx="{ax.px(v):.1f}" cy="{row[str(r.category)]}" '
                   f'r="{min(_radius(r.dur_us, total_us), 12):.1f}" class="mark c-{_cls(r.category)}" '
                   f'data-category="{_a(r.category)}" data-bps="{v:.6g}" data-us="{r.dur_us:.6g}">'
                   f'<title>{_a(_title(r, extra))}</title></circle>')
    out.append("</svg>")
    return "".join(out)


def timeline_svg(trace, steps: list, width: int = W) -> str:
    """One row per step (and stream), kernels coloured by category over the step's GPU span, all rows
    on one time scale; the grey between them is the GPU idle. Kernels closer than a pixel with the same
    category are drawn as one bar (its title says how many)."""
    df = trace.kernels
    rows = []
    for st in steps:
        sk = df[df["step"] == st.index].dropna(subset=["dur_us"]).sort_values("start_us")
        if len(sk):
            rows.append((st, sk))
    if not rows:
        return ""
    span = max(float((sk["start_us"] + sk["dur_us"]).max() - sk["start_us"].min()) for _, sk in rows) or 1.0
    plot_w = width - LEFT - 40
    scale = plot_w / span
    lanes = [(st, stream, sk[sk["stream"] == stream]) for st, sk in rows for stream in
             sorted(sk["stream"].unique().tolist())[:3]]
    h = 24 + 30 * len(lanes) + 28
    out = [f'<svg class="chart" id="timeline" viewBox="0 0 {width} {h}" '
           f'width="{width}" height="{h}">']
    for i in range(5):
        x = LEFT + plot_w * i / 4
        out.append(f'<line class="grid" x1="{x:.1f}" y1="16" x2="{x:.1f}" y2="{h - 26}"/><text class="tick" '
                   f'x="{x:.1f}" y="{h - 12}" text-anchor="middle">{_a(fmt_us(span * i / 4))}</text>')
    for k, (st, stream, lk) in enumerate(lanes):
        y = 24 + 30 * k
        t0 = float(df[(df["step"] == st.index)]["start_us"].min())
        end = float((lk["start_us"] + lk["dur_us"]).max() - t0) * scale
        out.append(f'<text class="tick" x="{LEFT - 4}" y="{y + 13}" text-anchor="end">'
                   f'{_a(str(st.name).replace("ProfilerStep", "step "))} s{stream}</text>')
        out.append(f'<rect class="idle" x="{LEFT}" y="{y}" width="{max(end, 1):.1f}" height="18"><title>GPU idle '
                   'where no kernel is drawn</title></rect>')
        out += _bars(lk, t0, scale, y)
    out.append("</svg>")
    return "".join(out)


def _bars(lk: pd.DataFrame, t0: float, scale: float, y: float) -> list[str]:
    out, cur = [], None
    for name, cat, s, d in zip(lk["name"], lk["category"], lk["start_us"], lk["dur_us"]):
        x0, x1 = (float(s) - t0) * scale, (float(s) + float(d) - t0) * scale
        if cur is not None and cur["cat"] == cat and x0 - cur["x1"] < 1.0:
            cur["x1"], cur["n"], cur["us"], cur["end"] = max(cur["x1"], x1), cur["n"] + 1, cur["us"] + float(d), s + d
            continue
        if cur is not None:
            out.append(_bar(cur, y))
        cur = {"cat": cat, "x0": x0, "x1": x1, "n": 1, "us": float(d), "name": name, "start": s, "end": s + d}
    if cur is not None:
        out.append(_bar(cur, y))
    return out


def _bar(b: dict, y: float) -> str:
    """One bar: a kernel, or kernels of one category closer than a pixel (short title: the page stays small)."""
    if b["n"] == 1:
        title = f"{compact_name(b['name'], 40)} {fmt_us(b['us'])}"
    else:
        title = f"{b['n']} {b['cat']}: {fmt_us(b['us'])} in {fmt_us(b['end'] - b['start'])}"
    return (f'<rect x="{LEFT + b["x0"]:.1f}" y="{y}" width="{max(b["x1"] - b["x0"], 0.8):.1f}" height="18" '
            f'class="c-{_cls(b["cat"])}"><title>{_a(title)}</title></rect>')


def category_css() -> str:
    """Fill of the timeline's bars by category (a class each, so a bar does not repeat its colour)."""
    return "".join(f".c-{c}{{fill:{v}}}" for c, v in COLORS.items())


def legend(categories) -> str:
    return "".join(f'<span class="key"><i style="background:{color(c)}"></i>{_a(c)}</span>' for c in categories)
