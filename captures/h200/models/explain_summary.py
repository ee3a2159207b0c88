"""Summarise `tracekit explain BUNDLE --format json` outputs: per bundle, steps, kernels per step, kernel time
per step, share of kernel time with no floor (rows whose floor_us is null), top uncosted ops/kernels by time.
Usage: python3 explain_summary.py NAME=EXPLAIN.json ... [--md]"""
import collections
import json
import sys


def short(name, n=60):
    return name if len(name) <= n else name[:n - 1] + "…"


def summarise(path):
    d = json.load(open(path))
    s = d["summary"]
    rows = [k for k in d["kernels"] if k.get("step") is not None and k["step"] >= 0]
    tot = sum(k["dur_us"] or 0 for k in rows)
    unc = [k for k in rows if k.get("floor_us") is None]
    unc_t = sum(k["dur_us"] or 0 for k in unc)
    sib_t = sum(k["dur_us"] or 0 for k in unc if (k.get("cost_note") or "").startswith("op cost counted on sibling"))
    by = collections.defaultdict(lambda: [0.0, 0, ""])
    for k in unc:
        key = k.get("op") or ("kernel " + short(k["name"], 50))
        by[key][0] += k["dur_us"] or 0
        by[key][1] += 1
        by[key][2] = k.get("cost_note") or ""
    top = sorted(by.items(), key=lambda kv: -kv[1][0])[:5]
    return dict(steps=s["steps"], step_rule=s.get("step_rule"), kernels_per_step=s["kernels_per_step"],
                kernel_us_per_step=[round(x, 1) for x in s["kernel_us_per_step"]],
                floor_us_per_step=[None if x is None else round(x, 1) for x in s["floor_us_per_step"]],
                kernels_outside_steps=s.get("kernels_outside_steps"),
                costed_time_pct_summary=round(s["costed_time_pct"], 2) if s.get("costed_time_pct") is not None else None,
                uncosted_time_pct=round(100 * unc_t / tot, 2) if tot else None, uncosted_us=round(unc_t, 1),
                sibling_pct=round(100 * sib_t / tot, 2) if tot else None,
                in_step_kernel_us=round(tot, 1), warnings=len(d.get("warnings") or []),
                top_uncosted=[(op, round(t, 1), n, note) for op, (t, n, note) in top])


def main():
    md = "--md" in sys.argv
    for arg in sys.argv[1:]:
        if arg == "--md":
            continue
        name, path = arg.split("=", 1)
        r = summarise(path)
        if not md:
            print(name, json.dumps(r))
            continue
        kps = sorted(set(r["kernels_per_step"]))
        print(f"**{name}** — {r['steps']} steps ({r['step_rule']}); kernels/step {kps if len(kps) > 1 else kps[0]}"
              f" (+{r['kernels_outside_steps']} outside steps); kernel µs/step {r['kernel_us_per_step']}; "
              f"floor µs/step {r['floor_us_per_step']}; no-floor share of in-step kernel time "
              f"**{r['uncosted_time_pct']}%** ({r['uncosted_us']} of {r['in_step_kernel_us']} µs; explain's "
              f"costed_time_pct {r['costed_time_pct_summary']}%), of which {r['sibling_pct']}% are kernels whose op's cost "
              f"is counted on a sibling kernel; warnings {r['warnings']}")
        print()
        print("| uncosted op / kernel | µs (all steps) | kernels | cost_note |")
        print("|---|---|---|---|")
        for op, t, n, note in r["top_uncosted"]:
            print(f"| `{short(op, 70)}` | {t} | {n} | {short(note, 90)} |")
        print()


if __name__ == "__main__":
    main()
