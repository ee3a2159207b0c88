"""Cost models on the design's worked example, Y = relu(X Wᵀ + b), X [B,1024], W [1024,1024], bf16.

These feed OpCalls built by hand in the profiler's own format (synthetic inputs, labelled as such);
the same numbers are pinned on real H200 captures in test_h200_captures.py."""

from __future__ import annotations

import pytest

from tracekit.cost.devices import spec_by_id
from tracekit.ops import OpCall, cost_of

BF16 = "c10::BFloat16"


@pytest.mark.parametrize("B", [1, 128])
def test_addmm_flops_and_bytes(B):
    call = OpCall("aten::addmm", [[1024], [B, 1024], [1024, 1024], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"])
    cost = cost_of(call)
    assert cost.flops == 2 * B * 1024 * 1024 + B * 1024         # + one bias add per output element
    assert cost.bytes == 2 * (B * 1024 + 1024 * 1024 + 1024 + B * 1024)
    assert cost.dtype == "bf16" and cost.unit == "matrix"


def test_linear_matches_addmm():
    lin = cost_of(OpCall("aten::linear", [[128, 1024], [1024, 1024], [1024]], [BF16] * 3))
    assert lin.flops == 2 * 128 * 1024 * 1024 + 128 * 1024
    assert lin.bytes == 2 * (128 * 1024 + 1024 * 1024 + 1024 + 128 * 1024)


def test_relu_reads_and_writes_once():
    cost = cost_of(OpCall("aten::relu", [[128, 1024]], [BF16]))
    assert cost.bytes == 2 * 2 * 128 * 1024


def test_split_floor_adds_the_intermediate_round_trip():
    """Two kernels: floors add, and the split writes and re-reads Y [B, N]: 2·(2·B·N) extra bytes."""
    B, N = 128, 1024
    gemm = cost_of(OpCall("aten::addmm", [[N], [B, 1024], [1024, N], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"]))
    relu = cost_of(OpCall("aten::relu", [[B, N]], [BF16]))
    one_kernel_bytes = 2 * (B * 1024 + 1024 * N + N + B * N)
    assert gemm.bytes + relu.bytes - one_kernel_bytes == 2 * (2 * B * N)


def test_floor_is_max_of_compute_and_memory_on_h200():
    spec = spec_by_id("h200")
    B = 128
    flops, nbytes = 2 * B * 1024 * 1024, 2 * (B * 1024 + 1024 * 1024 + 1024 + B * 1024)
    compute_us = flops / (spec.matmul_peak("bf16") * 1e6)
    memory_us = nbytes / (spec.bandwidth_gbs * 1e3)
    assert memory_us > compute_us          # B = 128 is memory-bound on an H200


def test_causal_attention_counts_the_pairs_the_mask_keeps():
    """is_causal keeps query i's keys 0..i: 512·513/2 = 131,328 of 512² pairs, not exactly half."""
    dims = [[2, 8, 512, 64]] * 3 + [[], [], []]
    types = [BF16] * 3 + ["Scalar"] * 3
    full = cost_of(OpCall("aten::_scaled_dot_product_flash_attention", dims, types, concrete=["", "", "", "0.", "False", "False"]))
    causal = cost_of(OpCall("aten::_scaled_dot_product_flash_attention", dims, types, concrete=["", "", "", "0.", "True", "False"]))
    assert full.flops == 4 * 2 * 8 * 512 * 512 * 64
    assert causal.flops == 2 * (2 * 8) * (512 * 513 // 2) * (64 + 64) == 537_919_488
    # q, k, v read, out written (bf16), + the fp32 log-sum-exp [2·8, 512] flash writes for backward
    assert full.bytes == 4 * 2 * (2 * 8 * 512 * 64) + 4 * 2 * 8 * 512


def test_causal_pairs_for_non_square_masks():
    """Decode-shaped causal attention (1 query, 512 keys): PyTorch's is_causal aligns top-left (the
    query sees key 0: 1 pair); the efficient kernel's mask type 2 aligns bottom-right (all 512)."""
    from tracekit.ops.attention import pairs
    assert pairs(1, 512, "top_left") == 1 and pairs(1, 512, "bottom_right") == 512
    assert pairs(4, 8, "bottom_right") == 5 + 6 + 7 + 8 and pairs(8, 4, "top_left") == 1 + 2 + 3 + 4 * 5


def test_conv2d_flops_from_recorded_stride_and_padding():
    # aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    call = OpCall("aten::convolution", [[8, 3, 224, 224], [64, 3, 11, 11], [64], [], [], [], [], [], []],
                  ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
                  concrete=["", "", "", "[4, 4]", "[2, 2]", "[1, 1]", "False", "[0, 0]", "1"])
    cost = cost_of(call)
    out = (224 + 4 - 11) // 4 + 1            # 55
    assert cost.flops == 2 * 8 * 64 * out * out * 3 * 11 * 11 + 8 * 64 * out * out     # + the bias adds
    assert cost.bytes == 4 * (8 * 3 * 224 * 224 + 64 * 3 * 11 * 11 + 64 + 8 * 64 * out * out)


def test_broadcast_add_writes_the_broadcast_shape():
    cost = cost_of(OpCall("aten::add", [[128, 1024], [1024], []], [BF16, BF16, "Scalar"]))
    assert cost.bytes == 2 * (128 * 1024 + 1024 + 128 * 1024)


def test_in_place_add_writes_its_first_input():
    cost = cost_of(OpCall("aten::add_", [[128, 1024], [128, 1024], []], ["float", "float", "Scalar"]))
    assert cost.bytes == 4 * 3 * 128 * 1024


def test_sum_over_one_dim():
    cost = cost_of(OpCall("aten::sum", [[64, 1024], [], [], []], ["float", "ScalarList", "Scalar", ""],
                          concrete=["", "[1]", "False", ""]))
    assert cost.bytes == 4 * (64 * 1024 + 64)


def test_unknown_op_says_why():
    assert cost_of(OpCall("aten::frobnicate", [[4]], ["float"])) == "no cost model for aten::frobnicate"


def test_geforce_bf16_rate_is_half_fp16_accumulate():
    spec = spec_by_id("rtx4090")
    assert spec.matmul_peak("bf16") == pytest.approx(spec.peak("fp16_fp16acc") / 2, rel=1e-3)  # datasheet rounding


def test_addmm_with_beta_zero_neither_reads_nor_adds_its_bias():
    """Synthetic call (no committed trace has one): ``baddbmm(empty, q, kᵀ, beta=0)``, the way older
    attention code scores, ignores ``self`` (PyTorch's documented beta = 0 rule): no bias read, no adds.
    bf16 [16,128,64]·[16,64,128]: 2·16·128·128·64 FLOPs; bytes 2·(2·16·128·64 + 16·128·128)."""
    dims = [[16, 128, 128], [16, 128, 64], [16, 64, 128], [], []]
    types = [BF16, BF16, BF16, "Scalar", "Scalar"]
    zero = cost_of(OpCall("aten::baddbmm", dims, types, concrete=["", "", "", "0", "0.125"]))
    one = cost_of(OpCall("aten::baddbmm", dims, types, concrete=["", "", "", "1", "0.125"]))
    assert zero.flops == 2 * 16 * 128 * 128 * 64
    assert zero.bytes == 2 * (2 * 16 * 128 * 64 + 16 * 128 * 128)
    assert one.flops == zero.flops + 16 * 128 * 128 and one.bytes == zero.bytes + 2 * 16 * 128 * 128
