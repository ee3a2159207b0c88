"""Rules files (TOML) for ``tracekit check``: strict parsing and evaluation, one ``Result`` per rule.

Every rule is evaluated on each kept step and reports its worst step. The schema is documented in
docs/check.md; an unknown key, a wrong type or a bad regex is an unusable rules file (exit 2).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

try:                                    # Python 3.11+
    import tomllib
except ModuleNotFoundError:             # Python 3.10: the same parser from PyPI
    import tomli as tomllib

import numpy as np

from tracekit.classify.categories import CATEGORIES
from tracekit.errors import TracekitError
from tracekit.limits import MAX_SMALL_FILE, UserRegex, read_input
from tracekit.gate.baseline import (
    DEFAULT_TOLERANCE,
    Side,
    expand_ops,
    fmt_num,
    short_name,
)

FORBID_FIELDS = ("name", "op", "category", "kind")
RULE_KEYS = ("kernels_per_step", "must_fuse", "forbid", "max_gap", "max_idle_fraction", "baseline", "module")
FORBID_SCOPES = ("steps", "all")


@dataclass
class Result:
    """One rule's outcome. ``found`` names the worst step; ``kernels`` the kernels behind it."""

    rule: str
    ok: bool
    expected: str
    found: str
    kernels: list[str] = field(default_factory=list)

    def line(self) -> str:
        text = f"{'PASS' if self.ok else 'FAIL'} {self.rule}: expected {self.expected}, found {self.found}"
        return text + (f": {', '.join(self.kernels)}" if self.kernels and not self.ok else "")


@dataclass
class Rules:
    path: str
    doc: dict
    skip_steps: int = 0
    baseline: dict = field(default_factory=dict)


