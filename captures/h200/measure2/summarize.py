"""The figures of README.md from results/: per workload, the plain NVML loop (J and µs per call, median
and range over its windows) against each `tracekit measure` run's energy window (J/step, µs per call =
window / calls) and its ② continuous median, for the fixed (new) and the previous (old) tracekit.
Usage: python3 summarize.py [RESULTS_DIR]  (prints Markdown; `figures()` is what the test reads)."""
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# workload: (plain files and their key, measure runs' prefix)
WORKLOADS = {"decode step": (("decode_plain_a", "decode_plain_b"), "step", ("decode_new_", "decode_old_")),
             "decode module": (("decode_plain_a", "decode_plain_b"), "module", ("decode_module_new", "decode_module_old")),
             "train step": (("train_plain_a", "train_plain_b"), "step", ("train_new_", "train_old_"))}


def _load(path: Path):
    return json.loads(path.read_text()) if path.is_file() else None


def figures(results: Path = HERE / "results") -> dict:
    out = {}
    for name, (plains, key, (new, old)) in WORKLOADS.items():
        windows = [w for p in plains if (d := _load(results / f"{p}.json")) for w in d[key]["windows"]]
        after = [w for p in plains if (d := _load(results / f"{p}.json")) and key == "step" and "step_after_profiler" in d
                 for w in d["step_after_profiler"]["windows"]]
        row = {"plain": _stats(windows), "plain_after_profiler": _stats(after) if after else None}
        for tag, prefix in (("new", new), ("old", old)):
            runs = []
            for f in sorted(results.glob(f"{prefix}*.json")):
                doc = json.loads(f.read_text())
                e, by = doc["energy"], {s["scope"]: s for s in doc["scopes"]}
                runs.append({"file": f.name, "j_per_step": e["j_per_step"], "us_per_call": e["window_s"] / e["calls"] * 1e6,
                             "avg_w": e["avg_w"], "calls": e["calls"], "window_ok": e["window_ok"],
                             "continuous_us": by["continuous"]["median_us"], "kernel_hot_us": by["kernel_hot"]["median_us"],
                             "floor_us": doc["floor"]["us"], "costed_pct": doc["floor"].get("costed_pct")})
            row[tag] = runs
        out[name] = row
    return out


def _stats(windows: list[dict]) -> dict | None:
    if not windows:
        return None
    j = [w["j_per_call"] for w in windows]
    us = [w["us_per_call"] for w in windows]
    med = statistics.median(j)
    return {"n": len(j), "j_median": med, "j_min": min(j), "j_max": max(j), "j_range_pct": 100 * (max(j) - min(j)) / med,
            "us_median": statistics.median(us), "us_min": min(us), "us_max": max(us),
            "w_median": statistics.median(w["avg_w"] for w in windows)}


def main():
    res = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "results"
    figs = figures(res)
    print("| workload | plain loop J/call (range) | µs/call | measure | J/step | × plain | µs/call (energy window) "
          "| ② continuous µs | W |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, row in figs.items():
        p = row["plain"]
        lead = (f"| {name} | {p['j_median']:.4g} ({p['j_min']:.4g}–{p['j_max']:.4g}, {p['j_range_pct']:.1f} %) "
                f"| {p['us_median']:,.1f} |")
        for tag in ("new", "old"):
            for r in row[tag]:
                print(f"{lead} {tag} {r['file'].removesuffix('.json')} | {r['j_per_step']:.4g} | "
                      f"{r['j_per_step'] / p['j_median']:.3f} | {r['us_per_call']:,.1f} | {r['continuous_us']:,.1f} | "
                      f"{r['avg_w']:.1f} |")
                lead = "| | | |"
        if row["plain_after_profiler"]:
            a = row["plain_after_profiler"]
            print(f"| {name}, plain loop after a torch.profiler run | {a['j_median']:.4g} ({a['j_min']:.4g}–"
                  f"{a['j_max']:.4g}) | {a['us_median']:,.1f} | | | {a['j_median'] / p['j_median']:.3f} | | | "
                  f"{a['w_median']:.1f} |")


if __name__ == "__main__":
    main()
