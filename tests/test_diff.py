"""tracekit diff on a real cross-device pair (HTA's A100 control vs V100 test) and the H200 seed captures."""

from __future__ import annotations

import json

import pytest

from tracekit.gate.baseline import DEFAULT_TOLERANCE, load_side
from tracekit.gate.diff import compare

from conftest import H200, PEERS, run_cli

CONTROL = PEERS / "hta/trace_diff_control_control.json.gz"      # A100
TEST = PEERS / "hta/trace_diff_test_test.json.gz"               # V100, same workload
EAGER1 = H200 / "seed_eager_b1.json.gz"
AUTO1 = H200 / "seed_max-autotune-no-cudagraphs_b1.json.gz"


@pytest.fixture(scope="module")
def peer_diff() -> dict:
    return compare(load_side(CONTROL), load_side(TEST), dict(DEFAULT_TOLERANCE), allow_device_mismatch=True)


def test_peer_pair_steps_and_kernels_per_step(peer_diff):
    a, b = peer_diff["a"], peer_diff["b"]
    assert (a["device"], b["device"]) == ("NVIDIA A100-PG509-200", "Tesla V100-SXM2-16GB")
    assert a["kernels_per_step"] == [1575] * 6
    # 614 V100 kernels have no launch event (launched before profiling began): outside every step
    assert b["kernels_per_step"] == [2503] * 6
    k = peer_diff["per_step"]["kernels"]
    assert (k["a"], k["b"], k["delta"]) == (1575, 2503, 928)


def test_peer_pair_by_category(peer_diff):
    cats = {c["category"]: (c["kernels_a"], c["kernels_b"]) for c in peer_diff["by_category"]}
    assert cats["memcpy"] == (38, 803)
    assert cats["gemm"] == (393, 459)                 # fbgemm_gpu kernels are not GEMMs (classify)
    assert cats["communication"] == (10, 10) and cats["norm"] == (81, 81)


def test_peer_pair_kernels_matched_by_name_and_by_op(peer_diff):
    k = peer_diff["kernels"]
    assert (len(k["added"]), len(k["removed"]), len(k["changed"]), k["unchanged"]) == (20, 52, 93, 15)
    added = {r["name"] for r in k["added"]}
    assert "volta_sgemm_128x32_nt" in added
    assert not any(r["name"].startswith("volta") for r in k["removed"])
    dtod = next(r for r in k["changed"] if r["name"] == "Memcpy DtoD (Device -> Device)")
    assert dtod["count_a"] == 3 and dtod["count_b"] == 768
    addmm = next(r for r in k["matched_by_op"] if r["op"] == "aten::addmm")   # cutlass (A100) vs volta (V100)
    assert (len(addmm["names_a"]), len(addmm["names_b"]), addmm["count_a"], addmm["count_b"]) == (11, 4, 97, 92)


def test_peer_pair_fused_ops_and_regressions(peer_diff):
    # B (V100) runs more kernels per step than A: the lost fusion is a regression, not a re-fusion
    assert peer_diff["fused_ops"]["lost"] == [{"ops": "add+mm", "a": 125.0, "b": 60.0, "refused": False}]
    assert {r["rule"] for r in peer_diff["regressions"]} == {
        "baseline.kernels_per_step", "baseline.fused_ops", "baseline.kernel_us_per_step"}
    t = peer_diff["per_step"]["kernel_us"]
    assert t["a"] == pytest.approx(86404.5) and t["b"] == pytest.approx(150992.5)


def test_peer_pair_cli_exit_codes():
    assert run_cli("diff", CONTROL, TEST).returncode == 2          # A100 vs V100: refused unless allowed
    proc = run_cli("diff", CONTROL, TEST, "--format", "json", "--allow-device-mismatch")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["per_step"]["kernels"]["b"] == 2503
    assert run_cli("diff", CONTROL, TEST, "--fail-on-regression", "--allow-device-mismatch").returncode == 1
    back = run_cli("diff", TEST, CONTROL, "--fail-on-regression", "--allow-device-mismatch")   # V100 → A100
    assert back.returncode == 0 and "gained add+mm: 60 → 125 kernels/step" in back.stdout
    assert "regressions: none" in back.stdout


def test_skip_steps_drops_the_warm_up_step():
    side = load_side(TEST, skip_steps=1)
    assert side.steps["kernels"].tolist() == [2503] * 5 and len(side.in_steps) == 5 * 2503


