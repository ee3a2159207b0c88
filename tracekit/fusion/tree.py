"""The roofline by place in the model: a tree per step, root → phase → module path → user annotations →
op → kernel name (issue 23).

Each row of a step lands in exactly one leaf (rows outside every module go under an explicit "(no module)"
node of their phase), so the leaves sum exactly to the step's kernels and kernel time. Each node totals
its rows: kernels, kernel time, FLOPs, bytes, floor sum, the time set against a floor (``costed_us``),
gap, time above the floor and its share of the step's, and its own one-kernel floor: the subtree's rows
fused, by ``fusion.dataflow.step_fusion`` (exact with an execution trace). Identical sibling modules
(the N blocks of a model: same class, same structure, same kernels) share a ``signature`` and fold into
one line ("Qwen2DecoderLayer ×24").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tracekit.fusion.dataflow import step_fusion
from tracekit.fusion.nodes import step_rows
from tracekit.load.scopes import Scopes, read_scopes

NO_MODULE = "(no module)"
KINDS = ("root", "phase", "module", "annotation", "op", "kernel")
_INSTANCE = re.compile(r"_\d+$")


@dataclass
class TreeNode:
    """One node: its kind, name, the positions of its rows in the kernel table, its children (first
    seen first) and its figures (``figures``)."""

    kind: str
    name: str
    rows: list[int] = field(default_factory=list)
    children: dict = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    signature: str = ""
    path: str = ""

    def child(self, kind: str, name: str) -> "TreeNode":
        got = self.children.get((kind, name))
        if got is None:
            got = self.children[(kind, name)] = TreeNode(kind, name)
        return got

    def walk(self):
        yield self
        for c in self.children.values():
            yield from c.walk()

    def leaves(self):
        return [n for n in self.walk() if not n.children]


def base_name(name: str) -> str:
    """A module instance's class: ``Qwen2DecoderLayer_3`` → ``Qwen2DecoderLayer``."""
    return _INSTANCE.sub("", name)


def _leaf_path(place, op, name) -> list[tuple[str, str]]:
    path = [("phase", place.phase)]
    path += [("module", m) for m in place.modules] or [("module", NO_MODULE)]
    path += [("annotation", a) for a in place.annotations]
    path += [("op", op if isinstance(op, str) else "(no op)"), ("kernel", str(name))]
    return path


def step_tree(trace, step: int, scopes: Scopes, rows: dict | None = None, memo: dict | None = None,
              at: dict | None = None, name: str | None = None) -> TreeNode:
    """The tree of one step (``rows``: ``step_rows`` of the table, ``at``: row label → position, ``name``:
    the step's name, when the caller has them)."""
    df = trace.kernels
    rows = step_rows(df) if rows is None else rows
    pairs = rows.get(step, [])
    at = {label: i for i, label in enumerate(df.index)} if at is None else at
    name = trace.steps.name_of(step, "whole trace") if name is None else name
    root = TreeNode("root", name)
    ops, names = df["op"].tolist(), df["name"].tolist()
    for label, _ in pairs:
        i = at[label]
        node = root
        node.rows.append(i)
        for kind, text in _leaf_path(scopes.places[i], ops[i], names[i]):
            node = node.child(kind, text)
            node.rows.append(i)
    _figure(trace, root, pairs, at, memo if memo is not None else {})
    _sign(root)
    _paths(root, "")
    return root


def _figure(trace, root: TreeNode, pairs: list, at: dict, memo: dict) -> None:
    df = trace.kernels
    dur = df["dur_us"].to_numpy(dtype=float)
    floor = df["floor_us"].to_numpy(dtype=float)
    flops = df["flops"].to_numpy(dtype=float)
    nbytes = df["bytes"].to_numpy(dtype=float)
    covered = df["covered"].to_numpy(dtype=bool)
    for node in root.walk():
        r = np.asarray(node.rows, dtype=np.int64)
        known = ~np.isnan(floor[r])
        f = float(floor[r][known].sum()) if known.any() else None
        costed = float(dur[r][covered[r]].sum())
        kernel_us = float(np.nansum(dur[r]))
        fig = dict(kernels=len(r), kernel_us=kernel_us,
                   flops=float(np.nansum(flops[r])) if (~np.isnan(flops[r])).any() else None,
                   bytes=float(np.nansum(nbytes[r])) if (~np.isnan(nbytes[r])).any() else None,
                   floor_us=f, costed_us=costed, gap=costed / f if f else None,
                   above_floor_us=costed - f if f is not None else None,
                   costed_pct=100.0 * costed / kernel_us if kernel_us > 0 else None)
        if node.kind != "kernel" and f is not None:
            mine = set(node.rows)
            fused = step_fusion(trace, -1, rows=[p for p in pairs if at[p[0]] in mine], memo=memo)
            v = fused["fused_floor_us"]
            if known.all() and v == v and v > f:
                # one kernel never needs more than the node's kernels apart: the dataflow reads an op's
                # outside input whole where its record reads part (nll_loss: N of the [N, C] log-probs)
                v = f
            fig.update(fused_floor_us=None if v != v else float(v), fused_floor_kind=fused["kind"])
        elif node.kind != "kernel":
            fig.update(fused_floor_us=None, fused_floor_kind=None)
        node.figures = fig
    total = root.figures["above_floor_us"]
    for node in root.walk():
        a = node.figures["above_floor_us"]
        node.figures["above_floor_share"] = a / total if total and a is not None else None


def _sign(node: TreeNode) -> str:
    """A digest of the node's class, structure and kernels (not its timings): equal for identical blocks."""
    parts = [node.kind, base_name(node.name) if node.kind == "module" else node.name, str(len(node.rows))]
    parts += [_sign(c) for c in node.children.values()]
    node.signature = _digest(parts)
    return node.signature


