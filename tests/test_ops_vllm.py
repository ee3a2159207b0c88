"""vLLM's custom ops on TraceLens's real B200 vLLM trace (tests/data/peers/tracelens/b200__eager_trace):
bytes and FLOPs derived by hand from the recorded shapes (888 tokens, hidden 2880, bf16)."""

from __future__ import annotations

from functools import lru_cache

import pytest

from conftest import PEERS
from tracekit.analyze import analyze_path

B200 = PEERS / "tracelens" / "b200__eager_trace.json.gz"
TOKENS, HIDDEN, BF16 = 888, 2880, 2


@lru_cache(maxsize=1)
def kernels():
    return analyze_path(B200)[0].kernels


def row(op: str):
    hit = kernels()[kernels()["op"] == op]
    assert len(hit), op
    return hit.iloc[0]


def test_rms_norm_reads_input_and_weight_writes_out():
    r = row("_C::rms_norm")
    x = TOKENS * HIDDEN * BF16
    assert r["bytes"] == x + HIDDEN * BF16 + x == 10_235_520
    assert r["flops"] == 4 * TOKENS * HIDDEN


def test_fused_add_rms_norm_writes_input_and_residual_in_place():
    r = row("_C::fused_add_rms_norm")
    x = TOKENS * HIDDEN * BF16
    assert r["bytes"] == 2 * x + HIDDEN * BF16 + 2 * x == 20_465_280


def test_rotary_reads_one_cache_row_per_token_not_the_cache():
    """query [888, 512] (8 heads of 64), key [888, 64], cache [131072, 64] (rot_dim 64 = head_size):
    positions (int64) + q + k + 888 cache rows read, q and k written; 3 FLOPs per rotated element."""
    r = row("_C::rotary_embedding")
    q, k, rows = TOKENS * 512 * BF16, TOKENS * 64 * BF16, TOKENS * 64 * BF16
    assert r["bytes"] == TOKENS * 8 + q + k + rows + q + k == 2_166_720
    assert r["flops"] == 3 * TOKENS * (512 + 64)


def test_fp8_quant_writes_one_byte_per_element():
    r = row("_C::static_scaled_fp8_quant")
    assert r["bytes"] == TOKENS * 512 * BF16 + 4 + TOKENS * 512 * 1 == 1_363_972


def test_reshape_and_cache_writes_the_slots_not_the_cache():
    """key and value [888, 1, 64] bf16 into an fp8 (uint8) cache of 4,213,816 blocks: the new tokens'
    slots are written (1 byte each), the 4.3 GB cache is not read."""
    r = row("_C_cache_ops::reshape_and_cache_flash")
    kv = TOKENS * 64 * BF16
    assert r["bytes"] == 2 * kv + TOKENS * 8 + 2 * 4 + 2 * TOKENS * 64 * 1 == 348_104


@pytest.mark.parametrize("op", ["_C::rms_norm", "_C::fused_add_rms_norm", "_C::rotary_embedding",
                                "_C::static_scaled_fp8_quant", "_C_cache_ops::reshape_and_cache_flash"])
def test_every_kernel_of_these_ops_has_a_floor(op):
    df = kernels()
    assert df.loc[df["op"] == op, "covered"].all()


def test_multimem_all_reduce_moves_its_buffer_once_each_way():
    """vLLM's symmetric-memory all-reduce (symm_mem::multimem_all_reduce_, NVLink SHARP): the switch
    reduces, so each of the 8 ranks sends its [2557440] bf16 buffer and receives the result: 5,114,880 B
    each way over the B200's 900 GB/s per direction = 5.683 µs, bound by the link."""
    df = kernels()
    r = df[(df["op"] == "symm_mem::multimem_all_reduce_") & (df["op_dims"].astype(str) == "[[2557440], [], []]")]
    assert len(r) and set(r["bytes"]) == {2557440 * BF16} == {5_114_880}
    assert r["floor_us"].iloc[0] == pytest.approx(5_114_880 / 900e3) and set(r["bound"]) == {"link"}
    assert df.loc[df["op"] == "symm_mem::multimem_all_reduce_", "covered"].all()
