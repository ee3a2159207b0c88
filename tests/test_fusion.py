"""Fused ops per kernel, kernels per step, fusion headroom and the one-kernel floor (issue 4).

Pinned on the real H200 seed/block captures (captures/h200) and on the peer traces with Triton
kernels. Seed: Y = relu(F.linear(X, W, b)), X [B,1024], W [1024,1024], b [1024], bf16.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import H200, PEERS, explain_json, run_cli
from tracekit.analyze import analyze_path, bundle_dir_of
from tracekit.fusion.nodes import signature_roles
from tracekit.fusion.names import KernelSources, fill_fused_ops, ops_from_source
from tracekit.ops.inductor import ops_from_name as ops_from_inductor_name

BF16 = 2


def seed(mode: str, b: int) -> Path:
    return H200 / f"seed_{mode}_b{b}.json.gz"


def step1(doc: dict) -> list[dict]:
    return [k for k in doc["kernels"] if k["step"] == 1]


def one_kernel_bytes(b: int) -> int:
    """Each outside tensor read once (X, W, b) + the final Y written once."""
    return BF16 * (b * 1024 + 1024 * 1024 + 1024 + b * 1024)


@pytest.mark.parametrize("name, ops", [
    ("triton_poi_fused_relu_0", ["relu"]),
    ("triton_tem_fused_addmm_relu_t_0", ["addmm", "relu"]),
    ("triton_per_fused_add_native_layer_norm_view_1", ["add", "native_layer_norm"]),
    ("triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1", ["add", "mean", "mul", "pow", "rsqrt"]),
    ("triton_poi_fused__to_copy_add_12", ["_to_copy", "add"]),
    ("triton_poi_fused_gelu_view_2", ["gelu"]),
    ("triton__0d1d2d3d", None),
    ("triton_", None),
])
def test_inductor_names(name, ops):
    assert ops_from_inductor_name(name) == ops


@pytest.mark.parametrize("mode", ["eager", "compile"])
@pytest.mark.parametrize("b", [1, 128])
def test_seed_two_kernels_and_headroom(mode, b):
    doc = explain_json(seed(mode, b))
    kernels = step1(doc)
    assert [k["fused_ops"] for k in kernels] == [["mm", "add"], ["relu"]]
    assert "_bias_" in kernels[0]["name"] and kernels[0]["op"] == "aten::addmm"
    s = doc["summary"]
    assert s["kernels_per_step"] == [2] * 5
    # the [B,1024] bf16 intermediate: written by the GEMM, read by relu
    assert s["fusion_headroom_bytes"] == [2 * (BF16 * b * 1024)] * 5
    per = s["fusion_per_step"][1]
    assert per["fused_bytes"] == one_kernel_bytes(b)
    assert per["fused_flops"] == 2 * b * 1024 * 1024 + 2 * b * 1024  # GEMM, its bias adds, one FLOP per relu element
    assert per["split_bytes"] - per["fused_bytes"] == per["headroom_bytes"]
    assert per["aten_ops_per_kernel"] == 1.5 and per["intermediates"] == 1
    assert per["by_category"]["gemm"] == {"kernels": 1, "fused_ops": 2}
    # X has the intermediate's shape: the rule says the link is by launch order, not certain
    assert "1 of 1 intermediates ambiguous" in s["fusion_rule"][1]
    assert per["headroom_unambiguous_bytes"] == 0
    floor = s["fused_floor_us_per_step"][1]
    assert floor == pytest.approx(one_kernel_bytes(b) / (4.8e12) * 1e6, rel=1e-6) if b == 128 else floor > 0
    assert floor < s["floor_us_per_step"][1]


def test_compile_relu_roles_from_kept_source():
    doc = explain_json(seed("compile", 128))
    relu = step1(doc)[1]
    assert relu["name"] == "triton_poi_fused_relu_0"
    assert relu["bytes"] == 2 * BF16 * 128 * 1024          # in_out_ptr0: read and written
    assert "pointer roles from kernel source" in relu["cost_note"]
    src = (H200 / "seed_compile_b128.kernels").glob("*.py")
    assert signature_roles(next(src).read_text(), "triton_poi_fused_relu_0") == ["in_out_ptr0", "xnumel", "XBLOCK"]


def test_bundle_dir_of_finds_stem_kernels_folder():
    assert bundle_dir_of(seed("compile", 1)) == H200 / "seed_compile_b1.kernels"
    assert bundle_dir_of(seed("eager", 1)) is None


def test_max_autotune_template_fuses_addmm_relu():
    doc = explain_json(seed("max-autotune", 1))
    kernels = step1(doc)
    template = [k for k in kernels if k["name"].startswith("triton_tem")]
    assert [k["fused_ops"] for k in template] == [["addmm", "relu"]]
    # CUDA graphs (max-autotune) copy the input into the graph's static buffer first
    assert [k["fused_ops"] for k in kernels if k is not template[0]] == [["_foreach_copy"]]
    assert doc["summary"]["fusion_headroom_bytes"][1] == 0
    # the replayed template has no op shapes: its FLOPs and bytes are left out, so the one-kernel floor is a
    # an estimate over the costed copy kernel, labelled as such (issue 11), not a guess
    per = doc["summary"]["fusion_per_step"][1]
    assert per["fused_floor_kind"] == "estimate" and per["kernels_uncosted"] == 1
    assert 0 < per["fused_floor_us"] <= per["split_floor_us"]
    assert "incomplete" in doc["summary"]["fusion_rule"][1]


@pytest.mark.parametrize("b", [1, 128])
def test_max_autotune_no_cudagraphs_is_the_one_kernel_floor(b):
    """The fused template is one kernel whose bytes are exactly eager's one-kernel floor."""
    doc = explain_json(seed("max-autotune-no-cudagraphs", b))
    s = doc["summary"]
    assert s["kernels_per_step"] == [1] * 5
    assert [k["fused_ops"] for k in step1(doc)] == [["addmm", "relu"]]
    per = s["fusion_per_step"][1]
    assert per["headroom_bytes"] == 0 and per["rule"] == "single kernel: nothing to fuse"
    assert per["fused_bytes"] == one_kernel_bytes(b) and per["fused_flops"] == 2 * b * 1024 * 1024 + b * 1024
    eager = explain_json(seed("eager", b))["summary"]
    assert eager["fusion_per_step"][1]["fused_bytes"] == per["fused_bytes"]
    assert eager["fused_floor_us_per_step"][1] == pytest.approx(s["fused_floor_us_per_step"][1])


