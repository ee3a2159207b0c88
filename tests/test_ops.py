"""The op table: one record per op family, read by every stage; values derived by hand.

Calls built by hand below are synthetic (the profiler's own format, labelled as such); the rest read
committed real traces (H200 captures, HTA/TraceLens peers)."""

from __future__ import annotations

import gzip
import re
from functools import lru_cache

import orjson
import pytest
from conftest import H200, PEERS, ROOT

from tracekit.analyze import analyze_path
from tracekit.classify.categories import category_of
from tracekit.model.schema import KERNEL_COLUMNS, SchemaError, validate
from tracekit.ops import FAMILIES, OpCall, cost_of, lookup
from tracekit.report.document import explain_dict, to_json

BF16, FP8 = "c10::BFloat16", "c10::Float8_e4m3fn"


@lru_cache(maxsize=None)
def kernels(path: str):
    return analyze_path(path)[0].kernels


def row(path, op: str, dims: str):
    df = kernels(str(path))
    hit = df[(df["op"] == op) & (df["op_dims"].astype(str) == dims)]
    assert len(hit), f"{op} {dims} not in {path}"
    return hit.iloc[0]


def test_every_op_name_has_one_record_and_docs_list_every_family():
    names = [op for f in FAMILIES for op in f.aten]
    assert len(names) == len(set(names))
    doc = (ROOT / "docs" / "ops.md").read_text()
    missing = [f.name for f in FAMILIES if f"`{f.name}`" not in doc]
    assert missing == []


def test_scaled_mm_record():
    """docs/ops.md's worked example (synthetic call): fp8 4096² operands, fp32 scalar scales, bf16 out."""
    n = 4096
    call = OpCall("aten::_scaled_mm", [[n, n], [n, n], [], [], [], [], [], []],
                  [FP8, FP8, "float", "float", "", "", "ScalarType", "Scalar"],
                  concrete=["", "", "", "", "", "", "15", "False"])
    cost = cost_of(call)
    assert cost.flops == 2 * n ** 3 == 137_438_953_472
    assert cost.bytes == 2 * n * n + 2 * 4 + 2 * n * n == 67_108_872 - 2 * n * n + 2 * n * n
    assert (cost.dtype, cost.unit) == ("fp8", "matrix")
    assert lookup("aten::_scaled_mm").fused_ops(call) == ["mm"]
    assert category_of("nvjet_sm90_qqtst_128x256", "kernel", "aten::_scaled_mm") == "gemm"
    fp32_out = OpCall("aten::_scaled_mm", call.dims, call.types, concrete=["", "", "", "", "", "", "6", "False"])
    assert cost_of(fp32_out).bytes == 2 * n * n + 8 + 4 * n * n         # out_dtype 6 = float32


def test_tensor_times_python_number_keeps_the_tensor_dtype():
    """H200 seed capture: bf16 [1024,1024] / a Python number (recorded as a 0-dim double).
    Read 2·1024² + 8, write 2·1024² (bf16, not fp64): 4,194,312 bytes (was 10,485,768)."""
    r = row(ROOT / "captures/bundles/seed_graph", "aten::div", "[[1024, 1024], []]")
    assert r["bytes"] == 2 * 1024 * 1024 + 8 + 2 * 1024 * 1024
    assert r["dtype"] == "bf16"
    r = row(PEERS / "hta/negative_queue_length_values_check_rank0.json.gz", "aten::sub", "[[], [1, 4096], []]")
    assert r["bytes"] == 8 + 4 * 4096 + 4 * 4096 and r["dtype"] == "fp32"      # double scalar − fp32 tensor


def test_out_tensor_is_written_not_read():
    """HTA peer: mul(a [512] fp32, 0-dim double, out=[512] fp32): 512·4 + 8 read, 512·4 written."""
    path = PEERS / "hta/trace_diff_control_control.json.gz"
    assert row(path, "aten::mul", "[[512], [], [512]]")["bytes"] == 512 * 4 + 8 + 512 * 4
    r = row(path, "aten::nan_to_num", "[[1024, 64], [], [], [], [1024, 64]]")   # nan_to_num(x, out=y)
    assert r["bytes"] == 2 * 1024 * 64 * 4


