"""Shared helpers for the H200 capture scripts (profiling, export, kernel-file copy, summary)."""
import collections
import gzip
import json
import os
import re
import shutil
import sys
import time
import traceback

import torch


def log(*a):
    print(*a, flush=True)


def dev_arg(p):
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--steps", type=int, default=5)


def sync(device):
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def activities(device):
    acts = [torch.profiler.ProfilerActivity.CPU]
    if str(device).startswith("cuda"):
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    return acts


def make_profiler(device, active, json_path):
    """Profiler with schedule(wait=0, warmup=1, active=active); exports chrome trace to json_path."""
    def ready(p):
        t0 = time.time()
        p.export_chrome_trace(json_path)
        log(f"  exported {json_path} ({os.path.getsize(json_path)/1e6:.2f} MB) in {time.time()-t0:.1f}s")
    return torch.profiler.profile(
        activities=activities(device),
        record_shapes=True,
        schedule=torch.profiler.schedule(wait=0, warmup=1, active=active, repeat=1),
        on_trace_ready=ready,
    )


def gzip_file(json_path, remove=True):
    gz = json_path + ".gz"
    with open(json_path, "rb") as f, gzip.open(gz + ".tmp", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.replace(gz + ".tmp", gz)  # never leave a truncated .gz behind a timeout
    raw = os.path.getsize(json_path)
    if remove:
        os.remove(json_path)
    log(f"  gzipped -> {gz} ({os.path.getsize(gz)/1e6:.3f} MB gz, {raw/1e6:.2f} MB raw)")
    return gz, raw


def load_trace(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        return json.load(f)


def summarize(path):
    """Kernel counts per ProfilerStep (kernel assigned to the step whose CPU range holds its launch)."""
    tr = load_trace(path)
    evs = tr.get("traceEvents", [])
    steps = sorted(
        [(e["ts"], e["ts"] + e.get("dur", 0), e["name"]) for e in evs
         if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")])
    launch_ts = {}
    for e in evs:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch_ts[e["args"]["correlation"]] = e["ts"]
    per = collections.Counter()
    kernels = [e for e in evs if e.get("cat") == "kernel"]
    for k in kernels:
        t = launch_ts.get(k.get("args", {}).get("correlation"))
        name = "unassigned"
        if t is not None:
            for s0, s1, n in steps:
                if s0 <= t <= s1:
                    name = n
                    break
        per[name] += 1
    cats = collections.Counter(e.get("cat") for e in evs)
    return {
        "file": os.path.basename(path),
        "events": len(evs),
        "steps": [n for _, _, n in steps],
        "kernels_total": len(kernels),
        "kernels_per_step": dict(sorted(per.items())),
        "cats": dict(cats),
    }


def copy_kernel_files(trace_path, kdir, cache_dir=None):
    """Copy every file named in args['kernel_file']; fall back to grepping cache_dir for
    kernel names seen in the trace that no kernel_file covered. Writes MANIFEST.json."""
    tr = load_trace(trace_path)
    evs = tr.get("traceEvents", [])
    files = {}
    for e in evs:
        kf = e.get("args", {}).get("kernel_file")
        if kf:
            files.setdefault(kf, set()).add(e.get("name"))
    os.makedirs(kdir, exist_ok=True)
    manifest = {"from_kernel_file_arg": {}, "from_cache_grep": {}, "missing": []}
    for kf, names in files.items():
        if os.path.exists(kf):
            shutil.copy(kf, os.path.join(kdir, os.path.basename(kf)))
            manifest["from_kernel_file_arg"][os.path.basename(kf)] = {"orig": kf, "names": sorted(names)}
        else:
            manifest["missing"].append(kf)
    covered = set(n for ns in files.values() for n in ns)
    knames = set(e["name"] for e in evs if e.get("cat") == "kernel" and
                 re.match(r"triton_|triton_tem_|cpp_fused", e["name"]))
    todo = knames - covered
    if todo and cache_dir and os.path.isdir(cache_dir):
        for root, _, fs in os.walk(cache_dir):
            for fn in fs:
                if not fn.endswith(".py"):
                    continue
                p = os.path.join(root, fn)
                try:
                    src = open(p).read()
                except Exception:
                    continue
                hit = [n for n in todo if re.search(r"def " + re.escape(n) + r"\(", src)]
                if hit:
                    shutil.copy(p, os.path.join(kdir, fn))
                    manifest["from_cache_grep"][fn] = {"orig": p, "names": sorted(hit)}
    manifest["kernel_names_in_trace_without_source"] = sorted(
        todo - set(n for v in manifest["from_cache_grep"].values() for n in v["names"]))
    with open(os.path.join(kdir, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    log(f"  kernel files: {len(manifest['from_kernel_file_arg'])} via kernel_file arg, "
        f"{len(manifest['from_cache_grep'])} via cache grep, missing {manifest['missing']}, "
        f"uncovered {manifest['kernel_names_in_trace_without_source']}")
    return manifest


def run_guarded(label, fn, results):
    t0 = time.time()
    log(f"=== {label}")
    try:
        r = fn()
        results.append((label, "ok", time.time() - t0, r))
    except Exception as ex:  # never crash the whole script
        traceback.print_exc()
        sys.stdout.flush()
        results.append((label, f"FAIL {type(ex).__name__}: {str(ex)[:200]}", time.time() - t0, None))
    log(f"=== {label}: {results[-1][1]} in {results[-1][2]:.1f}s")


def print_results(results):
    log("\nSUMMARY")
    for label, st, dt, r in results:
        extra = ""
        if isinstance(r, dict):
            extra = f" kernels_total={r.get('kernels_total')} per_step={r.get('kernels_per_step')}"
        log(f"  {label:40s} {st:6s} {dt:7.1f}s{extra}")
