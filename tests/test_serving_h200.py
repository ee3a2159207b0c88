"""The H200 toy serving engine (captures/h200/serving, README there): CUDA-graph decode of batch sizes 1 and
8 traced as a vLLM / SGLang user has it — capture traces in SGLang's layout, iterations in vLLM's ranges —
and the same engine under `tracekit capture`. Issue 22 items 1, 2, 4.

The README's numbers (hand-derived there from the model's shapes): weights + KV read per decode step,
bs 1: 869,343,232 B; bs 8: 986,812,416 B; one token per sequence per step; a prefill iteration is
4 prompts × 256 tokens = 1,024 tokens.
"""

from __future__ import annotations

import pytest

from conftest import H200, explain_json, run_cli

SERVING = H200 / "serving"
DECODE, MIXED, BUNDLE = SERVING / "serve_decode_rank0.json.gz", SERVING / "serve_mixed_rank0.json.gz", \
    SERVING / "serve_decode_tkcapture"
STEP_BYTES = {1: 869_343_232, 8: 986_812_416}
H200_BW, H200_MEASURED_BW = 4.8e12, 4.2e12       # tracekit/specs/h200.toml, h200-measured.toml (B/s)


def _gemm_rows(doc, step: int) -> set[int]:
    """The M (rows) of every aten::mm / addmm / linear kernel of a step, from its mapped op shapes."""
    return {k["op_dims"][1 if k["op"] == "aten::addmm" else 0][0] for k in doc["kernels"]
            if k["step"] == step and k["op"] in ("aten::mm", "aten::addmm", "aten::linear")}


def test_decode_window_replays_are_matched_to_the_graph_of_their_batch_size():
    """20 iterations alternating bs 1 and 8, each one cudaGraphLaunch of 348 kernels. The two captures
    (capture_traces/bs_1, bs_8, found beside the trace) both have 348 kernel launches and CUDA names none,
    so only the iteration's batch size (vLLM range execute_context_0(0)_generation_{bs}({bs})) tells them
    apart: each step's GEMMs get M = its batch size."""
    doc = explain_json(DECODE)
    info = doc["summary"]["graph_replays"]
    assert info["capture_files"] == ["bs_1_rank0.json.gz", "bs_8_rank0.json.gz"]
    assert (info["replayed"], info["mapped"]) == (20 * 348, 20 * 348)
    assert doc["summary"]["step_rule"] == "engine iterations (vLLM)"
    assert [s["tokens"] for s in doc["steps"]] == [1, 8] * 10
    assert all(s["graph_matched"] == 348 and s["phase"] == "decode" for s in doc["steps"])
    for s in doc["steps"]:
        assert _gemm_rows(doc, s["step"]) == {s["tokens"]}
    assert doc["summary"]["costed_time_pct"] >= 98                  # issue 22: ≥ 98 % costed


def test_decode_one_kernel_floor_per_token_is_weights_plus_kv_over_bandwidth():
    doc = explain_json(DECODE)
    per_step = {f["step"]: f["fused_floor_us"] for f in doc["summary"]["fusion_per_step"]}
    for s in doc["steps"]:
        assert per_step[s["step"]] == pytest.approx(STEP_BYTES[s["tokens"]] / H200_BW * 1e6, rel=0.005)
    (decode,) = doc["phases"]
    floor = 10 * (STEP_BYTES[1] + STEP_BYTES[8]) / H200_BW * 1e6            # 10 steps of each size
    assert (decode["phase"], decode["steps"], decode["tokens"]) == ("decode", 20, 10 * 1 + 10 * 8)
    assert decode["fused_floor_us_per_token"] == pytest.approx(floor / 90, rel=0.005)
    assert decode["tokens_per_s_ceiling"] == pytest.approx(90 / (floor * 1e-6), rel=0.005)
    measured = explain_json(DECODE, "--spec", "h200-measured")["phases"][0]     # the measured copy bandwidth
    assert measured["fused_floor_us_per_token"] == pytest.approx(
        10 * (STEP_BYTES[1] + STEP_BYTES[8]) / H200_MEASURED_BW * 1e6 / 90, rel=0.005)


