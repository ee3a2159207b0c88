"""Serving traces: graph replays costed from the engine's capture traces, per-step match share and
reasons, engine iterations as steps, and phases (issue 22 items 1, 2, 4).

Real traces: TraceLens's SGLang decode pair (tests/data/peers/tracelens, laid out here as SGLang writes
it), TraceLens's vLLM piecewise prefill+decode pair (tests/data/serving), tracekit's own H200 captures.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from conftest import DATA, H200, PEERS, explain_json, run_cli

SGLANG = PEERS / "tracelens" / "inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
SGLANG_CAPTURE = PEERS / "tracelens" / "inference__sglang_decode__capture_traces__bs_32_rank0.json.gz"
VLLM = DATA / "serving" / "vllm_prefilldecode_piecewise" / "graph_execution.json.gz"


def _kernel_time_share(path: Path, prefix: str) -> float:
    """% of the trace's kernel time in kernels whose name starts with ``prefix``, read from the file."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    return 100 * sum(e["dur"] for e in kernels if e["name"].startswith(prefix)) / sum(e["dur"] for e in kernels)


@pytest.fixture()
def sglang_layout(tmp_path) -> Path:
    """The SGLang pair as SGLang writes it: decode.json.gz with capture_traces/bs_32_rank0.json.gz."""
    shutil.copy(SGLANG, tmp_path / "decode.json.gz")
    (tmp_path / "capture_traces").mkdir()
    shutil.copy(SGLANG_CAPTURE, tmp_path / "capture_traces" / "bs_32_rank0.json.gz")
    return tmp_path / "decode.json.gz"


def _replayed(doc) -> list[dict]:
    return [k for k in doc["kernels"] if k["graph"]]


def test_sglang_capture_traces_beside_the_trace_are_found_and_cost_the_replay(sglang_layout):
    alone = explain_json(SGLANG)                     # the same trace with no capture_traces/ beside it
    assert alone["summary"]["costed_time_pct"] == pytest.approx(0.9, abs=0.05)
    doc = explain_json(sglang_layout)
    g = _replayed(doc)
    # the trace has one hipGraphLaunch, whose correlation 544 kernel rows share; the capture has 544 nodes
    assert len(g) == 544
    assert all(k["op"] and k["op_source"] == "graph_capture" for k in g)
    assert doc["summary"]["graph_replays"]["mapped"] == 544
    assert doc["summary"]["graph_replays"]["capture_files"] == ["bs_32_rank0.json.gz"]
    # the capture was recorded with_stack: each launch's innermost "nn.Module: X" frame is its module
    assert all(k["module"] for k in g)
    assert g[0]["op"] == "aten::gather" and g[0]["module"] == "VocabParallelEmbedding_0"
    gemm_modules = {k["module"].rsplit("_", 1)[0] for k in g if k["op"] == "aten::mm"}
    assert gemm_modules == {"QKVParallelLinear", "RowParallelLinear", "MergedColumnParallelLinear", "LogitsProcessor"}
    step = doc["steps"][0]
    assert (step["graph_replayed"], step["graph_matched"], step["graph_matched_pct"]) == (544, 544, 100.0)
    assert step["graph_unmatched"] == {}
    # every Tensile GEMM (Cijk_*) now has its aten::mm shapes and a floor: the costed share is at least
    # their share of the kernel time, read from the file itself
    gemm_share = _kernel_time_share(SGLANG, "Cijk_")
    assert gemm_share > 50
    assert doc["summary"]["costed_time_pct"] >= gemm_share
    assert doc["summary"]["costed_time_pct"] >= 95          # issue 22, with the serving ops' cost models
    # engine iterations are the steps: the vLLM-style annotation execute_32_..._generation_32(sq32...)
    assert doc["summary"]["step_rule"] == "engine iterations (vLLM)"
    assert (step["phase"], step["tokens"]) == ("decode", 32)


