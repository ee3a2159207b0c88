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
    for step in {k["step"] for k in got}:     # each routed token once forward and once backward: 2 × 8192
        assert sum(k["flops"] / 1024 for k in got if k["step"] == step) == 2 * 2 * 2048 * 2


def test_index_takes_its_index_shapes_from_the_execution_trace():
    # weights[rows, slot, None]: self [2048, 2, 1] bf16, two int64 indices of n (Kineto records the
    # Tensor?[] as '' and [], the execution trace has them): 2·8n read + n bf16 picked and written
    # per step, the experts' token counts add up to 2 layers × 2048 tokens × top-2 = 8192
    doc = explain_json(MODELS2 / "moe_train")
    got = rows(doc, "aten::index")
    assert len(got) == 3 * 2 * 8
    assert all(k["bytes"] % 20 == 0 and k["cost_note"].startswith("index:") for k in got)
    for step in {k["step"] for k in got}:
        assert sum(k["bytes"] // 20 for k in got if k["step"] == step) == 2 * 2048 * 2


def test_a_broadcast_index_is_read_once_per_stored_element():
    # the gather index_select lowers to: index [n, 1024] int64 with strides [1, 0] (an expand of n indices):
    # 8n read for the index (not 8·1024n), n rows of 1024 bf16 picked and written. 33 a step: 16
    # index_select, 16 from index_add_'s backward (a gather of the source rows), 1 the token embedding
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
    masked = OpCall("aten::index", [[64, 8], [[64]]], ["float", ["bool"]])
    assert "boolean mask" in cost_of(masked)                              # data-dependent size: no floor


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
    # from the JSON rows: every fused AdamW kernel's time per step over the floor of 14 B × params + steps
    # at the H200 datasheet's 4.8 TB/s
    doc = explain_json(MODELS2 / "moe_train")
    times = [k["dur_us"] for k in doc["kernels"] if k["op"] == "aten::_fused_adamw_" and k["step"] >= 0]
    assert len(times) == 3 * 11
    floor_us = (14 * 212_358_144 + 4 * 61) / 4.8e6
    assert row["floor_us"] == pytest.approx(floor_us)
    assert row["gap"] == pytest.approx(sum(times) / 3 / floor_us)


def test_touched_positions_match_the_windows_by_brute_force():
    from tracekit.ops.conv import touched
    for size in (5, 7, 8, 14, 56):
        for k in (1, 2, 3, 7):
            for s in (1, 2, 3, 4):
                for p in (0, 1, 3):
                    for d in (1, 2):
                        out = (size + 2 * p - d * (k - 1) - 1) // s + 1
                        if out <= 0:
                            continue
                        brute = {o * s - p + j * d for o in range(out) for j in range(k)} & set(range(size))
                        assert touched(size, out, k, s, p, d) == len(brute), (size, k, s, p, d)


def test_conv_backward_narrows_x_only_when_its_arguments_are_recorded():
    """A 3x3 stride-2 pad-1 conv 56 -> 28 reads all of x (its windows overlap); without Concrete Inputs the
    stride is unknown, and x is read whole rather than guessed from defaults."""
    from tracekit.ops import OpCall, cost_of
    dims = [[32, 64, 28, 28], [32, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], [], []]
    types = ["c10::BFloat16"] * 3 + ["", "", "", "", "Scalar", "", "Scalar", ""]
    full = 2 * (32 * 64 * 28 * 28 + 32 * 64 * 56 * 56 + 64 * 64 * 9)
    writes = 2 * (32 * 64 * 56 * 56 + 64 * 64 * 9)
    bare = OpCall("aten::convolution_backward", dims, types, concrete=[""] * 11)
    assert cost_of(bare).bytes == full + writes + 2 * 64          # no output_mask recorded: grad_bias too
    given = OpCall("aten::convolution_backward", dims, types,
                   concrete=["", "", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"])
    assert cost_of(given).bytes == full + writes                      # 3x3 s2 p1 covers every position
    one = OpCall("aten::convolution_backward", [[32, 64, 28, 28], [32, 64, 56, 56], [64, 64, 1, 1]] + dims[3:], types,
                 concrete=["", "", "", "", "[2, 2]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1", "[True, True, False]"])
    quarter = 2 * (32 * 64 * 28 * 28 + 32 * 64 * 28 * 28 + 64 * 64)   # 1x1 s2: one position in four
    assert cost_of(one).bytes == quarter + 2 * (32 * 64 * 56 * 56 + 64 * 64)


def test_a_strided_conv_reads_the_tensor_its_producer_wrote_in_the_dataflow(tmp_path):
    """Without the execution trace, tensors link by element count: the 1x1 stride-2 downsample conv's
    input must bind to the ReLU output it reads (a whole [32, 256, 56, 56]), not to an unrelated tensor
    the size of the quarter its windows touch."""
    from tracekit.analyze import analyze_path
    from tracekit.fusion.dataflow import step_fusion
    alone = tmp_path / "trace.json.gz"                   # outside its bundle: no execution trace to join
    alone.write_bytes((MODELS2 / "resnet50_train" / "trace.json.gz").read_bytes())
    trace = analyze_path(alone)[0]
    f = step_fusion(trace, trace.steps[-1].index)
    assert f["kind"] == "estimate"
    downsample = ([32, 256, 56, 56], [32, 512, 28, 28], [32, 1024, 14, 14])
    convs = [n for n in f["nodes"] if n.op == "aten::cudnn_convolution" and n.io is not None
             and list(n.io.reads[0].shape) in downsample and n.io.reads[1].shape[2:] == (1, 1)
             and n.io.reads[1].shape[0] == 2 * n.io.reads[0].shape[1]]
    assert len(convs) == 3
    for n in convs:
        x = n.io.reads[0]
        assert x.stored == x.numel // 4
        (v,) = [v for v in f["values"] if n.index in v.readers and v.tensor.numel == x.numel
                and v.tensor.dtype == x.dtype]
        assert v.producer is not None and f["nodes"][v.producer].op in ("aten::clamp_min_", "aten::relu_",
                                                                          "aten::add_", "aten::relu")


def test_top_table_sets_every_covered_kernel_against_one_floor_once():
    """ResNet-50 training: batch norm backward runs as a reduce and an elementwise kernel, and which of
    the two carries the op call's floor varies by call. Each group's gap is the time of the op calls
    whose floor it carries over that floor, so over all groups the time set against floors is every
    covered kernel's time, once; a group holding only chunks of calls carried elsewhere shows no gap."""
    from tracekit.analyze import analyze_path
    from tracekit.report.table import top_groups
    trace = analyze_path(MODELS2 / "resnet50_train")[0]
    groups = top_groups(trace)
    df = trace.kernels[trace.kernels["step"] >= 0]
    with_gap = groups[groups["gap"].notna()]
    assert (with_gap["gap"] * with_gap["gap_floor_us"]).sum() == pytest.approx(   # gap: time / gap floor
        df.loc[df["covered"], "dur_us"].sum() / len(trace.steps), rel=1e-9)
    bn = groups[groups["op_name"] == "aten::native_batch_norm_backward"]
    assert len(bn) >= 2 and (bn["gap"].dropna() > 1).all()
