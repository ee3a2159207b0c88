"""``tracekit diff A B``: two traces lined up step by step.

Headline numbers and categories are the median step (kernels, kernel time, floor, gap, idle); kernel
names, launching ops and fused-op sets are means per step (a name seen in one step of six counts 1/6).
Kernels are matched by name; names left over on both sides are matched by (launching op, category),
which lines up the same work compiled or scheduled differently (``cutlass`` vs ``volta_sgemm`` for addmm).
"""

from __future__ import annotations


import pandas as pd

from tracekit.errors import TracekitError, warn
from tracekit.gate.baseline import Side, fmt_num, short_name

EPS = 1e-9
PER_STEP = [("kernels", "kernels"), ("kernel_us", "kernel time (µs)"), ("floor_us", "floor (µs)"),
            ("gap", "gap (time/floor)"), ("idle_us", "idle (µs)"), ("busy_pct", "GPU busy (%)")]


def side_info(s: Side) -> dict:
    outside = int((s.kernels["step"] < 0).sum())
    return {"path": s.path, "source": s.source, "device": s.device, "spec": s.spec, "step_rule": s.step_rule,
            "steps": len(s.steps), "skipped_steps": s.skipped_steps,
            "kernels_per_step": [int(n) for n in s.steps["kernels"]], "kernels_outside_steps": outside}


def _delta(a: float | None, b: float | None) -> dict:
    d = {"a": a, "b": b, "delta": None, "ratio": None}
    if a is not None and b is not None:
        d["delta"] = b - a
        d["ratio"] = (b / a) if a else None
    return d


def _by_name(a: Side, b: Side, tol_time: float) -> dict:
    ma, mb = a.mean_by("name"), b.mean_by("name")
    info = pd.concat([a.in_steps, b.in_steps]).drop_duplicates("name").set_index("name")[["category", "op"]]

    def row(name, m):
        return {"name": name, "category": info.at[name, "category"], "op": _s(info.at[name, "op"]),
                "count_per_step": float(m.at[name, "count"]), "us_per_step": float(m.at[name, "dur_us"])}

    changed, unchanged = [], 0
    for name in ma.index.intersection(mb.index):
        ca, cb = float(ma.at[name, "count"]), float(mb.at[name, "count"])
        ua, ub = float(ma.at[name, "dur_us"]), float(mb.at[name, "dur_us"])
        if abs(cb - ca) > EPS or abs(ub - ua) > tol_time * ua:
            changed.append({"name": name, "category": info.at[name, "category"], "op": _s(info.at[name, "op"]),
                            "count_a": ca, "count_b": cb, "us_a": ua, "us_b": ub, "us_delta": ub - ua})
        else:
            unchanged += 1
    only_a = [row(n, ma) for n in ma.index.difference(mb.index)]
    only_b = [row(n, mb) for n in mb.index.difference(ma.index)]
    by_op, only_a, only_b = _match_by_op(only_a, only_b)
    key = lambda r: -abs(r.get("us_delta", r.get("us_per_step", 0.0)))  # noqa: E731
    return {"added": sorted(only_b, key=key), "removed": sorted(only_a, key=key),
            "changed": sorted(changed, key=key), "matched_by_op": sorted(by_op, key=key), "unchanged": unchanged}


def _s(v):
    return v if isinstance(v, str) else None