def _digest(parts: list[str]) -> str:
    return hashlib.blake2b("\x1f".join(parts).encode(), digest_size=6).hexdigest()


def _paths(node: TreeNode, prefix: str) -> None:
    node.path = prefix
    for c in node.children.values():
        _paths(c, f"{prefix}/{c.name}" if prefix else c.name)


def module_trees(trace, scopes: Scopes | None = None) -> tuple["StepTrees", Scopes]:
    """A tree per step (one for the whole trace when it has no steps) and the scopes they were built from:
    only the steps with rows get a tree built (``StepTrees``)."""
    scopes = read_scopes(trace) if scopes is None else scopes
    df = trace.kernels
    rows = step_rows(df)
    memo: dict = {}
    at = {label: i for i, label in enumerate(df.index)}
    steps = trace.steps.or_whole()
    indices, names = steps.index, steps.names
    keys = [int(k) for k, v in rows.items() if v and isinstance(k, (int, float, np.integer, np.floating))
            and float(k).is_integer() and abs(k) < 2 ** 63]          # the steps that hold rows
    built = {}
    for pos in np.flatnonzero(np.isin(indices, np.array(keys, dtype=np.int64))):
        pos = int(pos)
        built[pos] = step_tree(trace, int(indices[pos]), scopes, rows, memo, at, names[pos])
    return StepTrees(indices, names, built), scopes


def empty_figures() -> dict:
    """The figures of a step without rows (what ``_figure`` gives a root with none)."""
    return dict(kernels=0, kernel_us=0.0, flops=None, bytes=None, floor_us=None, costed_us=0.0, gap=None,
                above_floor_us=None, costed_pct=None, fused_floor_us=None, fused_floor_kind=None,
                above_floor_share=None)


def empty_signature(name: str) -> str:
    """The signature of the root of a step without rows named ``name`` (``_sign`` of it)."""
    return _digest(["root", name, "0"])


def empty_tree(name: str) -> TreeNode:
    """The tree of a step without rows: its root alone."""
    return TreeNode("root", name, figures=empty_figures(), signature=empty_signature(name))


class StepTrees(Sequence):
    """The trees of a trace's steps, in step order, read like a list of ``TreeNode``: the trees of the
    steps with rows are built (``built``: position → tree); a step without rows costs no tree (issue 27:
    100k empty steps held 100k trees, 90 MB for 13 MB of JSON): reading it makes its root from
    ``empty_tree``, a new one each time, and ``empty`` tells which positions those are."""

    def __init__(self, indices, names, built: dict[int, TreeNode]):
        self.indices, self.names, self.built = indices, names, built

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        got = self.built.get(i)
        return got if got is not None else empty_tree(self.names[i])

    def __iter__(self):
        return map(self.__getitem__, range(len(self)))

    def empty(self, i: int) -> bool:
        return i not in self.built

    def kernel_us(self) -> list[float]:
        """Each step's kernel time, no tree made."""
        out = [0.0] * len(self)
        for i, t in self.built.items():
            out[i] = t.figures["kernel_us"]
        return out


# ---- folding identical siblings ------------------------------------------------------------------

_SUMMED = ("kernels", "kernel_us", "flops", "bytes", "floor_us", "costed_us", "above_floor_us",
           "above_floor_share", "fused_floor_us")


def merge(nodes: list[TreeNode], top: bool = True) -> TreeNode:
    """Identical nodes (one signature) as one: figures summed, gap recomputed, children merged in order;
    the group is named ``Class ×N`` (``top``), the modules inside it by their class."""
    first = nodes[0]
    if len(nodes) == 1:
        return first
    plain = base_name(first.name) if first.kind == "module" else first.name
    name = f"{plain} ×{len(nodes)}" if top else plain
    fig = dict(first.figures)
    for k in _SUMMED:
        vals = [n.figures.get(k) for n in nodes]
        fig[k] = sum(vals) if all(v is not None for v in vals) else None
    fig["gap"] = fig["costed_us"] / fig["floor_us"] if fig.get("floor_us") else None
    fig["costed_pct"] = 100.0 * fig["costed_us"] / fig["kernel_us"] if fig["kernel_us"] > 0 else None
    out = TreeNode(first.kind, name, [r for n in nodes for r in n.rows], figures=fig, signature=first.signature,
                   path=first.path)
    groups = [list(n.children.values()) for n in nodes]
    for i, c in enumerate(groups[0]):
        out.children[(c.kind, c.name, i)] = merge([g[i] for g in groups], top=False)
    return out


def folded_children(node: TreeNode) -> list[TreeNode]:
    """A node's children with runs of identical sibling modules (same signature) folded into one."""
    out: list[TreeNode] = []
    kids = list(node.children.values())
    i = 0
    while i < len(kids):
        j = i + 1
        if kids[i].kind == "module":
            while j < len(kids) and kids[j].kind == "module" and kids[j].signature == kids[i].signature:
                j += 1
        out.append(merge(kids[i:j]))
        i = j
    return out


def identical_groups(root: TreeNode) -> list[list[TreeNode]]:
    """Runs of two or more identical sibling modules anywhere in the tree (the N blocks)."""
    found = []
    for node in root.walk():
        kids = list(node.children.values())
        i = 0
        while i < len(kids):
            j = i + 1
            while kids[i].kind == "module" and j < len(kids) and kids[j].signature == kids[i].signature:
                j += 1
            if j - i > 1:
                found.append(kids[i:j])
            i = j
    return found
