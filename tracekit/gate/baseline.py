"""One side of a comparison: a trace, a capture bundle, or the JSON ``tracekit explain -f json`` wrote.

``load_side`` reduces every input to the same ``Side``: the per-step table of ``report.step_table``
and the explain contract's kernel fields, so check and diff compare a committed explain JSON and a
fresh trace on exactly the same numbers. Per-step figures are kept per step; ``Side`` helpers give
the median step (headline numbers, categories) and the mean per step (kernel names, fused-op sets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tracekit.errors import TracekitError
from tracekit.errors import warn as say_warning
from tracekit.ops import lookup
from tracekit.report.fmt import short_name  # noqa: F401  (check, diff and rules name kernels with it)

STEP_FIELDS = ["step", "name", "kernels", "kernel_us", "floor_us", "gap", "busy_pct", "idle_us", "window_us"]
KERNEL_FIELDS = ["name", "category", "op", "kind", "step", "dur_us", "floor_us", "gap", "fused_ops"]
EXPLAIN_KEYS = {"kernels", "summary", "device"}
MAX_NUMBER = 1e15           # explain JSON numbers (µs, counts, step indices): beyond is no real trace


def expand_ops(ops) -> frozenset[str]:
    """The set of ops a kernel performs, ops that name a fusion themselves replaced by the parts their
    op-table record gives (``addmm`` → mm, add), so cuBLAS "mm+add" (bias epilogue) and Inductor
    ``addmm`` are the same work."""
    out: set[str] = set()
    for op in ops if isinstance(ops, (list, tuple)) else ():
        op = str(op).lower().split("::")[-1]
        family = lookup(f"aten::{op}")
        parts = family.fused if family is not None and isinstance(family.fused, tuple) and family.fused else (op,)
        out.update(parts)
    return frozenset(out)


@dataclass
class Side:
    """What check and diff read from one input."""

    path: str
    source: str                 # "trace" | "explain-json"
    device: str | None
    spec: str | None
    step_rule: str
    steps: pd.DataFrame         # STEP_FIELDS, one row per kept step
    kernels: pd.DataFrame       # KERNEL_FIELDS, every kernel (step -1 = outside every step)
    skipped_steps: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def n_steps(self) -> int:
        return max(1, len(self.steps))

    @property
    def in_steps(self) -> pd.DataFrame:
        """Kernels inside the kept steps."""
        return self.kernels[self.kernels["step"].isin(self.steps["step"])]

    def median(self, column: str) -> float | None:
        """Median over kept steps of a step-table column (None when every step lacks it)."""
        vals = pd.to_numeric(self.steps[column], errors="coerce").dropna()
        return float(vals.median()) if len(vals) else None

    def per_step_counts(self, key: str) -> pd.DataFrame:
        """Kernel counts per (step, key value); steps as rows, zeros filled in."""
        k = self.in_steps
        table = k.groupby(["step", key], dropna=False).size().unstack(fill_value=0) if len(k) else pd.DataFrame()
        return table.reindex(self.steps["step"].tolist(), fill_value=0)

    def mean_by(self, key: str) -> pd.DataFrame:
        """Per key value: kernels per step and kernel time per step (means over kept steps)."""
        k = self.in_steps
        if not len(k):
            return pd.DataFrame(columns=["count", "dur_us"])
        g = k.groupby(k[key].fillna("?").astype(str))["dur_us"].agg(["size", "sum"])
        return pd.DataFrame({"count": g["size"] / self.n_steps, "dur_us": g["sum"] / self.n_steps})

    def median_by(self, key: str) -> pd.DataFrame:
        """Per key value: kernels and kernel time of the median step (each column's own median)."""
        k = self.in_steps
        if not len(k):
            return pd.DataFrame(columns=["count", "dur_us"])
        keys = k[key].fillna("?").astype(str)
        steps = self.steps["step"].tolist()
        count = k.groupby(["step", keys]).size().unstack(fill_value=0).reindex(steps, fill_value=0)
        dur = k.groupby(["step", keys])["dur_us"].sum().unstack(fill_value=0.0).reindex(steps, fill_value=0.0)
        return pd.DataFrame({"count": count.median(), "dur_us": dur.median()})

    def fusions(self) -> dict[frozenset, float]:
        """Fused op sets (two ops or more) → kernels per step that perform them (mean)."""
        counts: dict[frozenset, int] = {}
        for ops in self.in_steps["fused_ops"]:
            s = expand_ops(ops)
            if len(s) >= 2:
                counts[s] = counts.get(s, 0) + 1
        return {s: n / self.n_steps for s, n in counts.items()}

    def kernels_doing(self, ops: frozenset) -> float:
        """Kernels per step whose fused ops include all of ``ops`` (mean)."""
        n = sum(1 for f in self.in_steps["fused_ops"] if ops <= expand_ops(f))
        return n / self.n_steps


def _open_head(path: Path, size: int = 65536) -> bytes:
    from tracekit.limits import read_head        # a FIFO or a device is refused here, not read
    return read_head(path, size, "trace or explain JSON")


def _explain_doc(path: Path) -> dict | None:
    """The parsed explain JSON at ``path``, or None when the file is something else (a trace)."""
    if path.is_dir():
        return None
    if b'"traceEvents"' in _open_head(path):
        return None
    from tracekit.load.kineto import read_json
    doc = read_json(path)
    if isinstance(doc, dict) and "graphs" in doc and isinstance(doc["graphs"], list):
        if len(doc["graphs"]) != 1:
            raise TracekitError(f"{path}: explain JSON holds {len(doc['graphs'])} graphs; "
                                "check/diff compare one trace at a time")
        doc = doc["graphs"][0]
    if isinstance(doc, dict) and EXPLAIN_KEYS <= doc.keys():
        return doc
    return None


def _finite_pos(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")


def _from_explain(path: Path, doc: dict) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    steps, kernels, summary = doc.get("steps"), doc.get("kernels"), doc.get("summary")
    if not isinstance(steps, list) or not isinstance(kernels, list) or not isinstance(summary, dict):
        raise TracekitError(f"{path}: explain JSON: steps/kernels must be lists and summary an object")
    if not steps:
        raise TracekitError(f"{path}: explain JSON holds no steps: nothing to compare")
    _check_rows(path, "steps", steps, ["step", *STEP_FIELDS[2:]], ("name",), ops=False)
    _check_rows(path, "kernels", kernels, ["step", "dur_us", "floor_us", "gap"], ("name", "category", "op", "kind"))
    try:
        st = pd.DataFrame(steps, columns=STEP_FIELDS)
        kt = pd.DataFrame(kernels, columns=KERNEL_FIELDS)
        kt["step"] = pd.to_numeric(kt["step"]).fillna(-1).astype(int)
        kt["dur_us"] = pd.to_numeric(kt["dur_us"]).astype(float)
        st["step"] = pd.to_numeric(st["step"]).astype(int)
    except (ValueError, TypeError) as exc:
        raise TracekitError(f"{path}: explain JSON has malformed steps or kernels ({exc})") from None
    kt["fused_ops"] = [f if isinstance(f, list) else [] for f in kt["fused_ops"]]
    # the time a floor covers (explain JSON before 'covered' existed: the kernels with a floor of their own)
    kt["covered"] = [k["covered"] if isinstance(k.get("covered"), bool) else bool(_finite_pos(k.get("floor_us")))
                     for k in kernels]
    dev = doc.get("device") if isinstance(doc.get("device"), dict) else {}
    for where, key in (("device", "name"), ("device", "spec"), ("summary", "step_rule")):
        v = (dev if where == "device" else summary).get(key)
        if v is not None and not isinstance(v, str):
            raise TracekitError(f"{path}: explain JSON: {where}.{key} is a {type(v).__name__}, not a string")
    return st, kt, {"device": dev.get("name"), "spec": dev.get("spec"), "step_rule": summary.get("step_rule", "?")}


def scope_path(modules, annotations) -> str:
    """A kernel's module path with its user annotations after it, each as ``@name`` (module rules match it)."""
    return "/".join([*modules, *(f"@{a}" for a in annotations)])


def _explain_places(path: Path, doc: dict) -> tuple[list, list, list]:
    """Each kernel record's module path, phase and scope path (explain --by module -f json writes them)."""
    recs = doc["kernels"]
    if recs and not all(isinstance(k.get("module"), str) and isinstance(k.get("phase"), str) for k in recs):
        raise TracekitError(f"{path}: explain JSON without module paths: module rules and diff --by module need "
                            "the trace, or JSON from `tracekit explain --by module -f json`")
    scopes = [scope_path([m for m in k["module"].split("/") if m],
                         [a for a in k.get("annotations") or [] if isinstance(a, str)]) for k in recs]
    return [k["module"] for k in recs], [k["phase"] for k in recs], scopes


def _check_rows(path: Path, what: str, rows: list, numbers: list[str], texts: tuple, ops: bool = True) -> None:
    """Explain JSON rows fail closed: numbers finite (or null), names strings, fused_ops a list of strings."""
    for k, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TracekitError(f"{path}: explain JSON: {what}[{k}] is not an object")
        for f in numbers:
            v = row.get(f)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                                  or abs(v) > MAX_NUMBER):
                raise TracekitError(f"{path}: explain JSON: {what}[{k}].{f} is {str(v)[:40]!r}, not a finite number "
                                    f"of at most {MAX_NUMBER:g}")
        for f in texts:
            v = row.get(f)
            if v is not None and not isinstance(v, str):
                raise TracekitError(f"{path}: explain JSON: {what}[{k}].{f} is a {type(v).__name__}, not a string")
        fused = row.get("fused_ops") if ops else None
        if fused is not None and not (isinstance(fused, list) and all(isinstance(o, str) for o in fused)):
            raise TracekitError(f"{path}: explain JSON: {what}[{k}].fused_ops is not a list of op names")


def load_side(path: str | Path, step_marker: str | None = None, device: str | None = None,
              spec: str | None = None, skip_steps: int = 0, graph_captures: str | None = None,
              modules: bool = False) -> Side:
    """Read a trace, bundle or explain JSON; drop the first ``skip_steps`` steps (warm-up).
    ``graph_captures``: a serving engine's capture traces for a trace's graph replays. ``modules``: each
    kernel's ``module`` path and ``phase`` too (module rules, diff --by module: docs/explain.md)."""
    p = Path(path)
    if not p.exists():
        raise TracekitError(f"{p}: no such file or folder")
    from tracekit.analyze import is_mlx_input
    if is_mlx_input(p):
        what = "holds MLX graphs" if p.is_dir() else "is an MLX graph"
        raise TracekitError(f"{p}: {what}; check and diff take torch.profiler traces, capture bundles or "
                            f"explain JSON (MLX graphs have no timings): use `tracekit explain {p}`")
    warnings: list[str] = []
    doc = _explain_doc(p)
    if doc is not None:
        if step_marker or device or spec or graph_captures:
            warnings.append(f"{p} is explain JSON: --step-marker/--device/--spec/--graph-captures do not apply to it")
        steps, kernels, info = _from_explain(p, doc)
        source = "explain-json"
        if modules:
            kernels["module"], kernels["phase"], kernels["scope"] = _explain_places(p, doc)
        warnings += [str(w) for w in doc.get("warnings") or []]
    else:
        from tracekit.analyze import analyze_path
        traces = analyze_path(p, step_marker=step_marker, device=device, spec=spec, graph_captures=graph_captures)
        if len(traces) != 1:
            raise TracekitError(f"{p}: holds {len(traces)} graphs; check/diff compare one trace at a time")
        t = traces[0]
        steps, kernels, info = _from_trace(t)
        if modules:
            from tracekit.load.scopes import read_scopes
            scopes = read_scopes(t)
            kernels["module"] = ["/".join(pl.modules) for pl in scopes.places]
            kernels["phase"] = [pl.phase for pl in scopes.places]
            kernels["scope"] = [scope_path(pl.modules, pl.annotations) for pl in scopes.places]
            warnings += scopes.warnings
        source = "trace"
        warnings += list(traces[0].warnings)
    kernels["step"] = kernels["step"].astype(int)
    if skip_steps:
        if skip_steps >= len(steps):
            raise TracekitError(f"{p}: skip_steps={skip_steps} leaves none of its {len(steps)} step(s)")
        steps = steps.iloc[skip_steps:]
    steps = steps.reset_index(drop=True)
    return Side(path=str(p), source=source, device=info["device"], spec=info["spec"],
                step_rule=str(info["step_rule"]), steps=steps, kernels=kernels.reset_index(drop=True),
                skipped_steps=skip_steps, warnings=warnings)


def _from_trace(t) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    from tracekit.report.document import step_table
    steps = step_table(t, STEP_FIELDS)
    kernels = t.kernels[[*KERNEL_FIELDS, "covered"]].copy()
    kernels["fused_ops"] = [f if isinstance(f, list) else [] for f in kernels["fused_ops"]]
    return steps, kernels, {"device": t.device_name, "spec": t.spec.id if t.spec else None, "step_rule": t.step_rule}


def side_of_trace(trace, path: str) -> Side:
    """An analysed trace (``analyze.analyze_path``; its skipped steps already left out) as a Side."""
    steps, kernels, info = _from_trace(trace)
    kernels["step"] = kernels["step"].astype(int)
    return Side(path=str(path), source="trace", device=info["device"], spec=info["spec"],
                step_rule=str(info["step_rule"]), steps=steps.reset_index(drop=True),
                kernels=kernels.reset_index(drop=True), skipped_steps=int(trace.metadata.get("skipped_steps", 0)),
                warnings=list(trace.warnings))


def warn(side: Side) -> None:
    for w in side.warnings:
        say_warning(w)


def fmt_num(x: float | None, digits: int = 1) -> str:
    """1 → "1", 2.5 → "2.5", 1234.56 → "1234.6", None → "-"."""
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "-"
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.{digits}f}"


TOLERANCE_KEYS = ("time", "kernels")
DEFAULT_TOLERANCE = {"time": 0.10, "kernels": 0.0}


def parse_tolerance(text: str | None, base: dict | None = None) -> dict[str, float]:
    """``0.1`` / ``10%`` (time) or ``time=10%,kernels=0`` → {"time": 0.1, "kernels": 0.0}."""
    tol = dict(DEFAULT_TOLERANCE if base is None else base)
    if not text:
        return tol
    for part in text.split(","):
        key, _, value = part.rpartition("=")
        key = key.strip() or "time"
        if key not in TOLERANCE_KEYS:
            raise TracekitError(f"--tolerance: unknown key {key!r} (use {', '.join(TOLERANCE_KEYS)})")
        value = value.strip()
        try:
            v = float(value[:-1]) / 100 if value.endswith("%") else float(value)
        except ValueError:
            raise TracekitError(f"--tolerance: {value!r} is not a number or percentage") from None
        if not (0 <= v < 100):
            raise TracekitError(f"--tolerance: {key}={value} must be ≥ 0")
        tol[key] = v
    return tol