def test_graph_captures_option_names_a_folder_or_a_file(tmp_path):
    shutil.copy(SGLANG, tmp_path / "decode.json.gz")
    elsewhere = tmp_path / "caps"
    elsewhere.mkdir()
    shutil.copy(SGLANG_CAPTURE, elsewhere / "bs_32_rank0.json.gz")
    for given in (elsewhere, elsewhere / "bs_32_rank0.json.gz"):
        doc = explain_json(tmp_path / "decode.json.gz", "--graph-captures", given)
        assert doc["summary"]["graph_replays"]["mapped"] == 544
        assert all(k["op_source"] == "graph_capture" for k in _replayed(doc))
    diff = run_cli("diff", tmp_path / "decode.json.gz", tmp_path / "decode.json.gz", "--graph-captures", elsewhere,
                   "-f", "json")
    assert diff.returncode == 0, diff.stderr
    check = run_cli("check", tmp_path / "decode.json.gz", "--baseline", tmp_path / "decode.json.gz",
                    "--graph-captures", elsewhere, "-f", "json")
    assert check.returncode == 0, check.stderr
    assert "graph replays" not in check.stderr          # every replayed row mapped: no unmapped warning
    alone = run_cli("check", tmp_path / "decode.json.gz", "--baseline", tmp_path / "decode.json.gz", "-f", "json")
    assert "544 of 544 replayed rows left unmapped" in alone.stderr
    missing = run_cli("explain", tmp_path / "decode.json.gz", "--graph-captures", tmp_path / "nowhere")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no such file" in missing.stderr


def test_capture_files_of_other_ranks_are_left_out(tmp_path):
    shutil.copy(SGLANG, tmp_path / "decode.json.gz")       # distributedInfo rank 0
    caps = tmp_path / "capture_traces"
    caps.mkdir()
    shutil.copy(SGLANG_CAPTURE, caps / "bs_32_rank0.json.gz")
    shutil.copy(SGLANG_CAPTURE, caps / "bs_32_rank1.json.gz")
    doc = explain_json(tmp_path / "decode.json.gz")
    assert doc["summary"]["graph_replays"]["capture_files"] == ["bs_32_rank0.json.gz"]
    assert doc["summary"]["graph_replays"]["mapped"] == 544
    assert any("1 capture file(s) of other ranks left out" in w for w in doc["warnings"])


def test_an_unmatched_replay_is_counted_and_named(tmp_path):
    """A real capture of other graphs (the H200 MLP: one graph of 200 kernels) offered for the SGLang
    replay of 544 kernels: nothing fits, and the step says why for all 544 rows."""
    shutil.copy(SGLANG, tmp_path / "decode.json.gz")
    doc = explain_json(tmp_path / "decode.json.gz", "--graph-captures", H200 / "graph_capture_and_replay_b128.json.gz")
    step = doc["steps"][0]
    assert (step["graph_replayed"], step["graph_matched"], step["graph_matched_pct"]) == (544, 0, 0.0)
    assert step["graph_unmatched"] == {"no capture has 544 kernels": 544}
    assert all(k["op"] is None for k in _replayed(doc))
    assert any("544 no capture has 544 kernels" in w for w in doc["warnings"])
    text = run_cli("explain", tmp_path / "decode.json.gz", "--graph-captures",
                   H200 / "graph_capture_and_replay_b128.json.gz")
    assert text.returncode == 0
    assert ("graph replays: 0 of 544 replayed kernels matched to capture ops (0%, 1 capture file); not matched: "
            "544 no capture has 544 kernels") in " ".join(text.stdout.split())


def test_vllm_piecewise_graphs_and_the_eager_attention_between_them():
    """vLLM PIECEWISE: 25 graph pieces replayed per iteration with the attention run eagerly between them;
    the capture_traces/ folder (vLLM names, execution_details.json) is found beside the trace."""
    doc = explain_json(VLLM)
    info = doc["summary"]["graph_replays"]
    assert info["capture_files"] == ["graph_capture_rank_0.1773709679453551615.pt.trace.json.gz"]
    assert info["captures"] == 25 and info["replayed"] == info["mapped"] == 361
    assert doc["steps"][0]["graph_matched_pct"] == 100.0
    eager = [k for k in doc["kernels"] if not k["graph"]]
    assert len(eager) == 423 - 361
    # the annotation: 9 prefill requests of 8155 query tokens and 37 decode requests of one: mixed, 8192
    assert doc["summary"]["step_rule"] == "engine iterations (vLLM)"
    (phase,) = doc["phases"]
    assert (phase["phase"], phase["steps"], phase["tokens"]) == ("mixed", 1, 8155 + 37)
    assert phase["kernel_us_per_token"] == pytest.approx(doc["steps"][0]["kernel_us"] / 8192)
    assert phase["joules_per_token"] is None
    gemm = [k for k in _replayed(doc) if k["op"] == "aten::addmm"]
    assert gemm and all(k["op_dims"][1][0] == 8192 for k in gemm)      # (bias, x [8192, K], w): the batch


