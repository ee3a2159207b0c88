"""Serving ops (SGLang, aiter, vLLM) costed on TraceLens's real SGLang Qwen3-8B decode trace, its 544
graph-replayed kernels mapped to the capture trace's ops (tests/data/peers/tracelens/inference__sglang_
decode__*): FLOPs and bytes derived by hand from the recorded shapes (batch 32 decode tokens, hidden 4096,
32 query heads and 8 KV heads of 128, intermediate 12288, bf16 = 2 bytes), and every GEMM signature of
TraceLens's own report for that trace (tests/data/serving/sglang_decode/perf_csvs/GEMM.csv) costed the same.

Ops seen in other engines' traces but not in a trace kept here are costed from OpCalls built with the
shapes TraceLens's vLLM test capture (tests/traces/inference/vllm_decode_full, gpt-oss on MI300X) records,
or, where marked SYNTHETIC, with shapes written by hand."""

from __future__ import annotations

import ast
import csv
from functools import lru_cache

import pytest

from conftest import DATA, PEERS
from tracekit.analyze import analyze_path, annotate
from tracekit.load.graph_replay import map_graph_kernels
from tracekit.load.kineto import load_trace
from tracekit.ops import OpCall, cost_of, lookup

SGLANG = PEERS / "tracelens" / "inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
PREFILL = DATA / "serving" / "sglang_prefilldecode" / "sglang_Qwen3-8B_prefilldecode.json.gz"
CAPTURE = PEERS / "tracelens" / "inference__sglang_decode__capture_traces__bs_32_rank0.json.gz"
GEMM_CSV = DATA / "serving" / "sglang_decode" / "perf_csvs" / "GEMM.csv"
T, HIDDEN, BF16 = 32, 4096, 2
X = T * HIDDEN * BF16                   # one [32, 4096] bf16 activation: 262,144 B


@lru_cache(maxsize=1)
def kernels():
    trace = load_trace(SGLANG)
    assert map_graph_kernels(trace, capture_paths=[CAPTURE])["mapped"] == 544
    return annotate(trace).kernels


def rows(op: str, dims: list | None = None):
    df = kernels()
    hit = df[(df["op"] == op) & df["flops"].notna()]
    if dims is not None:
        hit = hit[hit["op_dims"].map(lambda d: d == dims)]
    assert len(hit), op
    return hit


def one(op: str, dims: list | None = None):
    hit = rows(op, dims)
    assert hit["flops"].nunique() == 1 and hit["bytes"].nunique() == 1
    return hit.iloc[0]


def test_costed_share_of_kernel_time_with_the_capture_mapped():
    """Before these records 63.8 % of the 9,765 µs of kernel time had a floor (the GEMMs, copies and
    the sampler's reductions); with them 99.70 %: left without one are three SGLang Triton/HIP helper
    kernels launched without an op (resolve_future_token_ids, clamp_position,
    create_flashinfer_kv_indices_triton: 17.6 µs) and two _foreach_copy_ calls (12.1 µs)."""
    df = kernels()
    k = df[df["kind"] == "kernel"]
    share = k.loc[k["covered"].astype(bool), "dur_us"].sum() / k["dur_us"].sum()
    assert share >= 0.95
    assert share == pytest.approx(0.99696, abs=5e-5)


def test_paged_attention_bound_says_which_quantity_is_assumed():
    """aiter paged_attention_ragged as SGLang's profiler records it (call-site suffix _100): out
    [32,32,128], workspace, q [32,32,128], k/v caches [835874 pages, 1, 8, 128], kv_indptr [33] int32 ...
    kv_indptr's values are not recorded, so K = one key per query token = 32 keys (a lower bound):
    bytes = q 32·32·128·2 = 262,144 + K rows 32·8·128·2 = 65,536 + V rows 65,536 + kv_indptr 33·4 = 132
    + out 262,144 = 655,492; FLOPs = 2·Hq 32·(T·K/B = 32 query·key pairs per head)·(128 + 128) = 524,288.
    The second kernel of the call (the ll4mi reduce) points at the first. (The analysed trace's rows
    read the step annotation's keys instead: tests/test_serving.py; here the call alone.)"""
    r = one("sglang_profiler::attention_paged_attention_ragged_100")
    c = cost_of(OpCall(r["op"], r["op_dims"], r["op_types"], None, r["op_concrete"]))
    assert c.bytes == 262_144 + 65_536 + 65_536 + 132 + 262_144 == 655_492
    assert c.flops == 2 * 32 * 32 * (128 + 128) == 524_288
    assert "KV lengths not recorded: K assumed = 32 keys (one per query token), a lower bound" in c.model
    df = kernels()
    calls = df[df["op"] == "sglang_profiler::attention_paged_attention_ragged_100"]
    assert len(calls) == 72 and calls["covered"].all()
    assert lookup("sglang_profiler::attention_paged_attention_ragged_7").name == "paged_attention"