def test_cast_writes_the_dtype_it_converts_to():
    """MTIA peer: aten::to(int64 [10901], dtype=3 (int32)): 10901·8 read + 10901·4 written."""
    events = orjson.loads(gzip.open(PEERS / "hta/mtia_inference_trace_mtia_inference_rank_0.json.gz").read())
    a = next(e["args"] for e in events["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::to"
             and e["args"]["Input Dims"] == [[10901], [], [], [], []])     # a CPU op there: no device row carries it
    cost = cost_of(OpCall("aten::to", a["Input Dims"], a["Input type"], concrete=a["Concrete Inputs"]))
    assert cost.bytes == 10901 * 8 + 10901 * 4 == 130_812


def test_host_copy_keeps_its_trace_byte_count():
    """HTA peer (A100, PCIe Gen4 32 GB/s per direction): an HtoD copy of 3,895,296 bytes keeps them in
    event_bytes, moves them once over PCIe (bytes = event_bytes, floor 3,895,296 / 32 GB/s)."""
    df = kernels(str(PEERS / "hta/trace_diff_control_control.json.gz"))
    htod = df[df["name"].str.startswith("Memcpy HtoD")]
    assert htod["event_bytes"].iloc[0] == 3_895_296
    assert (htod["bytes"] == htod["event_bytes"]).all() and set(htod["compute_unit"]) == {"pcie"}
    assert htod["floor_us"].iloc[0] == pytest.approx(3_895_296 / 32e3)
    doc = orjson.loads(to_json(analyze_path(PEERS / "hta/trace_diff_control_control.json.gz")))
    first = next(k for k in doc["kernels"] if k["name"].startswith("Memcpy HtoD"))
    assert first["event_bytes"] == 3_895_296 and first["bytes"] == 3_895_296 and first["bound"] == "link"


def test_compute_unit_is_a_column_not_text():
    df = kernels(str(H200 / "block_eager.json.gz"))
    assert set(df.loc[df["op"] == "aten::addmm", "compute_unit"]) == {"matrix"}
    assert set(df.loc[df["op"] == "aten::gelu", "compute_unit"]) == {"vector"}


@pytest.mark.parametrize("path", [H200 / "block_eager.json.gz", H200 / "block_compile.json.gz",
                                  PEERS / "hta/trace_diff_control_control.json.gz",
                                  PEERS / "tracelens/h100__Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
                                  ROOT / "captures/mlx/seed_compile_bf16_b128"])
def test_schema_holds_and_per_step_fused_ops_are_one_number(path):
    trace = analyze_path(path)[0]
    assert list(trace.kernels.columns) == KERNEL_COLUMNS
    validate(trace.kernels)
    doc = explain_dict(trace)
    assert [s["fused_ops"] for s in doc["steps"]] == \
        [p["fused_ops"] for p in doc["summary"]["fusion_per_step"]]


def test_schema_rejects_undeclared_and_mistyped_columns():
    df = kernels(str(H200 / "block_eager.json.gz")).copy()
    with pytest.raises(SchemaError, match="undeclared"):
        validate(df.assign(_unit="matrix"))
    with pytest.raises(SchemaError, match="'flops'"):
        validate(df.assign(flops="many"))


def test_eager_block_addmm_and_gelu_from_their_records():
    """H200 eager transformer block, bf16: addmm(bias[4096], x[2048,1024], W[1024,4096]) reads
    2·(4096 + 2048·1024 + 1024·4096) and writes 2·2048·4096 bytes; 2·2048·4096·1024 FLOPs + 2048·4096
    bias adds (TraceLens counts them too). gelu on
    [4,512,4096] reads and writes 2·8,388,608 bytes."""
    r = row(H200 / "block_eager.json.gz", "aten::addmm", "[[4096], [2048, 1024], [1024, 4096], [], []]")
    assert r["flops"] == 2 * 2048 * 4096 * 1024 + 2048 * 4096
    assert r["bytes"] == 2 * (4096 + 2048 * 1024 + 1024 * 4096) + 2 * 2048 * 4096
    assert r["fused_ops"] == ["mm", "add"]
    g = row(H200 / "block_eager.json.gz", "aten::gelu", "[[4, 512, 4096], []]")
    assert g["bytes"] == 2 * 2 * 4 * 512 * 4096


def test_no_module_outside_ops_keeps_op_name_lists():
    """Op names live in tracekit/ops: no other module spells a list of aten ops."""
    pattern = re.compile(r'"(?:aten::)?(?:addmm|baddbmm|native_layer_norm|clamp_min|_softmax)"')
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "tracekit").rglob("*.py")
                 if "ops" not in p.relative_to(ROOT / "tracekit").parts[:1] and pattern.search(p.read_text())]
    assert offenders == []


def test_cat_io_takes_its_dtype_from_the_kernel_name():
    """Kineto records cat's TensorList without a dtype; ATen's cat kernel names the element size
    (OpaqueType<2>): the dataflow's io then has cat's output, 2 · 1·16·1·64 elements of 2 bytes.
    (Synthetic call in the profiler's format, shapes of the eager Llama decode's RoPE cat.)"""
    from tracekit.fusion.nodes import node_io
    kernel = "void at::native::CatArrayBatchedCopy<at::native::OpaqueType<2u>, unsigned int, 4, 64, 64>"
    io = node_io("aten::cat", [[[1, 16, 1, 64], [1, 16, 1, 64]], []], ["TensorList", "Scalar"], kernel=kernel)
    assert [t.nbytes for t in io.writes] == [2 * 16 * 64 * 2]
    assert node_io("aten::cat", [[[1, 16, 1, 64]], []], ["TensorList", "Scalar"]).writes is None


def test_a_list_of_dtypes_from_the_execution_trace_is_not_a_tensor():
    """Synthetic: the ET fills a TensorList argument's types with a list (per tensor); tensor(i) of that
    argument is None, tensor_list(i) reads it (a c10d op's list crashed explain with a TypeError)."""
    call = OpCall("c10d::allreduce_", [[[4, 4], [8]], []], [["fp32", "fp32"], "Scalar"])
    assert call.tensor(0) is None and call.tensors() == []
    assert [t.nbytes for t in call.tensor_list(0)] == [64, 32]
