"""Where a step's time goes, from the trace alone (explain's per-step host figures, issue 13), pinned on
committed H200 traces against values computed here from the raw events with plain json."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest

from conftest import H200, explain_json, run_cli

MODELS = H200 / "models"
LAUNCHES = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch"}


def raw_figures(bundle) -> list[dict]:
    """Per ProfilerStep range (user_annotation): wall, launch calls and their time, host gaps between
    consecutive launches of one thread, *Synchronize time, all runtime/driver time."""
    events = json.loads(gzip.decompress((bundle / "trace.json.gz").read_bytes()))["traceEvents"]
    steps = sorted((e for e in events if e.get("cat") == "user_annotation"
                    and str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X"]
    out = []
    for s in steps:
        inside = [e for e in runtime if s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
        launches = [e for e in inside if e["name"] in LAUNCHES]
        threads = defaultdict(list)
        for e in launches:
            threads[e["tid"]].append(e)
        host = 0.0
        for calls in threads.values():
            calls.sort(key=lambda e: e["ts"])
            host += sum(max(0.0, b["ts"] - (a["ts"] + a["dur"])) for a, b in zip(calls, calls[1:]))
        out.append({"wall_us": s["dur"], "launches": len(launches), "launch_us": sum(e["dur"] for e in launches),
                    "host_us": host, "sync_us": sum(e["dur"] for e in inside if "Synchronize" in e["name"]),
                    "runtime_us": sum(e["dur"] for e in inside), "threads": len(threads),
                    "graph_launches": sum(e["name"] == "cudaGraphLaunch" for e in launches)})
    return out


@pytest.mark.parametrize("name", ["llama_decode_eager", "gpt_train_eager", "llama_decode_reduce_overhead"])
def test_step_host_figures_match_the_raw_events(name):
    raw = raw_figures(MODELS / name)
    summary = explain_json(MODELS / name)["summary"]
    assert len(raw) == summary["steps"] == 3
    # timestamps near 5.4e12 us keep ~1 ns in a double: differences of them agree to a few ns
    for key in ("wall_us", "launches", "launch_us", "host_us", "sync_us", "runtime_us"):
        assert summary[f"{key}_per_step"] == pytest.approx([r[key] for r in raw], rel=1e-9, abs=0.01), key


def test_what_the_figures_say_about_the_real_steps():
    llama = raw_figures(MODELS / "llama_decode_eager")
    # eager decode: one launch per kernel (367 kernels a step, captures/h200/models/README.md), one thread
    assert [r["launches"] for r in llama] == [367, 367, 367] and {r["threads"] for r in llama} == {1}
    steps = explain_json(MODELS / "llama_decode_eager")["steps"]
    assert [s["launches"] for s in steps] == [s["kernels"] for s in steps] == [367, 367, 367]
    # the host, not the GPU, sets the pace: the step's wall time is ~45x its kernel time
    assert all(s["wall_us"] > 40 * s["kernel_us"] for s in steps)
    # training: backward launches from autograd's thread, so the launches come from two threads
    assert {r["threads"] for r in raw_figures(MODELS / "gpt_train_eager")} == {2}
    # reduce-overhead: the replayed steps are launched as CUDA graphs, a few launches for ~127 kernels
    ro = raw_figures(MODELS / "llama_decode_reduce_overhead")
    ro_steps = explain_json(MODELS / "llama_decode_reduce_overhead")["steps"]
    assert all(r["graph_launches"] >= 1 for r in ro)
    assert all(s["launches"] < s["kernels"] / 10 for s in ro_steps)


def test_a_trace_without_steps_counts_the_whole_trace(tmp_path):
    ev = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 100.0, "dur": 5.0, "pid": 1, "tid": 7,
         "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 120.0, "dur": 4.0, "pid": 1, "tid": 7,
         "args": {"correlation": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": 130.0, "dur": 9.0, "pid": 1,
         "tid": 7, "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "k1", "ts": 110.0, "dur": 2.0, "pid": 0, "tid": 7,
         "args": {"correlation": 1, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k2", "ts": 125.0, "dur": 3.0, "pid": 0, "tid": 7,
         "args": {"correlation": 2, "device": 0, "stream": 7}},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    proc = run_cli("explain", path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)["summary"]
    assert s["launches_per_step"] == [2] and s["launch_us_per_step"] == [9.0]
    assert s["host_us_per_step"] == [120.0 - 105.0] and s["sync_us_per_step"] == [9.0]
    assert s["runtime_us_per_step"] == [18.0] and s["wall_us_per_step"] == [None]
