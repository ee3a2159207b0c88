"""The module tree (``fusion.tree``) as people and machines read it: the ``modules`` key of the explain
JSON, CSV rows, the ``explain --by module`` table (80 columns) and its Markdown."""

from __future__ import annotations

import csv
import io

from rich.table import Table

from tracekit.fusion.tree import (StepTrees, TreeNode, empty_figures, empty_signature, empty_tree, folded_children,
                                   module_trees)
from tracekit.load.scopes import BACKWARD_PREFIX
from tracekit.model.rows import Rows
from tracekit.report.fmt import cell_width, clip, fit_columns, fmt_gap, fmt_us, short_name

SCHEMA = "tracekit.modules/1"
FIGURES = ("kernels", "kernel_us", "flops", "bytes", "floor_us", "costed_us", "gap", "above_floor_us",
           "above_floor_share", "costed_pct", "fused_floor_us", "fused_floor_kind")
DEFAULT_DEPTH = 4
NAME_MIN, NAME_MAX = 28, 56
# table columns after the name, most important first: the first three always stay
COLUMNS = ("time", "gap", "kernels", "share", "above", "floor", "1-kernel")
ALWAYS = {"time", "gap", "kernels"}


def node_dict(node: TreeNode) -> dict:
    """One node and its subtree, as the JSON contract writes it (docs/explain.md, "modules")."""
    out = {"name": node.name, "kind": node.kind, "path": node.path, "signature": node.signature}
    out.update({k: node.figures.get(k) for k in FIGURES})
    if node.children:
        out["children"] = [node_dict(c) for c in node.children.values()]
    return out