class _Checker:
    """Reads one TOML table against a schema, naming the file and key in every error."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, where: str, msg: str) -> TracekitError:
        return TracekitError(f"{self.path}: {where}: {msg}")

    def table(self, value, where: str, allowed: dict) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"must be a table, not {type(value).__name__}")
        for key, val in value.items():
            if key not in allowed:
                raise self.fail(where, f"unknown key {key!r} (allowed: {', '.join(allowed)})")
            allowed[key](val, f"{where}.{key}" if where != "top level" else key)
        return value

    def num(self, lo: float = 0.0, hi: float | None = None, integer: bool = False, above: bool = False):
        def check(v, where):
            ok_type = isinstance(v, int) if integer else isinstance(v, (int, float))
            if isinstance(v, bool) or not ok_type:
                raise self.fail(where, f"must be {'an integer' if integer else 'a number'}, not {v!r}")
            if not math.isfinite(v):            # nan passes every comparison; inf disables the rule
                raise self.fail(where, f"must be a finite number, not {v!r}")
            if v < lo or (above and v == lo) or (hi is not None and v > hi):
                rng = f"{'>' if above else '≥'} {lo}" + (f" and ≤ {hi}" if hi is not None else "")
                raise self.fail(where, f"must be {rng}, not {v}")
        return check

    def string(self, choices: tuple | None = None, regex: bool = False):
        def check(v, where):
            if not isinstance(v, str):
                raise self.fail(where, f"must be a string, not {v!r}")
            if choices and v not in choices:
                raise self.fail(where, f"must be one of {', '.join(choices)}, not {v!r}")
            if regex:
                UserRegex(v, f"{self.path}: {where}")      # invalid, or able to backtrack without bound
        return check

    def boolean(self, v, where):
        if not isinstance(v, bool):
            raise self.fail(where, f"must be true or false, not {v!r}")

    def categories(self, value_check, extra: tuple = ()):
        def check(v, where):
            self.table(v, where, {c: value_check for c in CATEGORIES + extra})
        return check

    def array_of(self, schema: dict, required: tuple):
        def check(v, where):
            if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
                raise self.fail(where, "must be an array of tables ([[...]])")
            for i, item in enumerate(v):
                self.table(item, f"{where}[{i}]", dict(schema))
                for key in required:
                    if key not in item:
                        raise self.fail(f"{where}[{i}]", f"missing required key {key!r}")
        return check

    def ops(self, v, where):
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
            raise self.fail(where, "must be a non-empty list of op names, e.g. [\"addmm\", \"relu\"]")


def load_rules(path: str | Path) -> Rules:
    """Parse and validate a rules file; any problem is a TracekitError naming the file."""
    p = Path(path)
    raw = read_input(p, "rules file", limit=MAX_SMALL_FILE, gunzip=False)
    try:
        doc = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TracekitError(f"{p}: invalid TOML ({exc})") from None
    c = _Checker(str(p))
    c.table(doc, "top level", {
        "description": c.string(),
        "skip_steps": c.num(integer=True),
        "max_idle_fraction": c.num(0.0, 1.0),
        "kernels_per_step": lambda v, w: c.table(v, w, {
            "max": c.num(integer=True), "min": c.num(integer=True),
            "max_by_category": c.categories(c.num(integer=True))}),
        "must_fuse": c.array_of({"ops": c.ops, "min_per_step": c.num(1, integer=True), "label": c.string()},
                                ("ops",)),
        "forbid": c.array_of({"pattern": c.string(regex=True), "field": c.string(FORBID_FIELDS),
                              "scope": c.string(FORBID_SCOPES), "label": c.string()}, ("pattern",)),
        "max_gap": c.categories(c.num(0.0, above=True), ("all",)),
        "module": _module_schema(c),                     # issue 23: gate.module_rules
        "baseline": lambda v, w: c.table(v, w, {
            "path": c.string(), "max_time_ratio": c.num(0.0, above=True), "tolerance": c.num(),
            "kernels_tolerance": c.num(), "kernels": c.boolean, "fused": c.boolean, "time": c.boolean}),
    })
    if not _has_rule(doc):
        raise TracekitError(f"{p}: the rules file defines no rule (expected one of {', '.join(RULE_KEYS)}): "
                            "an empty gate would pass anything")
    base = dict(doc.get("baseline", {}))
    if "path" in base:
        base["path"] = str((p.parent / base["path"]))
    return Rules(path=str(p), doc=doc, skip_steps=int(doc.get("skip_steps", 0)), baseline=base)


def confined_baseline(rules: Rules) -> str | None:
    """The rules file's ``[baseline] path``, resolved against the rules file's folder: it must stay inside
    that folder (links resolved), so a rules file cannot have check read any file on the machine; a
    baseline elsewhere is given on the command line (--baseline)."""
    path = rules.baseline.get("path")
    if path is None:
        return None
    folder = os.path.realpath(Path(rules.path).parent)
    target = os.path.realpath(path)
    if os.path.commonpath([folder, target]) != folder:
        raise TracekitError(f"{rules.path}: [baseline] path {rules.doc['baseline']['path']!r} is outside the rules "
                            "file's folder: refused (pass that baseline with --baseline)")
    return path


def _has_rule(doc: dict) -> bool:
    """Whether a (validated) rules document asks for at least one check."""
    kps, base = doc.get("kernels_per_step", {}), doc.get("baseline")
    return bool("max" in kps or "min" in kps or kps.get("max_by_category") or doc.get("must_fuse")
                or doc.get("forbid") or doc.get("max_gap") or "max_idle_fraction" in doc or doc.get("module")
                or (base is not None and any(base.get(k, True) for k in ("kernels", "fused", "time"))))


def _step_name(side: Side, step: int) -> str:
    names = dict(zip(side.steps["step"], side.steps["name"]))
    return str(names.get(step, step))


def _names(df, limit: int = 4) -> list[str]:
    """Distinct kernel names in time order with counts: ``name ×2``."""
    counts = df["name"].value_counts(sort=False)
    out = [f"{short_name(n, 60)} ×{counts[n]}" for n in dict.fromkeys(df["name"])]
    return out[:limit] + ([f"… {len(out) - limit} more"] if len(out) > limit else [])


def _worst(per_step, high: bool = True):
    """(step, value) of the worst step of a Series indexed by step."""
    step = per_step.idxmax() if high else per_step.idxmin()
    return step, per_step[step]


def _count_rule(side: Side, rule: str, counts, limit: int, high: bool, what: str, mask=None) -> Result:
    step, value = _worst(counts, high)
    bad = int((counts > limit).sum() if high else (counts < limit).sum())
    ok = bad == 0
    found = f"{fmt_num(value)} in step {_step_name(side, step)}"
    if not ok and len(counts) > 1:
        found += f" ({bad} of {len(counts)} steps)"
    k = side.in_steps
    k = k[k["step"] == step]
    if mask is not None:
        k = k[mask(k)]
    return Result(rule, ok, f"{'≤' if high else '≥'} {limit} {what} per step", found, _names(k))


def _kernel_counts(side: Side):
    return side.in_steps.groupby("step").size().reindex(side.steps["step"], fill_value=0)


def evaluate(rules: Rules, side: Side) -> list[Result]:
    """Every rule of the file on one side (baseline rules are evaluated by check)."""
    doc, out = rules.doc, []
    kps = doc.get("kernels_per_step", {})
    if "max" in kps:
        out.append(_count_rule(side, "kernels_per_step.max", _kernel_counts(side), kps["max"], True, "kernels"))
    if "min" in kps:
        out.append(_count_rule(side, "kernels_per_step.min", _kernel_counts(side), kps["min"], False, "kernels"))
    by_cat = side.per_step_counts("category")
    for cat, limit in kps.get("max_by_category", {}).items():
        counts = by_cat[cat] if cat in by_cat else by_cat.iloc[:, :0].sum(axis=1)
        out.append(_count_rule(side, f"kernels_per_step.max_by_category[{cat}]", counts, limit, True,
                               f"{cat} kernels", mask=lambda k, c=cat: k["category"] == c))
    for item in doc.get("must_fuse", []):
        out.append(_must_fuse(side, item))
    for item in doc.get("forbid", []):
        out.append(_forbid(side, item))
    for cat, limit in doc.get("max_gap", {}).items():
        out.append(_max_gap(side, cat, limit))
    if "max_idle_fraction" in doc:
        out.append(_idle(side, doc["max_idle_fraction"]))
    if doc.get("module"):
        from tracekit.gate.module_rules import evaluate_module
        for item in doc["module"]:
            out += [Result(**r) for r in evaluate_module(side.in_steps, item, lambda k: _step_name(side, k))]
    return out


def _module_schema(c: _Checker):
    """``[[module]]``: a module path pattern and at least one limit (gate.module_rules)."""
    from tracekit.gate.module_rules import PHASES
    items = c.array_of({"path": c.string(), "max_kernels": c.num(integer=True), "max_gap": c.num(0.0, above=True),
                        "phase": c.string(PHASES), "label": c.string()}, ("path",))

    def check(v, where):
        items(v, where)
        for i, item in enumerate(v):
            if "max_kernels" not in item and "max_gap" not in item:
                raise c.fail(f"{where}[{i}]", "sets no limit (max_kernels or max_gap)")
    return check


def _mask(df, flags: list[bool]) -> np.ndarray:
    """A row mask (a plain list would select columns when empty)."""
    return np.asarray(flags, dtype=bool).reshape(len(df))


def _must_fuse(side: Side, item: dict) -> Result:
    want = expand_ops(item["ops"])
    need = item.get("min_per_step", 1)
    label = item.get("label") or "+".join(item["ops"])
    k = side.in_steps
    doing = k[_mask(k, [want <= expand_ops(f) for f in k["fused_ops"]])]
    counts = doing.groupby("step").size().reindex(side.steps["step"], fill_value=0)
    step, value = _worst(counts, high=False)
    ok = bool((counts >= need).all())
    ks = k[k["step"] == step]
    parts = ks[_mask(ks, [bool(want & expand_ops(f)) for f in ks["fused_ops"]])]
    kernels = [f"{short_name(n, 60)} [{'+'.join(f) or '?'}]" for n, f in
               dict(zip(parts["name"], parts["fused_ops"])).items()][:4]
    return Result(f"must_fuse[{label}]", ok, f"≥ {need} kernel(s) per step doing {'+'.join(item['ops'])} "
                  "in one kernel", f"{value} in step {_step_name(side, step)}", kernels)


def _forbid(side: Side, item: dict) -> Result:
    fld, scope = item.get("field", "name"), item.get("scope", "steps")
    rx = UserRegex(item["pattern"], f"forbid pattern {item['pattern']!r}")
    k = side.in_steps if scope == "steps" else side.kernels
    hit = k[_mask(k, [rx.search(v) if isinstance(v, str) else False for v in k[fld]])]
    label = item.get("label") or item["pattern"]
    where = "inside steps" if scope == "steps" else "anywhere"
    found = f"{len(hit)} kernel(s)" + (f" in {hit['step'].nunique()} step(s)" if len(hit) and scope == "steps" else "")
    return Result(f"forbid[{label}]", len(hit) == 0, f"no kernel whose {fld} matches /{item['pattern']}/ {where}",
                  found, _names(hit))


def _max_gap(side: Side, cat: str, limit: float) -> Result:
    k = side.in_steps
    k = k if cat == "all" else k[k["category"] == cat]
    floor = k["floor_us"].to_numpy(dtype=float)
    rule, expected = f"max_gap[{cat}]", f"≤ {fmt_num(limit, 2)}× the floor ({cat} kernel time / floor per step)"
    if not len(k):
        return Result(rule, False, expected, f"no {cat} kernel in any step", [])
    k = k[np.isfinite(floor) & (floor > 0)]
    if not len(k):
        return Result(rule, False, expected, f"no {cat} kernel with a floor (unknown device? use --device or "
                      "--spec)", [])
    g = k.groupby("step")[["dur_us", "floor_us"]].sum()
    gaps = g["dur_us"] / g["floor_us"]
    step, value = _worst(gaps)
    ks = k[k["step"] == step]
    by = ks.groupby("name")[["dur_us", "floor_us"]].sum()
    by = by.assign(excess=by["dur_us"] - by["floor_us"]).sort_values("excess", ascending=False).head(3)
    kernels = [f"{short_name(n, 60)} {r.dur_us / r.floor_us:.1f}× (+{r.excess:.1f} µs)" for n, r in by.iterrows()]
    return Result(rule, bool((gaps <= limit).all()), expected,
                  f"{value:.2f}× in step {_step_name(side, step)}", kernels)


def _idle(side: Side, limit: float) -> Result:
    st = side.steps
    window = st["window_us"].astype(float)
    idle = (st["idle_us"].astype(float) / window).where(window > 0).fillna(0.0)
    idle.index = st["step"]
    step, value = _worst(idle)
    return Result("max_idle_fraction", bool((idle <= limit + 1e-12).all()),
                  f"GPU idle ≤ {limit:.0%} of each step's kernel window",
                  f"{value:.1%} in step {_step_name(side, step)}", [])


def baseline_settings(rules: Rules | None, tolerance: dict | None) -> dict:
    """Baseline comparison settings: the rules file's [baseline], then --tolerance on top."""
    b = dict(rules.baseline) if rules else {}
    tol = {"time": float(b.get("tolerance", DEFAULT_TOLERANCE["time"])),
           "kernels": float(b.get("kernels_tolerance", DEFAULT_TOLERANCE["kernels"])),
           "time_ratio": float(b.get("max_time_ratio", 1.0))}
    if tolerance:
        tol.update(tolerance)
    return {"tol": tol, "kernels": b.get("kernels", True), "fused": b.get("fused", True),
            "time": b.get("time", True)}