def test_paged_attention_with_the_engines_key_count_matches_tracelens():
    """The same call given the key total the trace's own step annotation states
    (execute_32_context_0(...)_generation_32(sq32sk32785...)) as OpCall.kv_keys: decode, so 32,785 pairs
    per head: FLOPs 2·32·32,785·256 = 537,149,440 and bytes q + 32,785 keys' K and V rows + out
    = 262,144 + 2·32,785·8·128·2 + 262,144 = 134,811,648 (+ kv_indptr 132): TraceLens's
    InferenceAttention_fwd.csv row (0.53714944 GFLOPS, 128.56640625 MiB)."""
    import gzip
    import json
    import re
    names = [e["name"] for e in json.loads(gzip.decompress(SGLANG.read_bytes()))["traceEvents"]
             if e.get("cat") == "user_annotation"]
    keys = [int(m.group(1)) for n in names if (m := re.search(r"_generation_32\(sq32sk(\d+)", n))]
    assert keys == [32_785]
    r = one("sglang_profiler::attention_paged_attention_ragged_100")
    c = cost_of(OpCall(r["op"], r["op_dims"], r["op_types"], None, r["op_concrete"], kv_keys=keys[0]))
    assert c.flops == 2 * 32 * 32_785 * 256 == 537_149_440
    assert c.bytes == 262_144 + 2 * 32_785 * 8 * 128 * 2 + 132 + 262_144 == 128.56640625 * 2**20 + 132
    assert "K = 32785 keys (the engine's step annotation)" in c.model


def test_add_rmsnorm_reads_input_residual_weight_writes_out_and_residual():
    """aiter::add_rmsnorm(out, input, residual_in, residual_out, weight [4096], eps): input, residual_in
    and weight read, out and residual_out written: 4·262,144 + 8,192 = 1,056,768 B (TraceLens: 1.0078125
    MiB, the same); 5 FLOPs per element = 655,360."""
    r = one("aiter::add_rmsnorm")
    assert r["bytes"] == 4 * X + HIDDEN * BF16 == 1_056_768
    assert r["flops"] == 5 * T * HIDDEN
    assert r["fused_ops"] == ["add", "rms_norm"]


def test_rmsnorm_on_hidden_and_qk_norm_heads():
    """aiter::rmsnorm(out, input, weight, eps): the final norm [32, 4096] and the per-head q/k norms
    (q: 32 tokens · 32 heads = [1024, 128], k: 32 · 8 = [256, 128]): input + out + weight."""
    assert one("aiter::rmsnorm", [[32, 4096], [32, 4096], [4096], []])["bytes"] == 2 * X + 8_192 == 532_480
    q = one("aiter::rmsnorm", [[1024, 128], [1024, 128], [128], []])
    assert q["bytes"] == 2 * 1024 * 128 * 2 + 128 * 2 == 524_544         # TraceLens: 0.500244140625 MiB
    assert q["flops"] == 4 * 1024 * 128
    assert one("aiter::rmsnorm", [[256, 128], [256, 128], [128], []])["bytes"] == 2 * 256 * 128 * 2 + 256