def test_ops_from_output_code_comment():
    src = KernelSources(H200 / "seed_max-autotune_b1.kernels")
    wrapper = [p for p in src.folder.glob("*.py") if "async_compile.triton(" in p.read_text()]
    assert len(wrapper) == 1
    # "Original ATen: [aten.t, aten.addmm, aten.relu]": the view t is left out
    assert ops_from_source(wrapper[0].read_text(), "triton_tem_fused_addmm_relu_t_0") == ["addmm", "relu"]
    assert src.ops("triton_tem_fused_addmm_relu_t_0", None) == ["addmm", "relu"]


def test_block_compile_fusions():
    doc = explain_json(H200 / "block_compile.json.gz")
    ops = {k["name"]: k["fused_ops"] for k in step1(doc)}
    assert ops["triton_per_fused_add_native_layer_norm_view_1"] == ["add", "native_layer_norm"]
    assert ops["triton_poi_fused_gelu_view_2"] == ["gelu"]
    attention = [k for k in step1(doc) if k["category"] == "attention"]
    assert [k["fused_ops"] for k in attention] == [["mm", "softmax", "mm"]]
    eager = explain_json(H200 / "block_eager.json.gz")
    # Inductor fuses the residual add into the second layer norm: one kernel fewer per step
    assert doc["summary"]["kernels_per_step"][1] == eager["summary"]["kernels_per_step"][1] - 1 == 10
    assert doc["summary"]["fusion_headroom_bytes"][1] < eager["summary"]["fusion_headroom_bytes"][1]


def test_graph_twin_shows_where_launch_order_misleads():
    """20 independent seed calls per step: size+launch order links each call's X to the previous
    call's output, so every intermediate is marked ambiguous and none counts as certain."""
    s = explain_json(H200 / "graph_eager_twin_b128.json.gz")["summary"]
    per = s["fusion_per_step"][1]
    assert per["kernels"] == 40 and per["headroom_unambiguous_bytes"] == 0
    assert "39 of 39 intermediates ambiguous" in per["rule"]


def test_peer_torch_compile_triton():
    doc = explain_json(PEERS / "tracelens/torch_compile_triton__trace.json.gz")
    ops = [k["fused_ops"] for k in doc["kernels"]]
    assert ops.count(["mm"]) == 7              # Tensile "Bias" names a capability; aten::mm adds none
    assert ["mm", "softmax", "mm"] in ops
    assert ops[0] == ["add", "mean", "mul", "pow", "rsqrt"] and ops[-1] == ["add"]
    per = doc["summary"]["fusion_per_step"][0]
    assert per["fused_ops"] == 23 and per["kernels"] == 12
    assert "incomplete: 4 of 12 kernels" in per["rule"]   # no kernel sources in this trace
    assert per["fused_floor_kind"] == "estimate" and per["fused_floor_us"] >= per["fused_compute_us"] > 0


def test_peer_triton_example_single_kernel():
    s = explain_json(PEERS / "hta/triton_example_triton_example.json.gz")["summary"]
    assert s["fusion_per_step"][0]["by_category"] == {"triton": {"kernels": 1, "fused_ops": 3}}
    assert s["fusion_headroom_bytes"] == [0.0]
    assert s["fusion_rule"] == ["single kernel: nothing to fuse"]