def evaluate_baseline(doc: dict, settings: dict) -> list[Result]:
    """Turn diff's comparison (A = baseline, B = current) into one Result per baseline rule."""
    from tracekit.gate.diff import regressions
    fails: dict[str, list[dict]] = {}
    for r in regressions(doc, settings["tol"], by_category=True):
        fails.setdefault(r["rule"], []).append(r)
    ps, out = doc["per_step"], []

    def add(rule: str, expected: str, found: str):
        got = fails.get(rule, [])
        out.extend(Result(f["rule"], False, f["expected"], f["found"], f["kernels"]) for f in got)
        if not got:
            out.append(Result(rule, True, expected, found))

    if settings["kernels"]:
        add("baseline.kernels_per_step", f"≤ {fmt_num(ps['kernels']['a'])} kernels per step",
            fmt_num(ps["kernels"]["b"]))
        for c in doc["by_category"]:
            add(f"baseline.kernels_per_step[{c['category']}]",
                f"≤ {fmt_num(c['kernels_a'], 2)} {c['category']} kernels per step", fmt_num(c["kernels_b"], 2))
    if settings["fused"]:
        f = doc["fused_ops"]
        add("baseline.fused_ops", "no fused-op set of the baseline lost",
            f"{len(f['kept'])} kept, {len(f['gained'])} gained")
    if settings["time"]:
        t, tol = ps["kernel_us"], settings["tol"]        # the limit diff.regressions applies, as it words it
        ratio = tol.get("time_ratio", 1.0)
        add("baseline.kernel_us_per_step",
            f"≤ {fmt_num(t['a'] * ratio, 2)} µs × (1 + {tol['time']:.0%})" if t["a"] is not None else "≤ baseline",
            f"{fmt_num(t['b'], 2)} µs")
    return out