def test_decode_phase_from_shapes_one_kernel_floor_per_token_is_weights_plus_kv():
    """tracekit's H200 Llama decode (eager, ProfilerStep steps, no engine annotation): the attention's
    query has one token per sequence, so each step is decode, of one token (GEMM M = 1). The README
    derives the step's minimal traffic: weights read 953,229,312 B + KV cache 33,554,432 B =
    986,783,744 B, 205.6 µs at the h200 spec's 4.8 TB/s: the one-kernel floor per token."""
    doc = explain_json(H200 / "models" / "llama_decode_eager")
    (phase,) = doc["phases"]
    assert (phase["phase"], phase["steps"], phase["tokens"]) == ("decode", 3, 3)
    assert phase["fused_floor_us_per_token"] == pytest.approx(986_783_744 / 4.8e12 * 1e6, rel=0.005)
    assert phase["tokens_per_s_ceiling"] == pytest.approx(1 / (986_783_744 / 4.8e12), rel=0.005)


def test_a_training_step_has_no_phase():
    doc = explain_json(H200 / "models" / "gpt_train_eager")
    assert doc["phases"] == [] and all(s["phase"] is None for s in doc["steps"])


def test_an_encoder_forward_is_no_prefill():
    """BERT inference on the H200 (attention over 128-token sequences, no step with one query token): no
    decode anywhere, so no phase (shapes alone would have called every step a prefill)."""
    doc = explain_json(H200 / "models2" / "bert_infer")
    assert doc["phases"] == [] and all(s["phase"] is None for s in doc["steps"])


def _synthetic_serving_trace(path: Path) -> Path:
    """SYNTHETIC (written here, not recorded): two SGLang iterations, a prefill of 2 sequences and 10
    tokens then a decode of the same 2, each one aten::mm [tokens, 4096] x [4096, 4096] bf16 kernel."""
    events, corr = [], 100
    for k, (name, m, dur) in enumerate((("step[EXTEND bs=2 toks=10]", 10, 30.0), ("step[DECODE bs=2]", 2, 20.0))):
        t0 = 1000.0 * k
        corr += 1
        events += [
            {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": t0, "dur": 500},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t0 + 10, "dur": 20,
             "args": {"External id": k + 1, "Input Dims": [[m, 4096], [4096, 4096]],
                      "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 12,
             "dur": 5, "args": {"External id": k + 1, "correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_tst_gemm", "pid": 0, "tid": 7, "ts": t0 + 40,
             "dur": dur, "args": {"External id": k + 1, "correlation": corr, "device": 0, "stream": 7,
                                  "grid": [1, 1, 1], "block": [128, 1, 1]}}]
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "NVIDIA H200"}]}))
    return path


