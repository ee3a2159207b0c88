"""Real H200 captures of models tracekit was not built on (captures/h200/models2, torch 2.11.0+cu130):
ResNet-50 and ViT-B/16 training, a Mixtral-style MoE training step, HF BERT-base inference. Every
kernel of every step has a floor, and the ops these models brought in are costed as worked out by
hand below."""

from __future__ import annotations

import pytest

from conftest import H200, explain_json

MODELS2 = H200 / "models2"
BUNDLES = ["resnet50_train", "vit_train", "moe_train", "bert_infer"]
KERNELS_PER_STEP = {"resnet50_train": 900, "vit_train": 1030, "moe_train": 978, "bert_infer": 230}


def rows(doc: dict, op: str) -> list[dict]:
    return [k for k in doc["kernels"] if k["op"] == op and k["step"] >= 0 and k["flops"] is not None]


@pytest.mark.parametrize("name", BUNDLES)
def test_every_kernel_of_every_step_has_a_floor(name):
    doc = explain_json(MODELS2 / name)
    s = doc["summary"]
    assert s["kernels_per_step"] == [KERNELS_PER_STEP[name]] * 3
    assert s["costed_pct_per_step"] == pytest.approx([100.0] * 3, abs=1e-9)
    assert s["fused_floor_kind_per_step"] == ["exact"] * 3       # the bundle's execution trace joined
    gaps = [k["gap"] for k in doc["kernels"] if k["step"] >= 0 and k["gap"] is not None]
    assert min(gaps) > 0.6       # no kernel runs far below its floor (the bound that caught the two bugs below)


def test_index_add_reads_index_and_source_and_updates_the_region():
    # out.index_add_(0, rows, ye): self [2048, 1024] bf16, index [n] int64, source [n, 1024] bf16:
    # index 8n + source 2048n read, the region (2048n bytes) read and written; one add per source element
    doc = explain_json(MODELS2 / "moe_train")
    got = rows(doc, "aten::index_add_")
    assert len(got) == 3 * 2 * 8 * 2          # steps × layers × experts × (forward, backward of index_select)
    for k in got:
        n = k["flops"] / 1024
        assert n == int(n) and k["bytes"] == 8 * n + 3 * 2048 * n


def test_index_takes_its_index_shapes_from_the_execution_trace():
    # weights[rows, slot, None]: self [2048, 2, 1] bf16, two int64 indices of n (Kineto records the
    # Tensor?[] as '' and [], the execution trace has them): 2·8n read + n bf16 picked and written
    doc = explain_json(MODELS2 / "moe_train")
    got = rows(doc, "aten::index")
    assert len(got) == 3 * 2 * 8
    for k in got:
        assert k["bytes"] % 20 == 0 and k["bytes"] > 0 and k["cost_note"].startswith("index:")


def test_a_broadcast_index_is_read_once_per_stored_element():
    # index_select backward's gather: index [n, 1024] int64 with strides [1, 0] (an expand of n indices):
    # 8n read for the index (not 8·1024n), n rows of 1024 bf16 picked and written
    # (index_select lowers to this gather: 33 a step, 16 of them index_select's own)
    doc = explain_json(MODELS2 / "moe_train")
    got = rows(doc, "aten::gather")
    assert len(got) == 3 * 33
    assert all(k["bytes"] > 0 and k["bytes"] % (8 + 2 * 2 * 1024) == 0 for k in got)


def test_nll_loss_backward_writes_one_entry_per_row_not_the_zeros():
    # cross_entropy backward on [N = 4·512, C = 32000] fp32 logits: the op's zero_ fills [N, C] with a
    # kernel of its own (aten::fill_, costed there); the nll kernel reads the N int64 targets and the fp32
    # grad_output scalar, and writes one fp32 entry per row: 8N + 4 + 4N bytes
    doc = explain_json(MODELS2 / "moe_train")
    n = 4 * 512
    nll = rows(doc, "aten::nll_loss_backward")
    assert [k["bytes"] for k in nll] == [8 * n + 4 + 4 * n] * 3
    fills = [k for k in rows(doc, "aten::fill_") if k["bytes"] == 4 * n * 32000]
    assert len(fills) == 3


def test_index_with_undefined_entries_keeps_those_dims_whole():
    """causal_mask[:, :, cache_position] in Llama decode: the execution trace lists the indices as
    [None, None, int64 [1]]; self [1, 1, 512, 512] bool gives [1, 1, 1, 512]: 8 + 512 read, 512 written
    (Nsight Compute read 48,384 B from DRAM for it, tests/test_crosscheck_ncu.py: more, as it must)."""
    from tracekit.ops import OpCall, cost_of
    call = OpCall("aten::index", [[1, 1, 512, 512], [[], [], [1]]], ["bool", ["", "", "int64"]])
    assert cost_of(call).bytes == 8 + 512 + 512
    apart = OpCall("aten::index", [[4, 5, 6, 7], [[3], [], [3]]], ["c10::BFloat16", ["int64", "", "int64"]])
    assert cost_of(apart).bytes == 2 * 3 * 8 + 2 * (3 * 5 * 7) * 2       # indexed dims apart: [3, 5, 7]
    leading = OpCall("aten::index", [[2048, 2, 1], [[508], [508]]], ["c10::BFloat16", ["int64", "int64"]])
    assert cost_of(leading).bytes == 2 * 508 * 8 + 2 * 508 * 2
    masked = OpCall("aten::index", [[64, 8], [[64]]], ["fp32", ["bool"]])
    assert isinstance(cost_of(masked), str)                               # data-dependent size: no floor


def test_llama_decode_is_fully_costed_with_its_execution_trace():
    doc = explain_json(H200 / "models" / "llama_decode_eager")
    assert doc["summary"]["costed_pct_per_step"] == pytest.approx([100.0] * 3, abs=1e-9)
    # the rotary cache cos[position_ids]: [512, 128] bf16 by one int64 index: 8 + 256 read, 256 written;
    # the causal mask row above: 8 + 512 read, 512 written
    assert sorted({k["bytes"] for k in rows(doc, "aten::index")}) == [8 + 256 + 256, 8 + 512 + 512]


def test_top_table_groups_an_op_calls_chunks_with_the_kernel_that_carries_its_floor():
    """The MoE's fused AdamW runs as 11 multi_tensor_apply kernels; the op's floor (212,358,144 bf16
    params: param, grad, exp_avg, exp_avg_sq read, param and both moments written, 14 B each; and the
    fp32 step count of each of the 61 parameter tensors read) sits on the longest. The top table shows one group of 11 with all their time against that floor, not a
    1-kernel group under its floor and 10 kernels without one."""
    from tracekit.analyze import analyze_path
    from tracekit.report.table import top_groups
    groups = top_groups(analyze_path(MODELS2 / "moe_train")[0])
    adamw = groups[groups["op_name"] == "aten::_fused_adamw_"]
    assert len(adamw) == 1
    row = adamw.iloc[0]
    assert row["count"] == 11 and row["bytes"] == 14 * 212_358_144 + 4 * 61
    assert row["gap"] == pytest.approx(row["dur_us"] / row["floor_us"]) and row["gap"] > 1
