"""Real values pinned on the H200 captures in captures/h200 (torch 2.11.0+cu130, see its README)."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import H200, ROOT, explain_json

B_VALUES = [1, 128]


def gemm_bytes(B: int) -> int:
    return 2 * (B * 1024 + 1024 * 1024 + 1024 + B * 1024)


# Floor of the bf16 addmm y[B,1024] = x[B,1024]·W[1024,1024] + b[1024] on the H200 datasheet spec
# (989.5 TFLOP/s bf16, 4.8 TB/s = 4.8e6 bytes/µs), worked by hand:
#   B=1:   bytes 2·(1024 + 1024·1024 + 1024 + 1024) = 2,103,296 → 2,103,296 / 4.8e6 = 0.4381867 µs;
#          FLOPs 2·1·1024·1024 = 2,097,152 → / 989.5e6 FLOP/µs = 0.0021 µs: memory-bound
#   B=128: bytes 2·(128·1024 + 1024·1024 + 1024 + 128·1024) = 2,623,488 → / 4.8e6 = 0.54656 µs;
#          FLOPs 268,435,456 → / 989.5e6 = 0.2713 µs: memory-bound
GEMM_FLOOR_US = {1: 0.43818666666666667, 128: 0.54656}


def step_kernels(doc: dict, step: int = 0) -> list[dict]:
    return [k for k in doc["kernels"] if k["step"] == step]


@pytest.mark.parametrize("B", B_VALUES)
def test_seed_eager_two_kernels_gemm_and_relu(B):
    doc = explain_json(H200 / f"seed_eager_b{B}.json.gz")
    assert doc["device"] == {**doc["device"], "name": "NVIDIA H200", "spec": "h200"}
    assert doc["summary"]["kernels_per_step"] == [2] * 5
    gemm, relu = step_kernels(doc)
    assert gemm["category"] == "gemm" and gemm["op"] == "aten::addmm"
    assert gemm["flops"] == 2 * B * 1024 * 1024 + B * 1024     # + one bias add per output element
    assert gemm["bytes"] == gemm_bytes(B)
    assert gemm["fused_ops"] == ["mm", "add"]          # nvjet ..._bias_ epilogue
    assert relu["category"] == "elementwise"
    assert relu["bytes"] == 2 * 2 * B * 1024
    # memory over compute at both sizes, and both floors (≤ 0.55 µs) are under the 0.96 µs the H200
    # takes to run any kernel (spec [launch]): the bound reads "launch"
    assert gemm["bound"] == "launch"
    assert gemm["floor_us"] == pytest.approx(GEMM_FLOOR_US[B], rel=1e-9)


def test_seed_durations_equal_the_trace():
    path = H200 / "seed_eager_b128.json.gz"
    raw = [e for e in json.loads(gzip.open(path).read())["traceEvents"] if e.get("cat") == "kernel"]
    doc = explain_json(path)
    assert sorted(k["dur_us"] for k in doc["kernels"]) == sorted(float(e["dur"]) for e in raw)
    assert any(k["dur_us"] < 1.0 for k in doc["kernels"]) or any(k["dur_us"] != round(k["dur_us"]) for k in doc["kernels"])


@pytest.mark.parametrize("B", B_VALUES)
def test_seed_compile_gemm_plus_triton_relu(B):
    doc = explain_json(H200 / f"seed_compile_b{B}.json.gz")
    assert doc["summary"]["kernels_per_step"] == [2] * 5
    gemm, relu = step_kernels(doc)
    assert gemm["flops"] == 2 * B * 1024 * 1024 + B * 1024 and gemm["bytes"] == gemm_bytes(B)
    assert relu["name"] == "triton_poi_fused_relu_0" and relu["fused_ops"] == ["relu"]
    # in-place relu on the GEMM output: one in_out_ptr, read and written (role from the kept source)
    assert relu["bytes"] == 2 * 2 * B * 1024


@pytest.mark.parametrize("B", B_VALUES)
def test_seed_max_autotune_without_cudagraphs_is_one_fused_kernel(B):
    doc = explain_json(H200 / f"seed_max-autotune-no-cudagraphs_b{B}.json.gz")
    assert doc["summary"]["kernels_per_step"] == [1] * 5
    (k,) = step_kernels(doc)
    assert k["name"] == "triton_tem_fused_addmm_relu_t_0"
    assert k["fused_ops"] == ["addmm", "relu"]
    assert k["category"] == "gemm"
    assert k["flops"] == 2 * B * 1024 * 1024 + B * 1024   # + the bias its epilogue adds (relu not counted)
    assert k["bytes"] == gemm_bytes(B)                  # the one-kernel floor of the worked example


def test_seed_max_autotune_replays_a_cuda_graph():
    """mode="max-autotune" adds CUDA graphs: an input-copy kernel, then the replayed fused kernel."""
    doc = explain_json(H200 / "seed_max-autotune_b1.json.gz")
    assert doc["summary"]["kernels_per_step"] == [2] * 5
    copy, fused = step_kernels(doc)
    assert copy["op"] == "aten::_foreach_copy_"
    assert fused["name"] == "triton_tem_fused_addmm_relu_t_0" and fused["graph"] is True


def test_transformer_block_is_costed_and_causal_attention_keeps_half_the_pairs():
    doc = explain_json(H200 / "block_eager.json.gz")
    assert doc["summary"]["costed_time_pct"] >= 90
    att = [k for k in step_kernels(doc) if k["category"] == "attention"]
    assert len(att) == 1 and att[0]["op"] == "aten::_cudnn_attention_forward"
    # B=4, H=16, S=512, D=64 causal: query i sees keys 0..i, 512·513/2 pairs; 2·B·H·pairs·(D + Dv)
    assert att[0]["flops"] == 2 * 4 * 16 * (512 * 513 // 2) * (64 + 64) == 2_151_677_952
    cats = {k["category"] for k in step_kernels(doc)}
    assert {"gemm", "attention", "norm", "elementwise"} <= cats


def test_compiled_block_fuses_residual_add_into_layer_norm():
    doc = explain_json(H200 / "block_compile.json.gz")
    names = {tuple(k["fused_ops"]) for k in step_kernels(doc)}
    assert ("add", "native_layer_norm") in names
    assert doc["summary"]["kernels_per_step"][0] < explain_json(H200 / "block_eager.json.gz")["summary"]["kernels_per_step"][0]


@pytest.mark.parametrize("how", ["file", "id"])
def test_spec_of_measured_ceilings_overrides_the_datasheet(how):
    """--spec takes a file or a builtin spec id (docs/devices.md names h200-measured)."""
    spec = str(ROOT / "tracekit" / "specs" / "h200-measured.toml") if how == "file" else "h200-measured"
    doc = explain_json(H200 / "seed_eager_b128.json.gz", "--spec", spec)
    assert doc["device"]["spec"] == "h200-measured"
    gemm = step_kernels(doc)[0]
    # measured 4.2 TB/s = 4.2e6 bytes/µs: 2,623,488 bytes / 4.2e6 = 0.62464 µs (bf16 790 TFLOP/s:
    # 268,435,456 FLOPs → 0.3398 µs, so still memory-bound); the datasheet's 4.8 TB/s gives 0.54656 µs
    assert gemm["floor_us"] == pytest.approx(0.62464, rel=1e-9)
    assert gemm["bound"] == "launch"                    # 0.62 µs < the 0.96 µs shortest H200 kernel


def test_compile_bundle_reads_pointer_roles_from_the_kept_kernel_source():
    bundle = H200.parent / "bundles" / "seed_compile"
    assert list((bundle / "kernels").glob("*.py")), "tracekit capture keeps Inductor sources"
    doc = explain_json(bundle)
    relu = [k for k in doc["kernels"] if k["name"] == "triton_poi_fused_relu_0"]
    assert len(relu) == 5
    assert relu[0]["bytes"] == 2 * 2 * 128 * 1024          # in_out_ptr0: read once + written once
    assert "pointer roles from kernel source" in relu[0]["cost_note"]


def test_costed_share_counts_a_cudnn_calls_memset_against_the_calls_floor():
    """The block's cuDNN attention call launches a memset and the attention kernel; the call's floor
    sits on the attention kernel, and the memset's time counts against it: the whole trace is costed,
    in the summary as in every step (the summary had counted only kernels with a floor of their own)."""
    doc = explain_json(H200 / "block_eager.json.gz")
    memsets = [k for k in doc["kernels"] if k["kind"] == "memset"]
    assert len(memsets) == 5 and all(k["floor_us"] is None and k["op"] == "aten::_cudnn_attention_forward"
                                     for k in memsets)
    assert doc["summary"]["costed_time_pct"] == 100.0
    assert doc["summary"]["costed_pct_per_step"] == [100.0] * 5