def test_phases_side_by_side_in_every_format(tmp_path):
    trace = _synthetic_serving_trace(tmp_path / "serve.json")
    doc = explain_json(trace, "--device", "h200")
    assert doc["summary"]["step_rule"] == "engine iterations (SGLang)"
    prefill, decode = doc["phases"]
    assert (prefill["phase"], prefill["tokens"], prefill["kernel_us"]) == ("prefill", 10, 30.0)
    assert (decode["phase"], decode["tokens"], decode["kernel_us"]) == ("decode", 2, 20.0)
    assert (prefill["kernel_us_per_token"], decode["kernel_us_per_token"]) == (3.0, 10.0)
    # decode: the mm reads the weight 4096*4096*2 B and x 2*4096*2 B, writes 2*4096*2 B: memory-bound
    moved = 4096 * 4096 * 2 + 2 * 4096 * 2 + 2 * 4096 * 2
    assert decode["fused_floor_us"] == pytest.approx(moved / 4.8e12 * 1e6, rel=1e-3)
    assert decode["tokens_per_s_ceiling"] == pytest.approx(2 / (moved / 4.8e12), rel=1e-3)
    table = run_cli("explain", trace, "--device", "h200")
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.strip() == "per phase")
    assert lines[head + 1].replace("┃", " ").split() == ["prefill", "decode"]
    assert all(len(line) <= 80 for line in lines[head:head + 14])
    assert "J / token" in table.stdout and "n/a" in table.stdout
    md = run_cli("explain", trace, "--device", "h200", "-f", "markdown").stdout
    assert "| | prefill | decode |" in md.replace("|  |", "| |")
    csv = run_cli("explain", trace, "--device", "h200", "-f", "csv").stdout.splitlines()
    assert csv[0].endswith(",phase") and [r.rsplit(",", 1)[1] for r in csv[1:]] == ["prefill", "decode"]


def test_a_bundle_keeps_the_graphs_it_captured_before_the_window():
    """Item 4: `tracekit capture` of a script serving from CUDA graphs (torch.compile reduce-overhead, H200)
    whose graphs were captured in warm-up, before the recorded window: the bundle holds each capture
    (meta.json cuda_graphs), and explain BUNDLE matches every replayed kernel of every step to it."""
    bundle = H200 / "models" / "llama_decode_reduce_overhead"
    meta = json.loads((bundle / "meta.json").read_bytes())
    assert meta["warmup"] == 4 and [g["capture"] for g in meta["cuda_graphs"]] == ["graph_capture_0.json.gz",
                                                                                   "graph_capture_1.json.gz"]
    doc = explain_json(bundle)
    info = doc["summary"]["graph_replays"]
    assert info["capture_files"] == ["graph_capture_0.json.gz", "graph_capture_1.json.gz"]
    assert [(s["graph_replayed"], s["graph_matched"]) for s in doc["steps"]] == [(124, 124)] * 3
    # the replayed decode: phase and tokens from the capture's shapes, the same weights + KV per token
    (phase,) = doc["phases"]
    assert (phase["phase"], phase["tokens"]) == ("decode", 3)
    assert phase["fused_floor_us_per_token"] == pytest.approx(986_783_744 / 4.8e12 * 1e6, rel=0.005)


def test_replays_are_compared_with_the_captures_under_their_key_once(monkeypatch):
    """vLLM piecewise: 25 replays, 25 captures. A naive match pairs every replay with every capture (625
    pairings, each kernel by kernel). Indexed by kernel count and names, with one answer per distinct
    replay, the pairings are at most one per capture here: the first and last pieces (4 and 12
    kernels) each have one capture of their count, the 23 middle pieces share one kernel sequence."""
    import tracekit.load.graph_match as graph_match
    from tracekit.load.graph_replay import map_graph_kernels
    from tracekit.load.kineto import load_trace

    calls = []
    real = graph_match._pair
    monkeypatch.setattr(graph_match, "_pair", lambda replay, cap: calls.append(id(cap)) or real(replay, cap))
    trace = load_trace(VLLM)
    caps = sorted((VLLM.parent / "capture_traces").glob("graph_capture_rank_0.*"))
    summary = map_graph_kernels(trace, capture_paths=caps)
    assert summary == {"replayed": 361, "mapped": 361, "unmapped": 0, "captures": 25}
    assert len(calls) <= 25 and len(set(calls)) == len(calls)


def test_without_steps_or_annotations_each_graph_replay_begins_an_iteration(tmp_path):
    """The H200 graph trace (plain torch.profiler: capture, then 5 ProfilerSteps each replaying the one
    FULL graph of 40 kernels) with its ProfilerStep ranges removed, as a serving trace without them
    would be: each replay of the graph's first (only) piece begins an iteration, so the 5 iterations are
    the 5 replaying ProfilerSteps, kernel for kernel."""
    src = H200 / "graph_capture_and_replay_b128.json.gz"
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    bare = tmp_path / "no_steps.json.gz"
    bare.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with_steps, without = explain_json(src), explain_json(bare)
    assert with_steps["summary"]["kernels_per_step"] == [2, 40, 40, 40, 40, 40]
    assert without["summary"]["step_rule"].startswith("graph replays")
    assert without["summary"]["kernels_per_step"] == [40] * 5
    starts = lambda d, k: sorted(r["start_us"] for r in d["kernels"] if r["step"] == k)      # noqa: E731
    assert [starts(without, k) for k in range(5)] == [starts(with_steps, k + 1) for k in range(5)]
    assert [s["graph_matched"] for s in without["steps"]] == [40] * 5


