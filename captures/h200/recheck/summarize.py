"""The figures of README.md for one bundle: costed %, uncosted kernels, kernels below their floor,
the one-kernel floor, warnings, and (with an ncu CSV) DRAM reads against tracekit's bytes per kernel.

    PYTHONPATH=<repo> python summarize.py BUNDLE --spec h100-sxm [--ncu BUNDLE_ncu.csv.gz]
"""
import argparse
import csv
import gzip
import re
from collections import Counter, OrderedDict, defaultdict

from tracekit.analyze import analyze_path


def ncu_kernels(path):
    kernels: OrderedDict[int, dict] = OrderedDict()
    with gzip.open(path, "rt", newline="") as f:
        for row in csv.DictReader(f):
            k = kernels.setdefault(int(row["ID"]), {"name": row["Kernel Name"]})
            k[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    return list(kernels.values())


def short(name):
    name = name.removeprefix("void ").replace("(anonymous namespace)", "").replace("<unnamed>", "")
    return re.split(r"[<(]", name, maxsplit=1)[0].split("::")[-1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bundle")
    p.add_argument("--spec")
    p.add_argument("--ncu")
    a = p.parse_args()
    t = analyze_path(a.bundle, spec=a.spec)[0]
    df = t.kernels
    k = df[(df["kind"] == "kernel") & df["step"].notna()]
    steps = sorted(k["step"].unique())
    print(f"spec {t.spec.id if t.spec else None}  steps {len(steps)}  kernels/step "
          f"{[int((k['step'] == s).sum()) for s in steps]}")
    last = k[k["step"] == steps[-1]].sort_values("start_us")
    tot = last["dur_us"].sum()
    cov = last[last["covered"].astype(bool)]["dur_us"].sum()
    print(f"last step: kernel time {tot:.1f} us, costed {100 * cov / tot:.2f} %, floor {last['floor_us'].sum():.1f} us, "
          f"FLOPs {last['flops'].sum():.4g}, bytes {last['bytes'].sum():.4g}")
    unc = last[~last["covered"].astype(bool)].groupby(["op", "name"])["dur_us"].agg(["count", "sum"])
    for (op, name), r in unc.sort_values("sum", ascending=False).head(12).iterrows():
        print(f"  uncosted: {r['sum']:8.1f} us x{int(r['count'])}  op={op}  {name[:90]}")
    below = k[(k["floor_us"] > 0) & (k["dur_us"] < k["floor_us"])]
    print(f"kernel runs below their op's roofline floor: {len(below)} of {len(k)}; l2 "
          f"{dict(Counter(below['l2'].astype(str)))} (an op of several kernels: its carrier alone)")
    for (op, name), g in below.groupby(["op", "name"]):
        r = g["dur_us"] / g["floor_us"]
        gf = g["dur_us"] / g["gap_floor_us"]
        print(f"  {len(g)}x {r.min():.3f}-{r.max():.3f} of floor (gap floor {gf.min():.3f}-{gf.max():.3f}, "
              f"l2 {sorted(set(g['l2'].astype(str)))}, op gap {g['gap'].min():.3f}-{g['gap'].max():.3f})  "
              f"op={op}  {name[:60]}")
    beat = k[k["gap"] < 1]        # gap: the op's kernels' time over the floor it is set against
    print(f"gap below 1: {len(beat)} runs; l2 {dict(Counter(beat['l2'].astype(str)))}")
    for (op, name), g in beat.groupby(["op", "name"]):
        print(f"  {len(g)}x gap {g['gap'].min():.3f}-{g['gap'].max():.3f}  op={op}  {name[:70]}")
    print(f"l2 states: {dict(Counter(k['l2'].astype(str)))}")
    s = t.summary if hasattr(t, "summary") else None
    for w in t.warnings:
        print(f"  warning: {w}")
    if a.ncu:
        ncu = ncu_kernels(a.ncu)
        print(f"ncu kernels {len(ncu)}, bundle last step {len(last)}")
        if len(ncu) != len(last):
            return
        # one op call's kernels (a split-K reduce, cuDNN layout helpers, a reduction split in two) share
        # its execution-trace reads: count them once per call, against all its kernels' DRAM reads
        calls = OrderedDict()
        for n, (_, r) in zip(ncu, last.iterrows()):
            if short(n["name"]) != short(r["name"]) and not r["name"].startswith("_Z"):
                print(f"  name mismatch: {n['name'][:60]} / {r['name'][:60]}")
            key = r["op_id"] if r["op_id"] != -1 else ("k", r.name)
            c = calls.setdefault(key, {"cat": None, "rd": 0.0, "wr": 0.0, "reads": float("nan"), "n": 0,
                                       "op": r["op"], "name": r["name"]})
            c["rd"] += n["dram__bytes_read.sum"]
            c["wr"] += n["dram__bytes_write.sum"]
            c["n"] += 1
            if c["cat"] is None or r["floor_us"] == r["floor_us"]:      # the carrier's category
                c["cat"] = r["category"]
            x = r.get("et_io")
            if hasattr(x, "reads"):
                c["reads"] = float(sum(q.nbytes for q in x.reads))
        agg = defaultdict(lambda: [0, 0, 0.0, 0.0, 0.0])
        worst = []
        for c in calls.values():
            a_ = agg[c["cat"]]
            a_[0] += c["n"]
            if c["reads"] == c["reads"]:
                a_[1] += 1; a_[2] += c["rd"]; a_[3] += c["wr"]; a_[4] += c["reads"]
                if c["reads"] > 1e6:
                    worst.append((c["rd"] / c["reads"], c["rd"], c["wr"], c["reads"], c["n"], c["name"][:60], c["op"]))
        for cat, (cnt, joined, rd, wr, b) in sorted(agg.items(), key=lambda x: -x[1][4]):
            print(f"  {cat:12s} {cnt:4d} kernels, {joined} joined op calls  ncu read {rd:.4g} write {wr:.4g}  "
                  f"read/tracekit reads {rd / b if b else float('nan'):.3f}  tracekit reads {b:.4g}")
        worst.sort()
        for w in worst[:6] + worst[-6:]:
            print(f"  read/tk {w[0]:.3f} read {w[1]:.4g} write {w[2]:.4g} tk reads {w[3]:.4g} kernels {w[4]}  "
                  f"op={w[6]} {w[5]}")


if __name__ == "__main__":
    main()