def test_silu_and_mul_reads_the_gate_up_pair_writes_half():
    """sgl_kernel::silu_and_mul(out [32, 12288], input [32, 24576]): 32·24576·2 + 32·12288·2 = 2,359,296 B
    (TraceLens: 2.25 MiB); 5 FLOPs per output element = 1,966,080 (TraceLens: the same)."""
    r = one("sgl_kernel::silu_and_mul")
    assert r["bytes"] == 32 * 24576 * 2 + 32 * 12288 * 2 == 2_359_296
    assert r["flops"] == 5 * 32 * 12288 == 1_966_080
    assert r["fused_ops"] == ["silu", "mul"]


def test_sglang_rotary_reads_positions_and_one_cache_row_per_token():
    """sgl_kernel::rotary_embedding(positions [32] int64, q [32, 4096], k [32, 1024], head_size 128,
    cos_sin_cache [41216, 128], neox): positions 256 + q 262,144 + k 65,536 + 32 cache rows·128·2 = 8,192
    read, q and k written (327,680): 663,808 B; 3 FLOPs per rotated element = 491,520."""
    r = one("sgl_kernel::rotary_embedding")
    assert r["bytes"] == 256 + X + 65_536 + 8_192 + X + 65_536 == 663_808
    assert r["flops"] == 3 * 32 * (4096 + 1024) == 491_520


def test_store_cache_writes_the_new_rows_not_the_cache():
    """sglang::store_cache(k [32,1024], v [32,1024], k_cache, v_cache [835874, 1024], indices [32] int64,
    row bytes 2048, splits 0): k + v + indices read (65,536·2 + 256), their rows written (131,072)."""
    r = one("sglang::store_cache")
    assert r["bytes"] == 2 * 65_536 + 256 + 2 * 65_536 == 262_400
    assert r["flops"] == 0


@lru_cache(maxsize=1)
def prefill_kernels():
    return analyze_path(PREFILL)[0].kernels


def test_prefill_batch_costed_and_its_attention_bound():
    """TraceLens's eager SGLang prefill trace (one EXTEND batch: 15 requests, 15,360 tokens): 99.9965 % of
    the 492,773.592 µs of kernel time has a floor; left: 2 op-less kernels (7.010 + 4.686 µs) and one profiler
    range (5.728 µs): (492,773.592 − 17.424) / 492,773.592. Its aten::index (the 15 last tokens' rows of
    [15360, 4096] bf16, 6.088 µs) is costed from the op's child ops: 15·8 + 2·15·4096·2 = 245,880 B.
    aiter::mha_batch_prefill(q [15360,32,128], k/v caches [835874 pages of 1 token, 8, 128], cu_seqlens_q
    [16], kv_indptr [16], ...): no KV lengths recorded, so K = 15,360 keys (one per token) and the pairs
    the causal minimum for 15,360 tokens in 15 requests: (15360²/15 + 15360)/2 = 7,872,000 per head
    (= 15·1024·1025/2: the engine's own annotation says 15 requests of 1024 tokens, no prefix, so the bound
    is exact here). FLOPs = 2·32 heads·7,872,000·256 = 128,974,848,000; bytes = q 125,829,120 + K, V
    2·15360·8·128·2 = 62,914,560 + kv_indptr 64 + out 125,829,120 = 314,572,864."""
    df = prefill_kernels()
    k = df[df["kind"] == "kernel"]
    share = k.loc[k["covered"].astype(bool), "dur_us"].sum() / k["dur_us"].sum()
    assert share == pytest.approx((492_773.592 - 7.010 - 4.686 - 5.728) / 492_773.592, abs=1e-7)
    index = k[k["op"] == "aten::index"]
    assert len(index) == 1 and index["bytes"].iloc[0] == 15 * 8 + 2 * 15 * 4096 * 2 == 245_880
    r = k[(k["op"] == "aiter::mha_batch_prefill") & k["flops"].notna()]
    assert len(r) == 36 and set(r["flops"]) == {2 * 32 * 7_872_000 * 256} == {128_974_848_000}
    assert set(r["bytes"]) == {125_829_120 + 62_914_560 + 64 + 125_829_120} == {314_572_864}
    assert "pairs assumed = the causal minimum for 15360 query tokens in 15 requests" in r.iloc[0]["cost_note"]