def test_capture_file_names_of_both_engines(tmp_path):
    """Names only (the files are empty placeholders; nothing reads them here): SGLang's bs_{bs}[_q_{q}]_rank{N},
    vLLM's graph_capture_rank_{N}.*, SGLang's all-sizes cuda_graph_capture-*-TP-{N}, execution_details.json."""
    from tracekit.load.capture_dir import capture_files_in

    names = ["bs_1_rank0.json.gz", "bs_8_rank0.json.gz", "bs_8_q_4_rank0.json.gz", "bs_8_rank1.json.gz",
             "graph_capture_rank_0.1773709679453551615.pt.trace.json.gz", "graph_capture_rank_1.17.pt.trace.json.gz",
             "cuda_graph_capture-CudaGraphRunner-TP-0.json.gz", "notes.txt"]
    for n in names:
        (tmp_path / n).write_bytes(b"")
    vllm_file = "graph_capture_rank_0.1773709679453551615.pt.trace.json.gz"
    (tmp_path / "execution_details.json").write_text(json.dumps(
        [{"file": vllm_file, "batch_size": 512, "mode": "PIECEWISE"}]))
    files, notes = capture_files_in(tmp_path, 0)
    got = {f.path.name: (f.rank, f.batch_size, f.mode) for f in files}
    assert got == {"bs_1_rank0.json.gz": (0, 1, None), "bs_8_rank0.json.gz": (0, 8, None),
                   "bs_8_q_4_rank0.json.gz": (0, 32, None),           # 8 sequences × 4 query tokens
                   "graph_capture_rank_0.1773709679453551615.pt.trace.json.gz": (0, 512, "PIECEWISE"),
                   "cuda_graph_capture-CudaGraphRunner-TP-0.json.gz": (0, None, None)}
    assert notes == [f"{tmp_path}: 2 capture file(s) of other ranks left out (the trace is rank 0)"]
    assert {f.path.name for f in capture_files_in(tmp_path, 1)[0]} == {"bs_8_rank1.json.gz",
                                                                       "graph_capture_rank_1.17.pt.trace.json.gz"}


def test_batch_size_then_mode_single_out_a_capture():
    """SYNTHETIC captures (in memory): CUDA captures name no kernels, so graphs of batch sizes 1 and 8 with
    the same kernel count both fit a replay; the step's batch size (engine annotation, in tokens) keeps
    the smallest captured size ≥ it, then the launch count keeps FULL or PIECEWISE."""
    import pandas as pd

    from tracekit.load.graph_match import Capture, CaptureIndex

    def cap(bs, mode):
        op = {"name": "aten::mm", "args": {"Input Dims": [[bs, 4096], [4096, 4096]]}}
        return Capture("caps", None, [("kernel", None, op), ("kernel", None, op)], bs, mode)

    replay = pd.DataFrame({"kind": ["kernel", "kernel"], "name": ["nvjet_a", "nvjet_b"]})
    one, eight, eight_pw = cap(1, "DECODE"), cap(8, "FULL"), cap(8, "PIECEWISE")
    index = CaptureIndex([one, eight])
    assert index.match(replay, None, 5, 1)[0] is eight                # 5 tokens run in the graph of 8
    assert index.match(replay, None, 1, 1)[0] is one
    assert index.match(replay, None, None, 1) == (None, "2 captures fit with different ops (the step names no "
                                                        "batch size)")
    assert index.match(replay, None, 9, 1) == (None, "2 captures fit with different ops (batch size 9 does not "
                                                     "single one out)")
    moded = CaptureIndex([eight, eight_pw])
    eight_pw.nodes = [("kernel", None, {"name": "aten::addmm", "args": {"Input Dims": [[8, 4096]]}})] * 2
    assert moded.match(replay, None, 8, 1)[0] is eight and moded.match(replay, None, 8, 3)[0] is eight_pw