def test_peer_old_triton_names_are_unknown():
    trace = analyze_path(PEERS / "hta/negative_queue_length_values_check_rank0.json.gz")[0]
    old = trace.kernels[trace.kernels["name"].str.startswith("triton__")]
    assert len(old) == 81 and all(ops == ["unknown"] for ops in old["fused_ops"])
    fb = trace.kernels[trace.kernels["name"].str.contains("fbgemm_gpu::permute_2D")]
    assert all(ops == ["permute_2d_sparse_data"] for ops in fb["fused_ops"])   # fbgemm is not a GEMM


def test_existing_fused_ops_are_kept():
    trace = analyze_path(seed("eager", 128))[0]
    df = trace.kernels.copy()
    df["fused_ops"] = [["compiled", "mul"]] + [None] * (len(df) - 1)
    fill_fused_ops(df)
    assert df["fused_ops"].iloc[0] == ["compiled", "mul"]
    assert df["fused_ops"].iloc[1] == ["relu"]            # aten::clamp_min(x, 0) is eager relu


def test_fusion_view_shows_chain_and_headroom():
    proc = run_cli("explain", seed("eager", 128), "--fusion")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "kernel chain, ProfilerStep#1" in out
    assert "128x1024 bf16 → #1" in out and "mm+add" in out
    assert "headroom 524.29kB" in out
    assert "one-kernel floor: 2.62MB" in out


@pytest.mark.parametrize("path", [Path(__file__).resolve().parents[1] / "bench" / "traces" /
                                  "big_train_24layers_6steps.json.gz",        # 6 steps × 1,469 kernels, H200
                                  H200 / "seed_eager_b128.json.gz",           # 5 steps, H200
                                  H200 / "models" / "gpt_train_eager",         # a bundle with its ET: exact steps
                                  Path(__file__).resolve().parents[1] / "bench" / "traces" /
                                  "cpu_small_model_2000steps.json.gz"])       # 2,000 steps, CPU only
def test_steps_alike_share_one_dataflow_and_give_what_each_gave(path, monkeypatch):
    """The fusion summary works out the dataflow once per distinct step content (issue 26: repeated
    training steps): the same summary as working out every step, and fewer dataflows than steps where
    steps repeat."""
    from tracekit.fusion import dataflow

    trace = analyze_path(path, et=None)[0]
    calls = []
    real = dataflow.step_fusion
    monkeypatch.setattr(dataflow, "step_fusion", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    shared = dataflow.fusion_summary(trace)
    every = []
    monkeypatch.setattr(dataflow, "content_key", lambda pairs: object())        # no two steps alike
    monkeypatch.setattr(dataflow, "step_fusion", lambda *a, **k: every.append(a[1]) or real(*a, **k))
    alone = dataflow.fusion_summary(trace)
    assert shared == alone or repr(shared) == repr(alone)          # NaN fields compare by repr
    assert len(every) == len(trace.steps) >= 3
    if "gpt_train_eager" not in str(path):
        assert len(calls) < len(every)


MODULES_GPT = H200 / "modules" / "gpt_train" / "trace.json.gz"


def test_chain_labels_an_op_call_by_the_kernel_that_carries_its_floor(tmp_path):
    """Issue 24 ("Done when"): the user-profiled GPT training step (captures/h200/modules/gpt_train, no ET).
    Its qkv GEMM op call is a memset (cuBLAS's split-K zeroing) and the GEMM: the chain named it
    'Memset (Device) (+1 kernels)' with 'fill+mm'; now it is named by the GEMM, whose row carries the
    floor, with the GEMM's own ops. A layer-norm backward call runs two kernels of one op: it read
    'native_layer_norm_backward+native_layer_norm_backward', a fusion it is not."""
    proc = run_cli("explain", MODULES_GPT, "--fusion", "--width", "160")
    assert proc.returncode == 0, proc.stderr
    chain = proc.stdout.split("kernel chain, ")[1]
    assert "Memset" not in chain and "fill+mm" not in chain
    assert "nvjet_sm90_tst_192x192_64x4_1x2_h_bz_coopB_TNN (+1 kernels)" in chain
    assert "native_layer_norm_backward+native_layer_norm_backward" not in chain
    trace = analyze_path(MODULES_GPT)[0]
    from tracekit.fusion.dataflow import step_fusion
    nodes = step_fusion(trace, trace.steps[0].index)["nodes"]
    gemm = next(n for n in nodes if n.op == "aten::mm" and len(n.names) == 2)
    assert gemm.names[0] == "Memset (Device)" and gemm.fused_ops == ["fill", "mm"]      # the call as recorded
    assert gemm.shown() == (gemm.names[1], ["mm"])
    ln = next(n for n in nodes if n.op == "aten::native_layer_norm_backward" and len(n.names) == 2)
    assert ln.shown()[1] == ["native_layer_norm_backward"]
    page = tmp_path / "r.html"                                    # the HTML report's chain says the same
    assert run_cli("explain", MODULES_GPT, "--fusion", "--html", page).returncode == 0
    html = page.read_text()
    assert "nvjet_sm90_tst_192x192_64x4_1x2_h_bz_coopB_TNN (+1 kernels)" in html
    assert "Memset (Device) (+1 kernels)" not in html and "fill+mm" not in html
