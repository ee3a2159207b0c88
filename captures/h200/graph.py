"""CUDA Graph capture/replay of 20 calls of the seed example (B=128, bf16, eager ops inside capture).

python3 captures/h200/graph.py --out DIR
Writes DIR/graph_eager_twin_b128.json.gz       (20 eager calls per step, 5 steps)
       DIR/graph_replay_only_b128.json.gz      (graph captured before profiling; 5 steps, one replay each)
       DIR/graph_capture_and_replay_b128.json.gz (profiler active during capture: step 1 = capture,
                                                  steps 2..6 = one replay each)
and dumps raw example events of the capture phase to stdout.
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import torch.nn.functional as F
from _common import dev_arg, gzip_file, load_trace, log, make_profiler, print_results, run_guarded, summarize, sync

NCALLS = 20
B = 128


def seed_fn(X, W, b):
    return torch.relu(F.linear(X, W, b))


def make_inputs(dev):
    torch.manual_seed(4321)
    dt = torch.bfloat16
    Xs = [torch.randn(B, 1024, device=dev, dtype=dt) for _ in range(NCALLS)]
    W = torch.randn(1024, 1024, device=dev, dtype=dt) / 32.0
    b = torch.randn(1024, device=dev, dtype=dt)
    return Xs, W, b


def run_all(Xs, W, b):
    return [seed_fn(x, W, b) for x in Xs]


def warm_on_side_stream(Xs, W, b):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            run_all(Xs, W, b)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def eager_twin(args):
    Xs, W, b = make_inputs(args.device)
    run_all(Xs, W, b)
    sync(args.device)
    path = os.path.join(args.out, "graph_eager_twin_b128.json")
    with make_profiler(args.device, args.steps, path) as prof:
        for _ in range(1 + args.steps):
            run_all(Xs, W, b)
            sync(args.device)
            prof.step()
    gz, _ = gzip_file(path)
    return summarize(gz)


def replay_only(args):
    Xs, W, b = make_inputs(args.device)
    warm_on_side_stream(Xs, W, b)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # torch.cuda.graph captures on its own side stream
        outs = run_all(Xs, W, b)
    g.replay()
    torch.cuda.synchronize()
    ref = run_all(Xs, W, b)
    log(f"  replay matches eager: {all(torch.equal(o, r) for o, r in zip(outs, ref))}")
    path = os.path.join(args.out, "graph_replay_only_b128.json")
    with make_profiler(args.device, args.steps, path) as prof:
        for _ in range(1 + args.steps):
            g.replay()
            torch.cuda.synchronize()
            prof.step()
    gz, _ = gzip_file(path)
    return summarize(gz)


def capture_and_replay(args):
    Xs, W, b = make_inputs(args.device)
    warm_on_side_stream(Xs, W, b)
    path = os.path.join(args.out, "graph_capture_and_replay_b128.json")
    g = torch.cuda.CUDAGraph()
    with make_profiler(args.device, 1 + args.steps, path) as prof:
        # step 0 (profiler warm-up, not recorded): one eager pass
        run_all(Xs, W, b)
        torch.cuda.synchronize()
        prof.step()
        # step 1 (recorded): the capture
        with torch.profiler.record_function("tk_graph_capture"):
            with torch.cuda.graph(g):
                outs = run_all(Xs, W, b)
        torch.cuda.synchronize()
        prof.step()
        # steps 2..: one replay each
        for _ in range(args.steps):
            with torch.profiler.record_function("tk_graph_replay"):
                g.replay()
            torch.cuda.synchronize()
            prof.step()
    gz, _ = gzip_file(path)
    dump_capture_events(gz)
    return summarize(gz)


def dump_capture_events(gz):
    tr = load_trace(gz)
    evs = tr["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in evs
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    log(f"  steps: {steps}")
    cap = [e for e in evs if e.get("ph") == "X" and e.get("name") == "tk_graph_capture"
           and e.get("cat") == "user_annotation"]
    if not cap:
        log("  no tk_graph_capture annotation found")
        return
    c0, c1 = cap[0]["ts"], cap[0]["ts"] + cap[0]["dur"]
    inside = [e for e in evs if e.get("ph") == "X" and c0 <= e.get("ts", -1) <= c1]
    cnt = collections.Counter((e.get("cat"), e.get("name")) for e in inside)
    log("  CAPTURE PHASE event (cat, name) counts:")
    for (c, n), k in sorted(cnt.items(), key=lambda x: -x[1]):
        log(f"    {k:4d}  {c}  {n}")
    shown = collections.Counter()
    log("  CAPTURE PHASE raw examples (runtime/driver/kernel/graph-ish):")
    for e in inside:
        key = (e.get("cat"), e.get("name"))
        if e.get("cat") in ("cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset") or \
                "raph" in str(e.get("name")) or "apture" in str(e.get("name")):
            if shown[key] < 2:
                shown[key] += 1
                log("    " + json.dumps(e))
    # GPU-side events whose correlation belongs to the capture range
    corr_in = set(e["args"]["correlation"] for e in inside if "correlation" in e.get("args", {}))
    gpu = [e for e in evs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and e.get("args", {}).get("correlation") in corr_in]
    log(f"  GPU events correlated to capture-phase launches: {len(gpu)}")
    for e in gpu[:3]:
        log("    " + json.dumps(e))
    # replay examples
    rl = [e for e in evs if e.get("name") == "cudaGraphLaunch"]
    log(f"  cudaGraphLaunch events: {len(rl)}")
    for e in rl[:2]:
        log("    " + json.dumps(e))
    if rl:
        corr = rl[-1]["args"].get("correlation")
        ks = [e for e in evs if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") == corr]
        log(f"  kernels with correlation of last cudaGraphLaunch ({corr}): {len(ks)}; examples:")
        for e in ks[:3]:
            log("    " + json.dumps(e))
    keys = collections.Counter(k for e in evs if e.get("cat") == "kernel" for k in e.get("args", {}))
    log(f"  kernel arg keys (count): {dict(keys)}")
    flows = collections.Counter((e.get("cat"), e.get("ph")) for e in evs if e.get("ph") in ("s", "f"))
    log(f"  flow events: {dict(flows)}")


def main():
    p = argparse.ArgumentParser()
    dev_arg(p)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    run_guarded("graph_eager_twin_b128", lambda: eager_twin(args), results)
    if not args.device.startswith("cuda"):
        log("CUDA graph parts need a CUDA device; skipped")
    else:
        run_guarded("graph_replay_only_b128", lambda: replay_only(args), results)
        run_guarded("graph_capture_and_replay_b128", lambda: capture_and_replay(args), results)
    print_results(results)


if __name__ == "__main__":
    main()
