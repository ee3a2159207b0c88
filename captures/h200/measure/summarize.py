"""One Markdown table of several `tracekit measure` JSON files: per workload and scope, median, spread,
× floor; then J/step, W, tok/J. Usage: python3 summarize.py NAME=FILE.json ..."""
import json
import sys


def us(x):
    if x is None:
        return "-"
    return f"{x / 1e3:,.3f} ms" if x >= 1e3 else f"{x:,.2f} µs"


def main():
    docs = [(a.rsplit("=", 1)[0], json.load(open(a.rsplit("=", 1)[1]))) for a in sys.argv[1:]]
    print("| scope | " + " | ".join(name for name, _ in docs) + " |")
    print("|---|" + "---|" * len(docs))
    print("| floor | " + " | ".join(us(d["floor"]["us"]) for _, d in docs) + " |")
    for k, first in enumerate(docs[0][1]["scopes"]):
        cells = []
        for _, d in docs:
            s = d["scopes"][k]
            if not s["available"]:
                cells.append("n/a")
                continue
            spread = "" if s["spread_pct"] is None else f" ±{s['spread_pct']:.1f} %"
            xf = "" if s.get("x_floor") is None else f" ({s['x_floor']:.2f}×)"
            cells.append(f"{us(s['median_us'])}{spread}{xf}")
        print(f"| {first['label']} | " + " | ".join(cells) + " |")
    print()
    print("| workload | J/step | W | window | tok/J | tok/s | SM / mem clock MHz | power limit W | temp °C |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, d in docs:
        e = d["energy"]
        if not e.get("available"):
            print(f"| {name} | n/a: {e.get('reason')} | | | | | | | |")
            continue
        m = e["samples"]["middle"]
        tpj = "-" if e.get("tok_per_j") is None else f"{e['tok_per_j']:,.2f}"
        tps = "-" if e.get("tok_per_s") is None else f"{e['tok_per_s']:,.0f}"
        ok = "" if e["window_ok"] else " (flagged)"
        print(f"| {name} | {e['j_per_step']:.4g} | {e['avg_w']:.1f} | {e['window_s']:.2f} s, {e['calls']} calls{ok} | "
              f"{tpj} | {tps} | {m.get('sm_clock_mhz')} / {m.get('mem_clock_mhz')} | "
              f"{e['device'].get('power_limit_w')} | {m.get('temperature_c')} |")


if __name__ == "__main__":
    main()
