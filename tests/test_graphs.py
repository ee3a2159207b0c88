"""CUDA/HIP graph replays mapped to their capture-time ops, on real traces (MI300X sglang, H200)."""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

from conftest import H200, PEERS, ROOT, analyze, explain_json
from tracekit.load.graph_replay import map_graph_kernels
from tracekit.load.kineto import load_trace

SGLANG = PEERS / "tracelens" / "inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
SGLANG_CAPTURE = PEERS / "tracelens" / "inference__sglang_decode__capture_traces__bs_32_rank0.json.gz"
BUNDLES = ROOT / "captures" / "bundles"


def graph_rows(trace):
    return trace.kernels[trace.kernels["graph"]]


def op_dims(df) -> collections.Counter:
    return collections.Counter(zip(df["op"], df["op_dims"].map(repr)))


def test_sglang_decode_replay_maps_every_kernel_to_its_capture_launch():
    trace = load_trace(SGLANG)
    summary = map_graph_kernels(trace, capture_paths=[SGLANG_CAPTURE])
    assert summary == {"replayed": 544, "mapped": 544, "unmapped": 0, "captures": 1}
    g = graph_rows(trace)
    assert (g["op_source"] == "graph_capture").all() and not trace.warnings
    assert collections.Counter(g["op"]).most_common(3) == [("aten::mm", 145), ("aiter::rmsnorm", 73),
                                                          ("aten::copy_", 73)]
    first = g.iloc[0]
    assert first["name"].startswith("void at::native::vectorized_gather_kernel")
    assert (first["op"], first["op_dims"]) == ("aten::gather", [[151936, 4096], [], [32, 4096], [], [32, 4096]])
    gemm = g[g["name"].str.startswith("Cijk_")].iloc[0]
    assert (gemm["op"], gemm["op_dims"]) == ("aten::mm", [[32, 4096], [4096, 6144]])
    # one id per capture-time op call (508 calls launched the 544 kernels), never -1
    assert g["op_id"].nunique() == 508 and (g["op_id"] < -1).all()
    assert (g.groupby("op_id")["op"].nunique() == 1).all()


def test_replay_without_its_capture_stays_unmapped():
    trace = load_trace(SGLANG)
    assert map_graph_kernels(trace)["unmapped"] == 544
    assert graph_rows(trace)["op"].isna().all()
    assert "no graph capture" in trace.warnings[0]


def test_h200_capture_and_replay_in_one_trace_costs_like_the_eager_twin():
    """No tracekit ranges here (plain torch.profiler): the capture is found by its begin/end calls."""
    replay = analyze(H200 / "graph_capture_and_replay_b128.json.gz")[0]
    eager = analyze(H200 / "graph_eager_twin_b128.json.gz")[0]
    g = graph_rows(replay)
    assert len(g) == 200 and (g["op_source"] == "graph_capture").all()
    cols = ["op", "op_dims", "flops", "bytes"]
    rows = lambda df: collections.Counter(tuple(repr(r[c]) for c in cols) for _, r in df[cols].iterrows())  # noqa: E731
    assert rows(g) == rows(eager.kernels[eager.kernels["kind"] == "kernel"])
    gemm = g[g["op"] == "aten::addmm"]
    assert len(gemm) == 100 and (gemm["flops"] == 2 * 128 * 1024 * 1024 + 128 * 1024).all()    # + bias adds
    assert (g[g["op"] == "aten::clamp_min"]["bytes"] == 2 * 128 * 1024 * 2).all()


def test_h200_replay_only_and_a_capture_of_another_size_stay_unmapped():
    trace = load_trace(H200 / "graph_replay_only_b128.json.gz")
    # the MI300X sglang capture is a real capture of other graphs: offered, it must not be used
    # (was `[SGLANG_CAPTURE] if SGLANG_CAPTURE.is_file() else []`: the same pass either way)
    summary = map_graph_kernels(trace, capture_paths=[SGLANG_CAPTURE])
    assert summary["mapped"] == 0 and summary["unmapped"] == 200 and summary["captures"] == 1
    assert graph_rows(trace)["op"].isna().all()


def _bundle(name: str) -> Path:
    path = BUNDLES / name
    assert (path / "trace.json.gz").is_file(), f"committed bundle {name} is missing"     # was a skip
    return path


def _kernels(doc) -> list[dict]:
    return [k for d in (doc if isinstance(doc, list) else [doc]) for k in d["kernels"] if k["kind"] == "kernel"]


def _signature(rows) -> collections.Counter:
    return collections.Counter((k["op"], json.dumps(k["op_dims"]), k["flops"], k["bytes"]) for k in rows)


def test_tracekit_graph_bundle_replays_cost_like_eager_bundle():
    graph, eager = _bundle("seed_graph"), _bundle("seed_eager")
    g = [k for k in _kernels(explain_json(graph)) if k["graph"]]
    e = _kernels(explain_json(eager))
    assert len(g) == 3 * 40 and all(k["op_source"] == "graph_capture" for k in g)
    assert set(_signature(g)) == set(_signature(e))               # same (op, dims, FLOPs, bytes) pairs
    gemm = [k for k in g if k["flops"] == 2 * 128 * 1024 * 1024 + 128 * 1024]     # addmm: + its bias adds
    assert len(gemm) == 60


def test_two_graphs_captured_in_warmup_map_by_graph_id(tmp_path):
    bundle = _bundle("seed_graph_two")
    assert sorted(p.name for p in bundle.glob("graph_capture_*.json.gz")) == ["graph_capture_0.json.gz",
                                                                             "graph_capture_1.json.gz"]
    trace = load_trace(bundle)
    summary = map_graph_kernels(trace, bundle)
    assert summary["unmapped"] == 0 and summary["captures"] == 2
    batches = collections.Counter(next(x[0] for x in d if len(x) >= 2) for d in graph_rows(trace)["op_dims"])
    assert set(batches) == {64, 128}
    # the same trace without the tracekit::graph_replay ranges: kernel counts (40 vs 20) still decide
    doc = json.loads(gzip.decompress((bundle / "trace.json.gz").read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("tracekit::")]
    (tmp_path / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    bare = load_trace(tmp_path / "trace.json.gz")
    map_graph_kernels(bare, bundle)
    assert op_dims(graph_rows(bare)) == op_dims(graph_rows(trace))


def test_compiled_cuda_graph_trees_replays_are_costed():
    """torch.compile(mode="max-autotune") replays its kernels from CUDA graph trees; captured with
    tracekit capture on the H200, the replayed Inductor kernels get their capture-time ops and costs."""
    doc = explain_json(_bundle("seed_autotune_cudagraphs"))
    assert doc["summary"]["kernels_per_step"] == [3] * 5
    replayed = [k for k in doc["kernels"] if k["graph"]]
    assert len(replayed) == 2 * 5 and all(k["op_source"] == "graph_capture" for k in replayed)
    gemm = [k for k in replayed if k["name"].startswith("triton_tem_fused_addmm")]
    assert len(gemm) == 5
    assert gemm[0]["flops"] == 2 * 128 * 1024 * 1024 + 128 * 1024          # + the bias its epilogue adds
    assert gemm[0]["bytes"] == 2 * (128 * 1024 + 1024 * 1024 + 1024 + 128 * 1024)
    relu = [k for k in replayed if k["name"].startswith("triton_poi_fused_relu")]
    assert relu[0]["bytes"] == 2 * 2 * 128 * 1024 and relu[0]["floor_us"] is not None
