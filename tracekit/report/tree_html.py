"""The module tree in the HTML report (explain --by module --html): an icicle chart of the median step
(width: kernel time, colour: gap) and a collapsible tree (``<details>``, identical blocks folded). Built
from the explain document's ``modules`` key; every text escaped, no script, nothing fetched."""

from __future__ import annotations

import math
from html import escape

from tracekit.report.fmt import clip, fmt_gap, fmt_us, short_name

ICICLE_W, ROW_H = 1060, 22
ICICLE_LEVELS = 7                  # levels drawn below the root (kernels are the last level of a branch)
OPEN_LEVELS = 3                    # tree levels open when the page loads
MIN_PX = 0.6                       # narrower rectangles are not drawn
_SUMMED = ("kernels", "kernel_us", "floor_us", "costed_us", "above_floor_us", "above_floor_share", "fused_floor_us")

CSS = """
.icicle text{font-size:11px;fill:#111;pointer-events:none}.icicle rect{stroke:#fff;stroke-width:.5}
.mtree summary{cursor:pointer;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;white-space:nowrap}
.mtree details{margin:0 0 0 16px}.mtree>details{margin-left:0}.mtree .leaf{margin-left:32px;font-family:ui-monospace,
Menlo,Consolas,monospace;font-size:12px;white-space:nowrap}.mtree .fig{color:#555}
.gapkey{display:inline-block;width:140px;height:10px;vertical-align:-1px;
background:linear-gradient(90deg,hsl(120,55%,60%),hsl(60,55%,60%),hsl(0,55%,60%))}
"""


def _e(x) -> str:
    return escape(str(x), quote=True)


def gap_colour(gap) -> str:
    """Green at the floor (1×), yellow near 4.5×, red from 20× on (log scale); grey without a floor."""
    if gap is None or not gap == gap or gap <= 0:
        return "#cfcfcf"
    t = min(1.0, max(0.0, math.log10(max(gap, 1.0)) / math.log10(20.0)))
    return f"hsl({120 * (1 - t):.0f},55%,60%)"


def _label(node: dict, width: int = 90) -> str:
    if node["kind"] == "kernel":
        return short_name(node["name"], width)
    if node["kind"] == "op":
        return clip(node["name"].removeprefix("aten::").removeprefix("autograd::engine::evaluate_function: "), width)
    if node["kind"] == "annotation":
        return clip("@" + node["name"], width)
    return clip(node["name"], width)


def _merge(nodes: list[dict], top: bool = True) -> dict:
    """Identical sibling nodes (one signature) as one, figures summed; a run of modules named ``Class ×N``."""
    first = nodes[0]
    if len(nodes) == 1:
        return first
    cls = first["name"].rsplit("_", 1)[0] if first["kind"] == "module" and first["name"].rsplit("_", 1)[-1].isdigit() \
        else first["name"]
    out = dict(first, name=f"{cls} ×{len(nodes)}" if top else cls)
    for k in _SUMMED:
        vals = [n.get(k) for n in nodes]
        out[k] = sum(vals) if all(v is not None for v in vals) else None
    out["gap"] = out["costed_us"] / out["floor_us"] if out.get("floor_us") else None
    if "children" in first:
        out["children"] = [_merge([n["children"][i] for n in nodes], top=False) for i in range(len(first["children"]))]
    return out


def folded(children: list[dict]) -> list[dict]:
    out, i = [], 0
    while i < len(children):
        j = i + 1
        if children[i]["kind"] == "module":
            while j < len(children) and children[j]["kind"] == "module" \
                    and children[j]["signature"] == children[i]["signature"]:
                j += 1
        out.append(_merge(children[i:j]))
        i = j
    return out


def _summary(node: dict) -> str:
    share = node.get("above_floor_share")
    figs = [fmt_us(node["kernel_us"]), f"{node['kernels']} kernels", f"gap {fmt_gap(node.get('gap'))}"]
    if share is not None:
        figs.append(f"{100 * share:.0f}% of the time above floor".replace("-0%", "0%"))
    if node.get("fused_floor_us") is not None:
        figs.append(f"one-kernel floor {fmt_us(node['fused_floor_us'])}")
    dot = f'<i class="sw" style="display:inline-block;width:9px;height:9px;background:{gap_colour(node.get("gap"))}"></i> '
    return f'{dot}{_e(_label(node))} <span class="fig">· {_e(" · ".join(figs))}</span>'


