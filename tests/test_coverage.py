"""docs/coverage.md's figures: the share of kernel time with a floor on each GPU peer trace, and that
what is left has a reason that is information the trace lacks (shapes, launch, byte count, capture)."""

from __future__ import annotations

import re

import pytest

from conftest import PEERS
from tracekit.analyze import analyze_path

FULL = ["tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "tracelens/mi300__gaunernst_bert-small-uncased__1016001.json.gz",
        "tracelens/inference__sglang_decode__capture_traces__bs_32_rank0.json.gz",
        "tracelens/torch_compile_triton__trace.json.gz",
        "tracelens/perf_model__normalization__normalization_layer_test.json.gz",
        "hta/triton_example_triton_example.json.gz",
        "hta/critical_path_cuda_event_sync_multi_stream_event_sync_trace.json.gz"]
SHORT = {   # trace: (covered %, largest share without a model, %)
    "tracelens/b200__eager_trace.json.gz": (99.8, 0.0),      # aten::index from its child ops: 99.74 → 99.77
    "hta/critical_path_alexnet_benchmark_result_2869224_1695835535_trace.json.gz": (85.7, 0.0),
    "hta/amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz": (74.4, 0.0),
    "hta/trace_diff_control_control.json.gz": (58.3, 7.5),
    "hta/nccl_parser_config_nccl_data.json.gz": (44.9, 0.0),
    "hta/trace_diff_test_test.json.gz": (37.0, 5.8),
    "hta/negative_queue_length_values_check_rank0.json.gz": (28.8, 0.6),
    "tracelens/inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz": (0.9, 0.0),
    "tracelens/mi210__gpu_only_trace__gpu_only_trace.json.gz": (0.0, 0.0),
}
MISSING_INFO = ("not recorded", "graph replay", "no launching op", "launch event not in the trace",
                "without a byte count", "has no [link]")


def shares(name: str):
    df = analyze_path(PEERS / name)[0].kernels
    total = df["dur_us"].sum()
    covered = 100 * df.loc[df["covered"], "dur_us"].sum() / total
    rest = df[~df["covered"]]
    no_model = rest[~rest["cost_note"].fillna("").str.contains("|".join(map(re.escape, MISSING_INFO)))]
    other = 100 * df.loc[df["category"] == "other", "dur_us"].sum() / total
    return covered, 100 * no_model["dur_us"].sum() / total, other


@pytest.mark.parametrize("name", FULL)
def test_traces_with_shapes_are_fully_costed(name):
    covered, no_model, other = shares(name)
    assert covered >= 98 and no_model < 2 and other < 1


@pytest.mark.parametrize("name", sorted(SHORT))
def test_what_is_left_lacks_information_not_a_model(name):
    covered, no_model, other = shares(name)
    want_covered, want_no_model = SHORT[name]
    assert covered == pytest.approx(want_covered, abs=0.05)
    assert no_model == pytest.approx(want_no_model, abs=0.05)
    assert other < 1