def median_index(trees: list[TreeNode]) -> int:
    """The position of the median step by kernel time (the lower one of an even count)."""
    us = trees.kernel_us() if isinstance(trees, StepTrees) else [t.figures["kernel_us"] for t in trees]
    order = sorted(range(len(us)), key=us.__getitem__)
    return order[(len(order) - 1) // 2] if order else 0


def modules_document(trace, trees: list[TreeNode], scopes) -> dict:
    """The ``modules`` key: one tree per step, the median step's position, and what the trace held. The
    steps are ``model.rows.Rows``: a step without rows is written from one template, no tree made."""
    steps = trace.steps.indices() or [0]
    if isinstance(trees, StepTrees):
        n = min(len(steps), len(trees))
        kept = {i: {"step": steps[i], "tree": node_dict(t)} for i, t in trees.built.items() if i < n}
        rows = Rows(n, {"step": None, "tree": None}, {"step": steps, "tree": _EmptyTrees(trees.names)}, kept)
    else:
        rows = [{"step": k, "tree": node_dict(t)} for k, t in zip(steps, trees)]
    return {"schema": SCHEMA, "median_step": steps[median_index(trees)] if len(trees) else None,
            "module_events": scopes.module_events, "annotation_events": scopes.annotation_events,
            "backward_linked": scopes.backward_linked, "backward_unlinked": scopes.backward_unlinked,
            "steps": rows}


class _EmptyTrees:
    """``node_dict`` of the tree of a step without rows, by position, made when read."""

    __slots__ = ("names", "template")

    def __init__(self, names):
        self.names = names
        self.template = node_dict(empty_tree(""))

    def __getitem__(self, i: int) -> dict:
        name = self.names[i]
        return {**self.template, "name": name, "signature": empty_signature(name)}


def build(trace, scopes=None) -> tuple[list[TreeNode], object]:
    """The trees of a trace and the scopes they came from (``scopes``: when the caller has read them);
    the scopes' warnings join the trace's."""
    trees, scopes = module_trees(trace, scopes)
    for w in scopes.warnings:
        if w not in trace.warnings:
            trace.warnings.append(w)
    return trees, scopes


def visible(root: TreeNode, depth: int = DEFAULT_DEPTH, pattern=None, fold: bool = True) -> list[tuple[int, TreeNode]]:
    """(level, node) in tree order down to ``depth`` levels below the root, identical sibling modules folded;
    with ``pattern`` (searched in each node's path) only matching nodes, their ancestors and what lies
    below them."""
    out: list[tuple[int, TreeNode]] = []

    def walk(node: TreeNode, level: int, matched: bool) -> bool:
        here = matched or pattern is None or pattern.search(node.path)
        mark = len(out)
        out.append((level, node))
        any_below = False
        if level < depth and not _same_as_only_child(node):
            for c in (folded_children(node) if fold else node.children.values()):
                any_below |= walk(c, level + 1, bool(here) and pattern is not None and level > 0)
        if pattern is not None and not here and not any_below:
            del out[mark:]
            return False
        return True

    walk(root, 0, False)
    return out


def _same_as_only_child(node: TreeNode) -> bool:
    """An op whose one kernel bears its own name (a CPU-only trace's rows): the kernel line would repeat it."""
    kids = list(node.children.values())
    return node.kind == "op" and len(kids) == 1 and kids[0].name == node.name


def _label(node: TreeNode, width: int) -> str:
    if node.kind == "kernel":
        return short_name(node.name, width)
    if node.kind == "op":
        return clip(node.name.removeprefix("aten::").removeprefix(BACKWARD_PREFIX), width)
    if node.kind == "annotation":
        return clip(f"@{node.name}", width)
    return clip(node.name, width)


def _cells(node: TreeNode) -> dict:
    f = node.figures
    share = f.get("above_floor_share")
    return {"time": fmt_us(f["kernel_us"]), "gap": fmt_gap(f["gap"]), "kernels": str(f["kernels"]),
            "share": "-" if share is None else f"{100 * share:.0f}%".replace("-0%", "0%"), "above": fmt_us(f["above_floor_us"]),
            "floor": fmt_us(f["floor_us"]), "1-kernel": fmt_us(f.get("fused_floor_us"))}


def module_table(trace, trees: list[TreeNode], width: int, depth: int = DEFAULT_DEPTH, pattern=None,
                 wide: bool = False) -> Table:
    """The median step's tree as a table: one line per node, indented by level, identical blocks folded
    (their figures are totals over the N instances)."""
    k = median_index(trees)
    root = trees[k]
    shown = visible(root, depth, pattern)
    cells = {c: [] for c in COLUMNS}
    for _, node in shown:
        for c, v in _cells(node).items():
            cells[c].append(v)
    labels_full = [("  " * level) + _label(node, 200) for level, node in shown] or ["phase / module / op"]
    if wide:
        cols = list(COLUMNS)
    else:
        widths = {c: cell_width(c, cells[c]) for c in COLUMNS}
        cols = fit_columns(widths, COLUMNS, ALWAYS, width - NAME_MIN - 3)
    used = sum(cell_width(c, cells[c]) + 3 for c in cols) + 2
    longest = max(len(s) for s in labels_full)
    name_w = longest if wide else max(NAME_MIN, min(longest, NAME_MAX, width - used - 1))
    steps = trace.steps.name_list()
    which = f"median step {steps[k]}" if len(steps) > 1 else (steps[0] if steps else "whole trace")
    note = "; identical blocks folded: ×N lines are totals" if any("×" in n.name for _, n in shown) else ""
    filt = f", matching {pattern.pattern!r}" if pattern is not None else ""
    if not shown:
        filt += f": no node within {depth} levels matches"
    t = Table(title=f"by module ({which}, depth {depth}{filt}{note})", show_edge=False)
    t.add_column("phase / module / op", overflow="ellipsis", no_wrap=True, width=name_w)
    for c in cols:
        t.add_column("above floor" if c == "above" and wide else c, justify="right", no_wrap=True)
    for i, (level, node) in enumerate(shown):
        t.add_row(("  " * level) + _label(node, max(8, name_w - 2 * level)), *(cells[c][i] for c in cols))
    return t


CSV_FIELDS = ["step", "level", "kind", "path", "name", "signature", *FIGURES]


def node_rows(trace, trees: list[TreeNode]):
    """Every node of every step's tree (not folded), in tree order: one row of ``CSV_FIELDS`` each, made as
    read (a step without rows: one row from a template, no tree made)."""
    steps = trace.steps.indices() or [0]
    empty = [empty_figures().get(x) for x in FIGURES]
    names = trees.names if isinstance(trees, StepTrees) else None
    for i, k in enumerate(steps[:len(trees)]):
        if names is not None and trees.empty(i):
            name = names[i]
            yield [k, 0, "root", "", name, empty_signature(name), *empty]
            continue
        stack = [(trees[i], 0)]
        while stack:
            node, level = stack.pop()
            f = node.figures
            yield [k, level, node.kind, node.path, node.name, node.signature, *[f.get(x) for x in FIGURES]]
            stack.extend((c, level + 1) for c in reversed(node.children.values()))


def write_modules_csv(trace, trees: list[TreeNode], out) -> None:
    """Every node of every step's tree (not folded), one CSV row each, in tree order, written to ``out``
    as made."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    w.writerows(["" if v is None else v for v in row] for row in node_rows(trace, trees))


def modules_csv(trace, trees: list[TreeNode]) -> str:
    """``write_modules_csv`` as one text."""
    buf = io.StringIO()
    write_modules_csv(trace, trees, buf)
    return buf.getvalue()


def modules_markdown(trace, trees: list[TreeNode], depth: int = DEFAULT_DEPTH, pattern=None) -> str:
    """The module table in Markdown (the median step, folded)."""
    from tracekit.report.markdown import md_table, md_text
    k = median_index(trees)
    rows = []
    for level, node in visible(trees[k], depth, pattern):
        c = _cells(node)
        rows.append([("&nbsp;&nbsp;" * level) + md_text(_label(node, 80)), *(c[x] for x in COLUMNS)])
    head = ["phase / module / op", "time", "gap", "kernels", "share of time above floor", "above floor", "floor",
            "one-kernel floor"]
    return "\n".join(["", "### By module", "", *md_table(head, "l" + "r" * 7, rows), ""]) + "\n"


def row_places(scopes) -> tuple[list[str], list[str]]:
    """Each row's module path ("" outside every module) and phase, for the kernel records and Perfetto."""
    return ["/".join(p.modules) for p in scopes.places], [p.phase for p in scopes.places]