def tree_html(node: dict, level: int = 0) -> str:
    """A ``<details>`` per node (identical blocks folded), the first levels open."""
    kids = folded(node.get("children", []))
    if not kids:
        return f'<div class="leaf">{_summary(node)}</div>'
    inner = "".join(tree_html(c, level + 1) for c in kids)
    return f'<details{" open" if level < OPEN_LEVELS else ""}><summary>{_summary(node)}</summary>{inner}</details>'


def _fit(label: str, chars: int) -> str:
    """A label in ``chars`` characters; a module instance keeps its number (``Qwen2…_13``)."""
    if len(label) <= chars:
        return label
    head, _, n = label.rpartition("_")
    if head and n.isdigit() and chars >= len(n) + 3:
        return head[: chars - len(n) - 2] + "…_" + n
    return clip(label, chars)


def icicle_svg(root: dict, levels: int = ICICLE_LEVELS) -> str:
    """Each node a rectangle under its parent: width by kernel time, colour by gap; hover for its figures."""
    total = root["kernel_us"] or 1.0
    scale = ICICLE_W / total
    rects: list[str] = []
    depth = [0]

    def draw(node: dict, x: float, level: int):
        w = node["kernel_us"] * scale
        if w < MIN_PX or level > levels:
            return
        depth[0] = max(depth[0], level)
        y = level * ROW_H
        title = f"{node['path'] or node['name']}\n" + " · ".join(
            [fmt_us(node["kernel_us"]), f"{node['kernels']} kernels", f"gap {fmt_gap(node.get('gap'))}",
             f"floor {fmt_us(node.get('floor_us'))}"])
        rects.append(f'<g><title>{_e(clip(title, 600))}</title><rect x="{x:.1f}" y="{y}" width="{w:.1f}" '
                     f'height="{ROW_H - 1}" fill="{gap_colour(node.get("gap"))}"/>')
        chars = int(w / 6.2)
        if chars >= 4:
            rects.append(f'<text x="{x + 3:.1f}" y="{y + 15}">{_e(_fit(_label(node, 200), chars))}</text>')
        rects.append("</g>")
        cx = x
        for c in node.get("children", []):
            draw(c, cx, level + 1)
            cx += c["kernel_us"] * scale

    draw(root, 0.0, 0)
    h = (depth[0] + 1) * ROW_H
    return (f'<svg class="chart icicle" viewBox="0 0 {ICICLE_W} {h}" width="{ICICLE_W}" height="{h}" '
            f'role="img" aria-label="module icicle">{"".join(rects)}</svg>')


def modules_section(modules: dict) -> str:
    """The report's "By module" section, from the explain document's ``modules``."""
    steps = modules.get("steps") or []
    if not steps:
        return ""
    median = modules.get("median_step")
    chosen = next((s for s in steps if s["step"] == median), steps[0])
    root = chosen["tree"]
    note = ("" if modules.get("module_events") else
            " The trace has no nn.Module events (record with with_modules=True): every kernel is under "
            "(no module).")
    return (f"<h2>By module</h2><style>{CSS}</style><p class=\"note\">The median step ({_e(root['name'])}) by "
            "phase, nn.Module, user annotation, op and kernel. Icicle: each rectangle spans its node's kernel time "
            "under its parent; colour: its gap (time over floor) <span class=\"gapkey\"></span> 1× → 20×, grey: "
            f"no floor. Hover for the figures.{_e(note)}</p>"
            + icicle_svg(root)
            + "<p class=\"note\">The tree: identical blocks folded (×N: totals over the instances); each line: "
            "kernel time, kernels, gap, its share of the step's time above the floor, its one-kernel floor.</p>"
            + f'<div class="mtree">{tree_html(root)}</div>')