def test_the_python_api_takes_graph_captures(tmp_path):
    import tracekit

    shutil.copy(SGLANG, tmp_path / "decode.json.gz")
    analysis = tracekit.load(tmp_path / "decode.json.gz", graph_captures=SGLANG_CAPTURE, cache=False)
    replayed = analysis.kernels[analysis.kernels["graph"]]
    assert len(replayed) == 544 and (replayed["op_source"] == "graph_capture").all()


def test_ranks_gives_each_rank_its_capture_files(tmp_path):
    run, caps = tmp_path / "run", tmp_path / "caps"
    run.mkdir(), caps.mkdir()
    for name in ("rank0.json.gz", "rank1.json.gz"):        # the same rank-0 trace twice: two rows
        shutil.copy(SGLANG, run / name)
    shutil.copy(SGLANG_CAPTURE, caps / "bs_32_rank0.json.gz")
    with_caps = run_cli("ranks", run, "--graph-captures", caps, "--workers", "1", "-f", "json")
    without = run_cli("ranks", run, "--workers", "1", "-f", "json")
    assert with_caps.returncode == without.returncode == 0
    assert "left unmapped" not in with_caps.stderr and "544 of 544 replayed rows left unmapped" in without.stderr
    gemm_share = _kernel_time_share(SGLANG, "Cijk_")          # the replay's GEMMs now have floors
    assert all(r["covered_us"] >= gemm_share / 100 * r["kernel_us"] for r in json.loads(with_caps.stdout)["ranks"])
    assert all(r["covered_us"] < 0.02 * r["kernel_us"] for r in json.loads(without.stdout)["ranks"])


def test_decode_attention_reads_the_keys_of_the_engines_step_annotation(sglang_layout):
    """The step's annotation execute_32_context_0(...)_generation_32(sq32sk32785...) says its 32 decode
    tokens attend 32,785 keys in all; every layer's paged attention call (q [32, 32, 128] bf16, caches
    [835874, 1, 8, 128] bf16: Qwen3-8B, 32 query heads, 8 KV heads, head dim 128) reads them all:
    FLOPs 2·Hq·keys·(D + Dv) = 2·32·32,785·256 = 537,149,440; bytes q 32·32·128·2 = 262,144 + K and V
    rows 2·32,785·8·128·2 = 134,287,360 + out 262,144 = 134,811,648 (TraceLens's figures) + kv_indptr
    [33] int32 = 132. Without the annotation's key count the record's bound is 32 keys: 655,492 B."""
    doc = explain_json(sglang_layout)
    attn = [k for k in doc["kernels"] if k["op"] == "sglang_profiler::attention_paged_attention_ragged_100"
            and k["flops"] is not None]
    assert len(attn) == 36                                    # one per decoder layer
    assert {(k["flops"], k["bytes"]) for k in attn} == {(2 * 32 * 32_785 * 256, 134_811_648 + 132)}
    assert 2 * 32 * 32_785 * 256 == 537_149_440 and 262_144 + 2 * 32_785 * 8 * 128 * 2 + 262_144 == 134_811_648
    assert all("K = 32785 keys (the engine's step annotation)" in k["cost_note"] for k in attn)
    # the step's floor rises by 36 calls' extra bytes at the MI300X's 5.3 TB/s (memory-bound: 134.8 MB
    # at 5.3 TB/s = 25.4 µs against 537 MFLOPs at ~1.3 PFLOP/s = 0.4 µs)
    bound = explain_json(SGLANG, "--graph-captures", str(sglang_layout.parent / "capture_traces"),
                         "--step-marker", "^step\\[DECODE")           # SGLang's own range: no key count
    bound_attn = [k for k in bound["kernels"] if k["op"] == attn[0]["op"] and k["flops"] is not None]
    assert {k["bytes"] for k in bound_attn} == {655_492}
    assert "a lower bound" in bound_attn[0]["cost_note"]
    rise = 36 * (134_811_780 - 655_492) / 5.3e6                                 # µs
    step = doc["steps"][0]
    assert step["floor_us"] == pytest.approx(sum(k["floor_us"] or 0 for k in doc["kernels"] if k["step"] == 0))
    here = {k["start_us"] for k in doc["kernels"] if k["step"] == 0}     # the SGLang range holds other kernels
    before = sum(k["floor_us"] or 0 for k in bound["kernels"] if k["start_us"] in here)
    assert step["floor_us"] - before == pytest.approx(rise, rel=1e-9)
    # the one-kernel floor reads every layer's K and V rows for the annotation's keys, not the bound's 32
    fused = doc["phases"][0]["fused_floor_us"] - bound["phases"][0]["fused_floor_us"]
    assert fused >= 0.99 * 36 * 2 * (32_785 - 32) * 8 * 128 * 2 / 5.3e6