def _gemm_signatures():
    with open(GEMM_CSV, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("sig", _gemm_signatures(), ids=lambda s: f"{s['name']}-{s['param: N']}x{s['param: K']}")
def test_every_tracelens_gemm_signature_costs_the_same(sig):
    """Every row of TraceLens's GEMM.csv for this trace (aiter::gemm_a16w16 and the aten::mm it calls,
    M = 32 tokens), costed by tracekit from the row's own recorded Input Dims / types / Concrete Inputs:
    FLOPs 2MNK within 0.5 % of TraceLens's (they are equal), bytes A + B + C equal to its Data Moved."""
    call = OpCall(sig["name"], ast.literal_eval(sig["Input Dims_first"]), ast.literal_eval(sig["Input type_first"]),
                  ast.literal_eval(sig["Input Strides_first"]), ast.literal_eval(sig["Concrete Inputs_first"]))
    cost = cost_of(call)
    m, n, k = (int(sig[f"param: {x}"]) for x in "MNK")
    assert cost.flops == 2 * m * n * k
    assert cost.flops == pytest.approx(float(sig["GFLOPS_first"]) * 1e9, rel=0.005)
    assert cost.bytes == (m * k + n * k + m * n) * 2 == float(sig["Data Moved (MB)_first"]) * 2**20
    assert (cost.dtype, cost.unit) == ("bf16", "matrix")
    if sig["name"] == "aten::mm":          # the replayed kernels carry the capture's aten::mm: the same FLOPs
        hit = rows("aten::mm", ast.literal_eval(sig["Input Dims_first"]))
        assert set(hit["flops"]) == {cost.flops} and len(hit) == int(sig["name_count"])


# ---- ops of the vLLM capture (TraceLens tests/traces/inference/vllm_decode_full, gpt-oss, MI300X) ----

def call(name, dims, types, concrete=None):
    return OpCall(name, dims, types, None, concrete)


B, S, I32, F32, I64 = "c10::BFloat16", "Scalar", "int", "float", "long int"


def test_vllm_unified_attention_lower_bound():
    """vllm::unified_attention_with_output(query [32,64,64], key, value [32,8,64], output [32,64,64], ...)
    as recorded: no KV lengths, so K = the 32 new keys: q 262,144 + k 32,768 + v 32,768 + out 262,144;
    FLOPs 2·64 heads·32 pairs·(64 + 64) = 524,288."""
    c = cost_of(call("vllm::unified_attention_with_output",
                     [[32, 64, 64], [32, 8, 64], [32, 8, 64], [32, 64, 64], [], [], [], [0]],
                     [B, B, B, B, "", "", "", B]))
    assert c.bytes == 2 * 32 * 64 * 64 * 2 + 2 * 32 * 8 * 64 * 2 == 589_824
    assert c.flops == 2 * 64 * 32 * 128 and "a lower bound" in c.model


def test_aiter_rms_norms_of_the_vllm_capture():
    """aiter::rms_norm(input [32,2880], weight, eps, ...) returns out; rocm_aiter_rmsnorm2d_fwd_with_add
    (input, residual, weight, eps) returns out and the new residual; rmsnorm2d_fwd_with_add_ck(out,
    input, residual_in, residual_out, weight, eps, ...): x = 32·2880·2 = 184,320 B."""
    x = 32 * 2880 * 2
    assert cost_of(call("aiter::rms_norm", [[32, 2880], [2880], [], []], [B, B, S, S])).bytes == 2 * x + 5760
    fused = [call("vllm::rocm_aiter_rmsnorm2d_fwd_with_add", [[32, 2880], [32, 2880], [2880], []], [B, B, B, S]),
             call("aiter::rmsnorm2d_fwd_with_add_ck", [[32, 2880]] * 4 + [[2880], [], []], [B] * 5 + [S, S])]
    assert {cost_of(c).bytes for c in fused} == {4 * x + 5760}


def test_rms_norm_with_fp8_quant_fused_synthetic():
    """SYNTHETIC, Llama-8B fp8 serving shapes: _C::rms_norm_static_fp8_quant(result [32,4096] fp8, input
    [32,4096] bf16, weight [4096], scale [1] fp32, eps): 262,144 + 8,192 + 4 read, 131,072 written;
    fused_add_rms_norm_static_fp8_quant(result, input, residual, weight, scale, eps): input and residual
    read, the residual written back in place, the fp8 result: 3·262,144 + 8,192 + 4 + 131,072."""
    fp8 = "c10::Float8_e4m3fn"
    plain = cost_of(call("_C::rms_norm_static_fp8_quant", [[32, 4096], [32, 4096], [4096], [1], []],
                         [fp8, B, B, F32, S]))
    assert plain.bytes == 262_144 + 8_192 + 4 + 131_072 and plain.flops == 4 * 32 * 4096
    fused = cost_of(call("_C::fused_add_rms_norm_static_fp8_quant",
                         [[32, 4096], [32, 4096], [32, 4096], [4096], [1], []], [fp8, B, B, B, F32, S]))
    assert fused.bytes == 3 * 262_144 + 8_192 + 4 + 131_072 and fused.flops == 5 * 32 * 4096


def test_silu_and_mul_quant_writes_fp8_synthetic():
    """SYNTHETIC: _C::silu_and_mul_quant(result [32,14336] fp8, input [32,28672] bf16, scale [1] fp32):
    32·28672·2 + 4 read, 32·14336 written (1 byte each); fused ops silu, mul."""
    c = call("_C::silu_and_mul_quant", [[32, 14336], [32, 28672], [1]], ["c10::Float8_e4m3fn", B, F32])
    assert cost_of(c).bytes == 32 * 28672 * 2 + 4 + 32 * 14336
    assert lookup(c.name).fused_ops(c) == ["silu", "mul"]


def test_rocm_unquantized_gemm_weight_stored_n_by_k():
    """vllm::rocm_unquantized_gemm(x [32,2880], weight [5120,2880], bias [5120]): 2·32·5120·2880 FLOPs;
    x + weight + bias + out [32, 5120] bytes."""
    c = cost_of(call("vllm::rocm_unquantized_gemm", [[32, 2880], [5120, 2880], [5120]], [B, B, B]))
    assert c.flops == 2 * 32 * 5120 * 2880
    assert c.bytes == (32 * 2880 + 5120 * 2880 + 5120 + 32 * 5120) * 2 == 30_013_440


def test_rocm_skinny_and_hipblaslt_gemms_synthetic():
    """SYNTHETIC, the same product as above: _rocm_C::wvSplitK(weight [5120,2880], x [32,2880], bias
    [5120], cu_count 304) and aiter::hipb_mm(x [32,2880], weight.t() [2880,5120], solution -1, bias,
    out_dtype 15 = bf16): 2·32·5120·2880 FLOPs and 30,013,440 B each."""
    skinny = cost_of(call("_rocm_C::wvSplitK", [[5120, 2880], [32, 2880], [5120], []], [B, B, B, S],
                          ["", "", "", "304"]))
    hipb = cost_of(call("aiter::hipb_mm", [[32, 2880], [2880, 5120], [], [5120], [], [], [], []],
                        [B, B, S, B, S, "", "", ""], ["", "", "-1", "", "15", "", "", ""]))
    assert skinny.flops == hipb.flops == 2 * 32 * 5120 * 2880
    assert skinny.bytes == hipb.bytes == 30_013_440


# ---- quantised GEMMs and fused MoE: SYNTHETIC calls (no trace here records them), Qwen3 shapes ----

def test_fp8_cutlass_scaled_mm_synthetic():
    """SYNTHETIC: out [32,6144] bf16, a [32,4096] fp8, b [4096,6144] fp8, per-token [32,1] and per-channel
    [1,6144] fp32 scales: 131,072 + 25,165,824 + 128 + 24,576 + 393,216 = 25,714,816 B; 2·32·6144·4096
    FLOPs at the fp8 peak."""
    c = cost_of(call("_C::cutlass_scaled_mm", [[32, 6144], [32, 4096], [4096, 6144], [32, 1], [1, 6144], []],
                     [B, "c10::Float8_e4m3fn", "c10::Float8_e4m3fn", F32, F32, ""]))
    assert c.bytes == 25_714_816 and c.flops == 2 * 32 * 6144 * 4096 and (c.dtype, c.unit) == ("fp8", "matrix")


def test_w8a8_int8_gemm_synthetic():
    """SYNTHETIC: aiter::gemm_a8w8(XQ [32,4096] int8, WQ [6144,4096] int8, x_scale [32,1], w_scale [1,6144]
    fp32, out [32,6144] bf16): 131,072 + 25,165,824 + 128 + 24,576 + 393,216 B, int8 peak."""
    c = cost_of(call("aiter::gemm_a8w8", [[32, 4096], [6144, 4096], [32, 1], [1, 6144], [32, 6144], []],
                     ["signed char", "signed char", F32, F32, B, ""]))
    assert c.bytes == 25_714_816 and c.dtype == "int8" and c.flops == 2 * 32 * 6144 * 4096


def test_awq_int4_weight_bytes_at_stored_width_synthetic():
    """SYNTHETIC: awq_gemm(x [32,4096] fp16, qweight [4096, 768] int32 (8 int4 each: N = 6144), scales
    [32, 6144] fp16 (group 128), qzeros [32, 768] int32, split_k 8): x 262,144 + weight 4096·6144·0.5 =
    12,582,912 + scales 393,216 + zeros 98,304 + out 393,216 = 13,729,792 B; FLOPs at the fp16 peak."""
    c = cost_of(call("_C::awq_gemm", [[32, 4096], [4096, 768], [32, 6144], [32, 768], []],
                     ["c10::Half", I32, "c10::Half", I32, S], ["", "", "", "", "8"]))
    assert c.bytes == 262_144 + 4096 * 6144 // 2 + 393_216 + 98_304 + 393_216 == 13_729_792
    assert c.flops == 2 * 32 * 6144 * 4096 and c.dtype == "fp16"


def test_gptq_marlin_int4_synthetic():
    """SYNTHETIC: gptq_marlin_gemm(a [32,4096] bf16, c None, b_q_weight [256, 12288] int32 (4096·6144 int4),
    b_bias None, b_scales [32, 6144], global_scale None, b_zeros [0], g_idx [0], perm [0], workspace
    [528] int32, b_q_type, size_m 32, size_n 6144, size_k 4096, ...): the workspace is not counted:
    262,144 + 12,582,912 + 393,216 + out 393,216 = 13,631,488 B."""
    dims = [[32, 4096], [], [256, 12288], [], [32, 6144], [], [0], [0], [0], [528], [], [], [], [], [], [], [], []]
    types = [B, "", I32, "", B, "", I32, I32, I32, I32, S, S, S, S, S, S, S, S]
    concrete = [""] * 10 + ["4", "32", "6144", "4096", "True", "False", "True", "False"]
    c = cost_of(call("_C::gptq_marlin_gemm", dims, types, concrete))
    assert c.bytes == 262_144 + 12_582_912 + 393_216 + 393_216 == 13_631_488
    assert c.flops == 2 * 32 * 6144 * 4096 and (c.dtype, c.unit) == ("bf16", "matrix")


@pytest.mark.parametrize("tokens,most", [(32, 128), (4, 32)])
def test_fused_moe_touched_experts_synthetic(tokens, most):
    """SYNTHETIC, Qwen3-30B-A3B shapes: hidden [T, 2048], w1 [128, 1536, 2048], w2 [128, 2048, 768] bf16,
    top-8 routing. FLOPs 2·T·8·(1536·2048 + 2048·768); the routing is not recorded, so the weights of
    the fewest experts a batch can touch, k = 8, are read (9,437,184 B each), with hidden + topk weights
    (fp32) + ids (int32) + out; the note gives the most, min(128, T·8)."""
    c = cost_of(call("vllm::outplace_fused_experts",
                     [[tokens, 2048], [128, 1536, 2048], [128, 2048, 768], [tokens, 8], [tokens, 8]],
                     [B, B, B, F32, I32]))
    per_expert = (1536 * 2048 + 2048 * 768) * 2
    assert per_expert == 9_437_184
    assert c.flops == 2 * tokens * 8 * (1536 * 2048 + 2048 * 768)
    assert c.bytes == 8 * per_expert + 2 * tokens * 2048 * 2 + 2 * tokens * 8 * 4
    assert "assumed k = 8, the fewest" in c.model and f"at most min(E, T·k) = {most}" in c.model


def test_flashinfer_paged_run_hnd_layout_synthetic():
    """SYNTHETIC (no FlashInfer trace here): flashinfer::<uri>_paged_run(float_ws, int_ws, plan_info, q
    [32, 32, 128], k/v cache [4096 pages, 8 heads, 16 tokens, 128] (HND: layout 1), qo_indptr [33],
    kv_indptr [33], kv_indices, last_page_len [32], o [32, 32, 128], lse, mask_mode, layout, ...): the uri
    part of the name is ignored; heads read from dim 1 in HND. K = 32 keys (not recorded):
    q 262,144 + K, V 2·32·8·128·2 = 131,072 + kv_indptr 132 + o 262,144."""
    name = "flashinfer::batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_head_dim_qk_128_paged_run"
    cache = [4096, 8, 16, 128]
    c = cost_of(call(name, [[1024], [1024], [], [32, 32, 128], cache, cache, [33], [33], [4096], [32],
                            [32, 32, 128], [], [], []],
                     ["unsigned char", "unsigned char", "", B, B, B, I32, I32, I32, I32, B, "", S, S],
                     [""] * 12 + ["0", "1"]))
    assert lookup(name).name == "paged_attention"
    assert c.bytes == 262_144 + 131_072 + 132 + 262_144 and c.flops == 2 * 32 * 32 * 256


def test_paged_attention_v1_with_recorded_seq_lens_synthetic():
    """SYNTHETIC: _C::paged_attention_v1 with seq_lens values given (as an execution trace would hold
    them): out, query [4, 32, 128], key_cache [512, 8, 16, 16, 8] (x = 8), value_cache [512, 8, 128, 16],
    num_kv_heads, scale, block_tables [4, 64], seq_lens [4] = 100, 200, 300, 400: K = 1000 keys, decode
    (one query per request): pairs = 1000 per head; bytes = q 32,768 + K, V 2·1000·8·128·2 = 4,096,000 +
    seq_lens 16 + out 32,768; FLOPs 2·32·1000·256 = 16,384,000; the row says K was recorded."""
    dims = [[4, 32, 128], [4, 32, 128], [512, 8, 16, 16, 8], [512, 8, 128, 16], [], [], [4, 64], [4]]
    c = cost_of(call("_C::paged_attention_v1", dims, [B, B, B, B, S, S, I32, I32],
                     ["", "", "", "", "8", "0.088", "", "[100, 200, 300, 400]"]))
    assert c.bytes == 32_768 + 4_096_000 + 16 + 32_768 and c.flops == 16_384_000
    assert "K = 1000 keys (recorded)" in c.model and "assumed" not in c.model


def test_paged_attention_v2_bound_from_max_seq_len_synthetic():
    """SYNTHETIC: _C::paged_attention_v2(out, exp_sums, max_logits, tmp_out, query [8, 32, 128], key_cache,
    value_cache [512, 8, 128, 16], num_kv_heads 8, scale, block_tables [8, 128], seq_lens [8] (values not
    recorded), block_size 16, max_seq_len 2000, ...): one request holds 2000 keys, the 7 others at least
    one: K ≥ 2007 (not 8): K, V 2·2007·8·128·2 = 8,220,672 B; decode pairs = 2007 per head."""
    dims = [[8, 32, 128], [8, 32, 4], [8, 32, 4], [8, 32, 4, 128], [8, 32, 128], [512, 8, 16, 16, 8],
            [512, 8, 128, 16], [], [], [8, 128], [8], [], []]
    types = [B, F32, F32, B, B, B, B, S, S, I32, I32, S, S]
    c = cost_of(call("_C::paged_attention_v2", dims, types, [""] * 7 + ["8", "0.088", "", "", "16", "2000"]))
    assert c.bytes == 8 * 32 * 128 * 2 + 8_220_672 + 8 * 4 + 8 * 32 * 128 * 2
    assert c.flops == 2 * 32 * 2007 * 256
    assert "K assumed = 2007 keys (the longest request's recorded max length + 1 per other request)" in c.model