def test_mixed_window_reports_prefill_and_decode_in_every_format(tmp_path):
    """2 eager prefill iterations (4 × 256 tokens each), then 6 decode iterations at bs 8 and 2 at bs 1."""
    doc = explain_json(MIXED)
    assert doc["summary"]["graph_replays"]["mapped"] == doc["summary"]["graph_replays"]["replayed"] == 8 * 348
    prefill, decode = doc["phases"]
    assert (prefill["phase"], prefill["steps"], prefill["tokens"]) == ("prefill", 2, 2 * 4 * 256)
    assert (decode["phase"], decode["steps"], decode["tokens"]) == ("decode", 8, 6 * 8 + 2 * 1)
    assert prefill["kernel_us_per_token"] == pytest.approx(prefill["kernel_us"] / 2048)
    assert decode["fused_floor_us_per_token"] == pytest.approx(
        (6 * STEP_BYTES[8] + 2 * STEP_BYTES[1]) / H200_BW * 1e6 / 50, rel=0.005)
    assert doc["summary"]["costed_time_pct"] >= 98
    text = " ".join(run_cli("explain", MIXED).stdout.replace("┃", " ").replace("│", " ").split())
    assert "per phase" in text and "prefill decode" in text and "J / token n/a n/a" in text
    md = run_cli("explain", MIXED, "-f", "markdown").stdout
    assert "| prefill | decode |" in md and "| tokens | 2,048 | 50 |" in md
    csv = run_cli("explain", MIXED, "-f", "csv").stdout.splitlines()
    phases = [row.rsplit(",", 1)[1] for row in csv[1:]]
    assert csv[0].endswith(",phase") and {"prefill", "decode"} <= set(phases)
    assert run_cli("explain", MIXED, "--html", tmp_path / "r.html", "-f", "json").returncode == 0
    page = (tmp_path / "r.html").read_text()
    assert "<h2>Phases</h2>" in page and "<th>prefill</th>" in page.replace(' class="r"', "")


def test_the_tracekit_bundle_of_the_same_engine_gives_the_same_phases_from_shapes():
    """Item 4 and phases without annotations: `tracekit capture` of the engine (no profiler of its own),
    30 ProfilerSteps = the 20 window iterations then the 10 mixed ones; its graphs were captured in
    warm-up (graph_capture_0/1.json.gz). Phases come from shapes here (cuDNN SDPA query length 1 or 256,
    GEMM M) and agree with the engine ranges of the other two traces."""
    doc = explain_json(BUNDLE)
    info = doc["summary"]["graph_replays"]
    assert info["capture_files"] == ["graph_capture_0.json.gz", "graph_capture_1.json.gz"]
    assert info["mapped"] == info["replayed"] == 28 * 348
    prefill, decode = doc["phases"]
    assert (prefill["phase"], prefill["steps"], prefill["tokens"]) == ("prefill", 2, 2048)
    assert (decode["phase"], decode["steps"], decode["tokens"]) == ("decode", 28, 90 + 50)
    assert prefill["source"] == decode["source"] == ["shapes"]


def test_without_the_engine_ranges_equal_sized_graphs_stay_unmatched_and_say_why(tmp_path):
    """The decode window with its vLLM iteration ranges removed: the bs-1 and bs-8 captures both fit every
    replay (348 kernels each, CUDA names none) and nothing says the batch size, so no replay is guessed."""
    import gzip
    import json
    import shutil

    doc = json.loads(gzip.decompress(DECODE.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("execute_")]
    (tmp_path / "decode.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    shutil.copytree(SERVING / "capture_traces", tmp_path / "capture_traces")
    out = explain_json(tmp_path / "decode.json.gz")
    (step,) = out["steps"]
    assert out["summary"]["step_rule"] == "whole trace"
    assert step["graph_matched"] == 0
    assert step["graph_unmatched"] == {"2 captures fit with different ops (the step names no batch size)": 6960}


def test_the_python_api_has_the_phases():
    import tracekit

    phases = tracekit.load(MIXED, cache=False).phases
    assert list(phases["phase"]) == ["prefill", "decode"] and list(phases["tokens"]) == [2048, 50]


def test_without_graph_ids_a_steps_eager_ops_tell_which_graph_it_replayed(tmp_path):
    """The tracekit bundle with its tracekit::graph_replay ranges removed (a user's own profiler of a plain
    CUDAGraph engine would have none): both captures fit every replay (348 kernels, no names). Each
    ProfilerStep holds one replay, and its eager ops (the input copied in, the argmax of the logits)
    lead with the batch size; the captures' own GEMM rows say theirs (8 and 1): each replay gets its own."""
    import gzip
    import json
    import shutil

    bundle = tmp_path / "bundle"
    shutil.copytree(BUNDLE, bundle)
    doc = json.loads(gzip.decompress((bundle / "trace.json.gz").read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not str(e.get("name", "")).startswith("tracekit::graph_replay#")]
    (bundle / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    bare, marked = explain_json(bundle), explain_json(BUNDLE)
    assert bare["summary"]["graph_replays"]["mapped"] == bare["summary"]["graph_replays"]["replayed"] == 28 * 348
    assert [s["tokens"] for s in bare["steps"]] == [s["tokens"] for s in marked["steps"]]
    for s in bare["steps"]:
        if s["phase"] == "decode":
            assert _gemm_rows(bare, s["step"]) == {s["tokens"]}