def test_annotation_key_counts_go_to_the_attention_call_over_their_tokens():
    """Synthetic annotations (the two formats' documented fields): a call over the whole batch gets the
    step's total, a call over one phase's tokens that phase's keys, anything else (or SGLang's plain
    step[DECODE bs=32], which states no keys) none, so the record keeps its labelled bound."""
    from tracekit.load.engine_steps import parse
    mixed = parse("execute_37_context_1(sq5sk5sqsq25sqsk25)_generation_32(sq32sk32785sqsq32sqsk32785)")
    assert (mixed.keys_for(37), mixed.keys_for(32), mixed.keys_for(5), mixed.keys_for(7)) == \
        (5 + 32_785, 32_785, 5, None)
    assert parse("step[MIXED bs=2 c=1 g=1 c_sq=5 c_sk=5 g_sq=1 g_sk=900]").keys_for(1) == 900
    assert parse("step[DECODE bs=32]").keys_for(32) is None


def test_a_mixed_step_keeps_the_bound_where_the_call_records_no_request_count():
    """TraceLens's vLLM piecewise step execute_8192_context_9(sq8155sk8430...)_generation_37(sq37sk34489...)
    annotates 8,430 + 34,489 keys, but vllm::unified_attention_with_output gets this step's 8,192 query
    tokens and no request count: its (query, key) pairs are not the keys (they are for a decode batch
    only), so it keeps the labelled bound of one key per query token."""
    doc = explain_json(VLLM)
    attn = [k for k in doc["kernels"] if k["op"] == "vllm::unified_attention_with_output" and k["flops"] is not None]
    assert attn and all("K assumed = 8192 keys (one per query token), a lower bound" in k["cost_note"] for k in attn)
    from tracekit.load.engine_steps import parse
    from tracekit.ops import OpCall
    from tracekit.ops.serving import engine_keys
    mixed = parse(doc["steps"][0]["name"])
    real = OpCall(attn[0]["op"], attn[0]["op_dims"], attn[0]["op_types"])
    assert real.tensor(0).shape[0] == 8192 and engine_keys(real, mixed) is None
    q = [[37, 64, 64], [37, 8, 64], [37, 8, 64], [37, 64, 64]]    # synthetic: a call over the 37 decode tokens
    call = OpCall("vllm::unified_attention_with_output", q, ["c10::BFloat16"] * 4)
    assert engine_keys(call, mixed) == 34_489


def test_a_warm_cache_keeps_the_warning_of_a_named_capture_folder(tmp_path):
    """The SGLang decode trace, explained once (its table cached), then with --graph-captures naming an empty
    folder: the second run still says the folder holds no capture trace (the table's cache key had not
    named the folder, so the warm run had dropped the warning)."""
    import os
    import shutil
    from conftest import run_cli_subprocess
    trace = tmp_path / "decode.json.gz"
    shutil.copy(SGLANG, trace)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "TRACEKIT_NO_CACHE"}       # the cache on, as users have it
    env["TRACEKIT_CACHE_DIR"] = str(tmp_path / "cache")
    first = run_cli_subprocess("explain", trace, "-f", "csv", env=env)
    assert first.returncode == 0
    second = run_cli_subprocess("explain", trace, "-f", "csv", "--graph-captures", empty, env=env)
    assert second.returncode == 0 and "no capture trace of rank 0 in it" in second.stderr
