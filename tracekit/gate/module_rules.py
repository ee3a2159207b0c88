"""``[[module]]`` rules of ``tracekit check`` and ``diff --by module``: kernels, time and gap per module
instance and step (issue 23).

A rule's ``path`` is matched against each kernel's module path (``Qwen2Model_0/Qwen2DecoderLayer_3/
Qwen2Attention_3``) one component at a time, ``/`` or ``.`` between components: a component matches an
instance name or its class (``Qwen2Attention`` and ``Qwen2Attention_*`` both match ``Qwen2Attention_3``),
with shell wildcards (``*``, ``?``, ``[…]``). The pattern matches the innermost components of a module's
path (``Block/Attn`` matches ``GPT_0/Block_2/Attn_2``); a leading ``/`` anchors it at the outermost one.
A component ``@name`` matches a user annotation (``record_function``) inside a module (``@loss_fn``,
``Attn/@my_region``; annotations follow the module path). Every module instance (or annotated region) the
pattern matches is checked on every kept step; the worst one is reported.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

import numpy as np
import pandas as pd

PHASES = ("forward", "backward", "optimizer")
_INSTANCE = re.compile(r"_\d+$")
_SPLIT = re.compile(r"[/.]")


def split_pattern(pattern: str) -> tuple[list[str], bool]:
    """(components, anchored at the outermost module)."""
    anchored = pattern.startswith("/")
    return [p for p in _SPLIT.split(pattern.strip("/")) if p], anchored


def _component(name: str, pat: str) -> bool:
    return fnmatchcase(name, pat) or fnmatchcase(_INSTANCE.sub("", name), pat)


def matched_instances(path: str, pattern: tuple[list[str], bool]) -> list[str]:
    """The module instances on ``path`` (its prefixes) that the pattern matches, outermost first."""
    comps = [c for c in path.split("/") if c] if isinstance(path, str) else []
    pats, anchored = pattern
    out = []
    for j in range(1, len(comps) + 1):
        if j < len(pats) or (anchored and j != len(pats)):
            continue
        if all(_component(c, p) for c, p in zip(comps[j - len(pats):j], pats)):
            out.append("/".join(comps[:j]))
    return out


def per_instance(kernels: pd.DataFrame, pattern: str, phase: str | None = None) -> pd.DataFrame:
    """Per (instance, step): kernels, kernel time, and the time and floor of the kernels with a floor.
    ``kernels``: a side's kernels inside its kept steps, with ``module``, ``phase`` and (annotations too)
    ``scope`` columns."""
    pat = split_pattern(pattern)
    k = kernels if phase is None else kernels[kernels["phase"] == phase]
    column = "scope" if "scope" in k else "module"
    memo: dict = {}
    rows = []
    floor = k["floor_us"].to_numpy(dtype=float)
    dur = k["dur_us"].to_numpy(dtype=float)
    # the tree's and the step's gap: the time of the kernels set against a floor (a split-K reduce or a
    # foreach chunk beside its op's carrier counts) over the floors' sum
    covered = k["covered"].to_numpy(dtype=bool) if "covered" in k else ~np.isnan(floor)
    for path, step, d, f, c in zip(k[column].tolist(), k["step"].tolist(), dur.tolist(), floor.tolist(),
                                   covered.tolist()):
        got = memo.get(path)
        if got is None:
            got = memo[path] = matched_instances(path, pat)
        floored = f == f and f > 0
        for inst in got:
            rows.append((inst, step, d, d if c else 0.0, f if floored else 0.0))
    df = pd.DataFrame(rows, columns=["instance", "step", "dur_us", "costed_us", "floor_us"])
    g = df.groupby(["instance", "step"], sort=False)
    out = g.agg(kernels=("dur_us", "size"), dur_us=("dur_us", "sum"), costed_us=("costed_us", "sum"),
                floor_us=("floor_us", "sum")).reset_index()
    out["gap"] = np.where(out["floor_us"] > 0, out["costed_us"] / out["floor_us"].where(out["floor_us"] > 0), np.nan)
    return out


def evaluate_module(kernels: pd.DataFrame, item: dict, step_name) -> list[dict]:
    """One ``[[module]]`` item: a result (rule, ok, expected, found, kernels) per limit it sets.
    ``step_name``: step index → its name."""
    label = item.get("label") or item["path"]
    phase = item.get("phase")
    where = f" ({phase})" if phase else ""
    table = per_instance(kernels, item["path"], phase)
    out = []
    for key, what in (("max_kernels", "kernels"), ("max_gap", "gap")):
        if key not in item:
            continue
        limit = item[key]
        rule = f"module[{label}].{key}"
        expected = (f"≤ {limit} kernels per step in each module matching {item['path']!r}{where}" if key == "max_kernels"
                    else f"≤ {limit:g}× the floor in each module matching {item['path']!r}{where}")
        values = table[what] if len(table) else pd.Series(dtype=float)
        if not len(table) or values.isna().all():
            found = "no module matches" if not len(table) else "no kernel with a floor in the matching modules"
            out.append(dict(rule=rule, ok=False, expected=expected, found=found, kernels=[]))
            continue
        worst = table.loc[values.idxmax()]
        bad = table[values > limit]
        found = (f"{int(worst['kernels'])} kernels" if key == "max_kernels" else f"{worst['gap']:.2f}×") + \
            f" in {worst['instance']}, step {step_name(int(worst['step']))}"
        if len(bad):
            found += f" ({bad['instance'].nunique()} of {table['instance'].nunique()} modules)"
        names = _kernel_names(kernels, worst, phase)
        out.append(dict(rule=rule, ok=not len(bad), expected=expected, found=found, kernels=names))
    return out


def _kernel_names(kernels: pd.DataFrame, worst, phase: str | None, limit: int = 4) -> list[str]:
    inst = worst["instance"]
    column = "scope" if "scope" in kernels else "module"
    k = kernels[(kernels["step"] == worst["step"]) & kernels[column].map(
        lambda p: isinstance(p, str) and (p == inst or p.startswith(inst + "/")))]
    if phase is not None:
        k = k[k["phase"] == phase]
    counts = k["name"].value_counts(sort=False)
    out = [f"{str(n)[:60]} ×{counts[n]}" for n in dict.fromkeys(k["name"])]
    return out[:limit] + ([f"… {len(out) - limit} more"] if len(out) > limit else [])


def module_diff(a: pd.DataFrame, b: pd.DataFrame, a_steps: int, b_steps: int, pattern: str = "*") -> pd.DataFrame:
    """Per module instance (every module the pattern matches; default every module): kernels and time per
    step (means over the kept steps) on each side and the change: instances whose kernel count changed
    first, then by the size of the time change."""
    def mean(k, n):
        t = per_instance(k, pattern)
        if not len(t):
            return pd.DataFrame(columns=["kernels", "dur_us"])
        return t.groupby("instance")[["kernels", "dur_us"]].sum() / max(1, n)
    ma, mb = mean(a, a_steps), mean(b, b_steps)
    both = ma.add_suffix("_a").join(mb.add_suffix("_b"), how="outer").fillna(0.0)
    both["kernels_delta"] = both["kernels_b"] - both["kernels_a"]
    both["dur_us_delta"] = both["dur_us_b"] - both["dur_us_a"]
    both = both.reset_index().rename(columns={"index": "instance"})
    both["_gained"] = both["kernels_delta"].abs() > 1e-9                # kernel count changes first
    both["_time"] = both["dur_us_delta"].abs()
    both = both.sort_values(["_gained", "_time"], ascending=False, kind="stable")
    return both.drop(columns=["_gained", "_time"]).reset_index(drop=True)


def module_regressions(rows: list[dict], tol_kernels: float) -> list[dict]:
    """Module instances with more kernels per step on B than on A (beyond the kernel tolerance)."""
    return [{"rule": f"module.kernels_per_step[{r['instance']}]",
             "expected": f"≤ {r['kernels_a']:g} kernels per step", "found": f"{r['kernels_b']:g}", "kernels": []}
            for r in rows if r["kernels_b"] > r["kernels_a"] * (1 + tol_kernels) + 1e-9]


def module_lines(rows: list[dict], top: int) -> list[str]:
    """diff --by module's text: the instances whose time per step changed most."""
    lines = [f"by module ({len(rows)} instances; kernel count changes first, then largest time change):",
             f"  {'module':<38} {'kernels A → B':>15} {'us/step A → B':>20}"]
    for r in rows[:top]:
        name = r["instance"] if len(r["instance"]) <= 38 else "…" + r["instance"][-37:]
        lines.append(f"  {name:<38} {r['kernels_a']:>6g} → {r['kernels_b']:<6g} "
                     f"{r['dur_us_a']:>9.2f} → {r['dur_us_b']:<9.2f}".rstrip())
    return lines