def _match_by_op(only_a: list[dict], only_b: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """Names present on one side only, paired when they share (op, category)."""
    def groups(rows):
        g: dict = {}
        for r in rows:
            if r["op"]:
                g.setdefault((r["op"], r["category"]), []).append(r)
        return g
    ga, gb = groups(only_a), groups(only_b)
    matched, used = [], set()
    for key in ga.keys() & gb.keys():
        ra, rb = ga[key], gb[key]
        used.update(id(r) for r in ra + rb)
        ua, ub = sum(r["us_per_step"] for r in ra), sum(r["us_per_step"] for r in rb)
        matched.append({"op": key[0], "category": key[1], "names_a": [r["name"] for r in ra],
                        "names_b": [r["name"] for r in rb], "count_a": sum(r["count_per_step"] for r in ra),
                        "count_b": sum(r["count_per_step"] for r in rb), "us_a": ua, "us_b": ub,
                        "us_delta": ub - ua})
    return matched, [r for r in only_a if id(r) not in used], [r for r in only_b if id(r) not in used]


def _fusions(a: Side, b: Side) -> dict:
    """Fused-op sets per step; a set is lost when fewer kernels on B perform all of it. A lost set is
    ``refused`` (fused differently, not a regression) when B runs no more kernels per step than A and
    every op of the set is still done on B, e.g. a compiled run that moves a GEMM's bias add out of the
    GEMM and into a pointwise kernel with the activation."""
    fa, fb = a.fusions(), b.fusions()
    out = {"gained": [], "lost": [], "kept": []}
    more_fused = b.median("kernels") is not None and a.median("kernels") is not None and \
        b.median("kernels") <= a.median("kernels")
    for s in sorted(fa.keys() | fb.keys(), key=lambda s: sorted(s)):
        na, nb = a.kernels_doing(s), b.kernels_doing(s)
        entry = {"ops": "+".join(sorted(s)), "a": na, "b": nb}
        if nb < na - EPS and s in fa:
            entry["refused"] = more_fused and all(b.kernels_doing(frozenset([op])) > 0 for op in s)
            out["lost"].append(entry)
        elif nb > na + EPS and s in fb:
            out["gained"].append(entry)
        else:
            out["kept"].append(entry)
    return out


def device_check(a: Side, b: Side, allow_device_mismatch: bool = False) -> str | None:
    """A line when A and B name different devices (TracekitError unless ``allow_device_mismatch``), or
    when only one names its device; None when they agree."""
    da, db = (s.device.strip() if isinstance(s.device, str) and s.device.strip() else None for s in (a, b))
    if da is None and db is None or (da and db and da.casefold() == db.casefold()):
        return None
    if da and db:
        line = f"{a.path} ran on {da[:80]!r} and {b.path} on {db[:80]!r}: kernel times are not comparable"
        if not allow_device_mismatch:
            raise TracekitError(line + " (pass --allow-device-mismatch to compare them anyway)")
        return line
    named, path = (da, b.path) if da else (db, a.path)
    return f"{path} names no device (the other side ran on {named[:80]!r}): cannot tell whether both ran on it"


def compare(a: Side, b: Side, tol: dict, allow_device_mismatch: bool = False) -> dict:
    """Everything diff reports, as plain data (the ``--format json`` document). Sides from different
    devices are an error unless ``allow_device_mismatch`` (then a warning, as is an unnamed device)."""
    mismatch = device_check(a, b, allow_device_mismatch)
    if mismatch:
        warn(mismatch)
    per_step = {k: _delta(a.median(k), b.median(k)) for k, _ in PER_STEP}
    ca, cb = a.median_by("category"), b.median_by("category")
    cats = []
    for c in sorted(ca.index.union(cb.index)):
        ka = float(ca.at[c, "count"]) if c in ca.index else 0.0
        kb = float(cb.at[c, "count"]) if c in cb.index else 0.0
        ua = float(ca.at[c, "dur_us"]) if c in ca.index else 0.0
        ub = float(cb.at[c, "dur_us"]) if c in cb.index else 0.0
        cats.append({"category": c, "kernels_a": ka, "kernels_b": kb, "kernels_delta": kb - ka,
                     "us_a": ua, "us_b": ub, "us_delta": ub - ua})
    doc = {"a": side_info(a), "b": side_info(b), "per_step": per_step, "by_category": cats,
           "kernels": _by_name(a, b, tol["time"]), "fused_ops": _fusions(a, b), "tolerance": tol,
           "measured": "median step for per_step and by_category; mean per step for kernels and fused_ops",
           "device_warning": mismatch}
    doc["regressions"] = regressions(doc, tol)
    return doc


def regressions(doc: dict, tol: dict, by_category: bool = False) -> list[dict]:
    """B worse than A: more kernels per step, fused ops lost, kernel time per step up beyond tolerance."""
    out = []
    k = doc["per_step"]["kernels"]
    if k["a"] is not None and k["b"] is not None and k["b"] > k["a"] * (1 + tol["kernels"]) + EPS:
        added = [short_name(r["name"]) for r in doc["kernels"]["added"][:3]]
        out.append({"rule": "baseline.kernels_per_step", "expected": f"≤ {fmt_num(k['a'])} kernels per step"
                    + (f" (+{tol['kernels']:.0%})" if tol["kernels"] else ""),
                    "found": f"{fmt_num(k['b'])}", "kernels": added})
    if by_category:
        for c in doc["by_category"]:
            if c["kernels_b"] > c["kernels_a"] * (1 + tol["kernels"]) + EPS:
                out.append({"rule": f"baseline.kernels_per_step[{c['category']}]",
                            "expected": f"≤ {fmt_num(c['kernels_a'])} {c['category']} kernels per step",
                            "found": fmt_num(c["kernels_b"]), "kernels": []})
    for f in (f for f in doc["fused_ops"]["lost"] if not f.get("refused")):
        out.append({"rule": "baseline.fused_ops", "expected": f"{fmt_num(f['a'])} kernel(s) per step doing {f['ops']}",
                    "found": fmt_num(f["b"]), "kernels": []})
    t = doc["per_step"]["kernel_us"]
    ratio = tol.get("time_ratio", 1.0)
    if t["a"] is not None and t["b"] is not None and t["b"] > t["a"] * ratio * (1 + tol["time"]) + EPS:
        worst = [short_name(r.get("name") or r.get("op")) for r in doc["kernels"]["changed"][:3]]
        out.append({"rule": "baseline.kernel_us_per_step",
                    "expected": f"≤ {fmt_num(t['a'] * ratio, 2)} µs × (1 + {tol['time']:.0%})",
                    "found": f"{fmt_num(t['b'], 2)} µs ({t['b'] / t['a']:.2f}×)" if t["a"] else fmt_num(t["b"], 2),
                    "kernels": worst})
    return out


def _pct(d: dict) -> str:
    if d["delta"] is None:
        return ""
    sign = "+" if d["delta"] >= 0 else ""
    return f"{sign}{fmt_num(d['delta'], 2)}" + (f" ({sign}{(d['ratio'] - 1) * 100:.1f}%)" if d["ratio"] else "")


def _side_line(tag: str, s: dict) -> str:
    return (f"{tag}: {s['path']} [{s['source']}; {s['device'] or 'unknown device'}; {s['steps']} step(s) by "
            f"{s['step_rule']}" + (f", first {s['skipped_steps']} skipped" if s["skipped_steps"] else "") + "]")


def _kernel_lines(doc: dict, top: int, md: bool) -> list[str]:
    k = doc["kernels"]
    b = "`" if md else ""
    lines = [f"kernels: {len(k['added'])} added, {len(k['removed'])} removed, {len(k['changed'])} changed, "
             f"{len(k['matched_by_op'])} matched by op, {k['unchanged']} unchanged (per step, mean)"]
    for tag, rows in (("+", k["added"]), ("-", k["removed"])):
        for r in rows[:top]:
            lines.append(f"  {tag} {b}{short_name(r['name'])}{b} ({r['category']}): {fmt_num(r['count_per_step'], 2)}"
                         f"/step, {fmt_num(r['us_per_step'], 2)} µs/step")
    for r in k["changed"][:top]:
        lines.append(f"  ~ {b}{short_name(r['name'])}{b}: {fmt_num(r['count_a'], 2)} → {fmt_num(r['count_b'], 2)}"
                     f"/step, {fmt_num(r['us_a'], 2)} → {fmt_num(r['us_b'], 2)} µs/step")
    for r in k["matched_by_op"][:top]:
        lines.append(f"  = {b}{r['op']}{b} ({r['category']}): {len(r['names_a'])} name(s) → {len(r['names_b'])}, "
                     f"{fmt_num(r['count_a'], 2)} → {fmt_num(r['count_b'], 2)}/step, "
                     f"{fmt_num(r['us_a'], 2)} → {fmt_num(r['us_b'], 2)} µs/step "
                     f"({b}{short_name(r['names_a'][0], 40)}{b} → {b}{short_name(r['names_b'][0], 40)}{b})")
    return lines


def _fused_lines(doc: dict, md: bool = False) -> list[str]:
    f = doc["fused_ops"]
    lines = [f"fused ops: {len(f['gained'])} gained, {len(f['lost'])} lost, {len(f['kept'])} kept"]
    lines += [""] if md else []
    for tag, rows in (("gained", f["gained"]), ("lost", f["lost"])):
        lines += [f"{'- ' if md else '  '}{tag} {'`' if md else ''}{r['ops']}{'`' if md else ''}: "
                  f"{fmt_num(r['a'], 2)} → {fmt_num(r['b'], 2)} kernels/step doing it"
                  + (" (fused differently on B, fewer kernels: not a regression)" if r.get("refused") else "")
                  for r in rows]
    return lines


def to_text(doc: dict, top: int = 10) -> str:
    lines = [_side_line("A", doc["a"]), _side_line("B", doc["b"]), "",
             f"{'per step (median)':<22}{'A':>14}{'B':>14}  delta"]
    for key, label in PER_STEP:
        d = doc["per_step"][key]
        lines.append(f"  {label:<20}{fmt_num(d['a'], 2):>14}{fmt_num(d['b'], 2):>14}  {_pct(d)}")
    lines += ["", "by category (median step): kernels A → B, time A → B (µs)"]
    for c in sorted(doc["by_category"], key=lambda c: -abs(c["us_delta"])):
        lines.append(f"  {c['category']:<14}{fmt_num(c['kernels_a'], 2):>9} → {fmt_num(c['kernels_b'], 2):<9}"
                     f"{fmt_num(c['us_a'], 2):>12} → {fmt_num(c['us_b'], 2)}")
    lines += [""] + _kernel_lines(doc, top, md=False) + [""] + _fused_lines(doc) + [""]
    regs = doc["regressions"]
    lines.append("regressions: none" if not regs else f"regressions: {len(regs)}")
    lines += [f"  {r['rule']}: expected {r['expected']}, found {r['found']}" for r in regs]
    return "\n".join(lines) + "\n"


def to_markdown(doc: dict, top: int = 10) -> str:
    a, b = doc["a"], doc["b"]
    regs = doc["regressions"]
    head = "✅ no regression" if not regs else f"❌ {len(regs)} regression(s)"
    from tracekit.report.markdown import md_code, md_table, md_text      # the pieces explain's Markdown uses

    def side(tag: str, s: dict) -> str:
        return f"**{tag}** {md_code(s['path'], 500)} ({md_text(s['device'] or 'unknown device', 80)}, {s['steps']} steps)"

    lines = [f"### tracekit diff: {head}", "", side("A", a) + "  ", side("B", b), ""]
    lines += md_table(["per step (median)", "A", "B", "delta"], "lrrr",
                      [[label, fmt_num(doc["per_step"][key]["a"], 2), fmt_num(doc["per_step"][key]["b"], 2),
                        _pct(doc["per_step"][key])] for key, label in PER_STEP])
    lines += [""] + md_table(["category", "kernels/step A", "B", "µs/step A", "B"], "lrrrr",
                             [[md_text(c["category"]), fmt_num(c["kernels_a"], 2), fmt_num(c["kernels_b"], 2),
                               fmt_num(c["us_a"], 2), fmt_num(c["us_b"], 2)]
                              for c in sorted(doc["by_category"], key=lambda c: -abs(c["us_delta"]))])
    if regs:
        lines += ["", "**Regressions**", ""] + [f"- {md_code(r['rule'], 200)}: expected {md_text(r['expected'], 500)}, "
                                                f"found {md_text(r['found'], 500)}" for r in regs]
    klines = _kernel_lines(doc, top, md=True)
    lines += ["", "<details><summary>" + klines[0] + "</summary>", "", "```diff"]
    lines += [ln.strip().replace("`", "").replace("~ ", "! ", 1) for ln in klines[1:]] + ["```", "</details>", ""]
    lines += _fused_lines(doc, md=True)
    return "\n".join(lines) + "\n"