def test_seed_one_kernel_to_eager():
    proc = run_cli("diff", AUTO1, EAGER1, "--format", "json")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert (doc["per_step"]["kernels"]["a"], doc["per_step"]["kernels"]["b"]) == (1, 2)
    k = doc["kernels"]
    assert [r["name"] for r in k["removed"]] == ["triton_tem_fused_addmm_relu_t_0"]
    assert k["added"][0]["name"] == "nvjet_sm90_tst_8x64_64x16_2x1_v_bz_bias_TNN"
    assert k["added"][1]["op"] == "aten::clamp_min" and len(k["added"]) == 2
    assert [f["ops"] for f in doc["fused_ops"]["lost"]] == ["add+mm+relu"]
    assert [f["ops"] for f in doc["fused_ops"]["kept"]] == ["add+mm"]       # the bias stays in cuBLAS's epilogue
    assert {r["rule"] for r in doc["regressions"]} == {
        "baseline.kernels_per_step", "baseline.fused_ops", "baseline.kernel_us_per_step"}
    assert run_cli("diff", AUTO1, EAGER1, "--fail-on-regression").returncode == 1
    assert run_cli("diff", EAGER1, AUTO1, "--fail-on-regression").returncode == 0


def test_markdown_and_text():
    md = run_cli("diff", AUTO1, EAGER1, "--format", "markdown")
    assert md.returncode == 0
    assert md.stdout.startswith("### tracekit diff: ❌ 3 regression(s)")
    assert "| kernels | 1 | 2 | +1 (+100.0%) |" in md.stdout
    assert "- lost `add+mm+relu`: 1 → 0 kernels/step doing it" in md.stdout
    assert md.stdout.count("<details>") == md.stdout.count("</details>") == 1
    text = run_cli("diff", AUTO1, EAGER1).stdout
    assert "  - triton_tem_fused_addmm_relu_t_0 (gemm): 1/step, 5.61 µs/step" in text


def test_capture_against_itself_has_no_difference():
    proc = run_cli("diff", EAGER1, EAGER1, "--fail-on-regression", "--format", "json")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    k = doc["kernels"]
    assert (k["added"], k["removed"], k["changed"], k["unchanged"]) == ([], [], [], 2)
    assert doc["regressions"] == [] and doc["fused_ops"]["lost"] == doc["fused_ops"]["gained"] == []


def test_explain_json_side_gives_the_same_diff(tmp_path):
    base = tmp_path / "auto1.json"
    base.write_text(run_cli("explain", AUTO1, "--format", "json").stdout)
    tol = dict(DEFAULT_TOLERANCE)
    from_trace = compare(load_side(AUTO1), load_side(EAGER1), tol)
    from_json = compare(load_side(base), load_side(EAGER1), tol)
    for key in ("per_step", "by_category", "kernels", "fused_ops", "regressions"):
        assert from_json[key] == from_trace[key], key
    assert from_json["a"]["source"] == "explain-json"


def test_unreadable_input_exits_2(tmp_path):
    truncated = tmp_path / "truncated.json.gz"       # synthetic: first 2000 bytes of a real capture
    truncated.write_bytes(EAGER1.read_bytes()[:2000])
    for args in [(truncated, AUTO1), (AUTO1, truncated), (AUTO1, tmp_path / "missing.json"),
                 (AUTO1, EAGER1, "--tolerance", "x=1")]:
        proc = run_cli("diff", *args)
        assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.startswith("tracekit: ")


def _refused_pair(tmp_path, keep_add: bool):
    """Synthetic B from the real H200 seed eager explain JSON: the GEMM no longer adds the bias
    (fused ops mm) and the relu kernel now does add + relu, as a compiled run that moves the bias into
    the pointwise kernel would; or (keep_add False) the bias add is gone altogether."""
    proc = run_cli("explain", H200 / "seed_eager_b128.json.gz", "--format", "json")
    a = tmp_path / "a.json"
    a.write_text(proc.stdout)
    doc = json.loads(proc.stdout)
    for k in doc["kernels"]:
        if k["fused_ops"] == ["mm", "add"]:
            k["fused_ops"] = ["mm"]
        elif k["fused_ops"] == ["relu"] and keep_add:
            k["fused_ops"] = ["add", "relu"]
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc))
    return a, b


def test_a_run_fused_differently_is_not_a_lost_fusion(tmp_path):
    a, b = _refused_pair(tmp_path, keep_add=True)
    proc = run_cli("diff", a, b, "--fail-on-regression", "--format", "json")
    assert proc.returncode == 0, proc.stdout
    doc = json.loads(proc.stdout)
    [lost] = doc["fused_ops"]["lost"]
    assert lost["ops"] == "add+mm" and lost["refused"] is True and doc["regressions"] == []
    assert "fused differently on B" in run_cli("diff", a, b).stdout


def test_a_fusion_whose_op_vanished_is_still_a_regression(tmp_path):
    a, b = _refused_pair(tmp_path, keep_add=False)
    proc = run_cli("diff", a, b, "--fail-on-regression", "--format", "json")
    assert proc.returncode == 1
    assert [r["rule"] for r in json.loads(proc.stdout)["regressions"]] == ["baseline.fused_ops"]
