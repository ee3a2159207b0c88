"""explain --devices (floors of one workload on several devices) and compare (one workload, two captures).

The seed example, relu(linear(x)), bf16, in = out = 1024 with bias, derived by hand:
  FLOPs (the matmul) 2·B·1024² ; one-kernel bytes x 2·B·1024 + W 2·1024² + b 2·1024 + out 2·B·1024
  B = 128: 268,435,456 FLOPs, 2,623,488 B ; B = 1: 2,097,152 FLOPs, 2,103,296 B
RTX 5090 (datasheet: bf16 with fp32 accumulate 209.5 TFLOP/s, 1792 GB/s); M5 Pro (bf16 31.5 TFLOP/s
measured, 307 GB/s datasheet):
  B = 128 one kernel: 5090 max(1.2813, 1.4640) = 1.464 µs ; M5 Pro max(8.5218, 8.5456) = 8.546 µs
  B = 1   one kernel: 5090 2,103,296 / 1792e3 = 1.1737 µs ; M5 Pro 2,103,296 / 307e3 = 6.8511 µs
  2 kernels (addmm, relu): 1.4640 + 2·262,144 / 1792e3 = 1.4640 + 0.2926 = 1.7566 µs
  3 kernels (mm, bias add, relu): (x + W + out) 2,621,440 / 1792e3 = 1.4629 ; add (out + b + out) 526,336 / 1792e3
  = 0.2937 ; relu (out + the 0 + out) 524,290 / 1792e3 = 0.2926 ; sum 2.0491 µs
Which captures hold 1, 2 and 3 kernels per step: captures/h200/README.md (max-autotune-no-cudagraphs: 1, eager: 2)
and tests/test_mlx.py (the lazy MLX graph: Matmul, Add, Maximum).
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import H200, ROOT, run_cli

from tracekit.cost.devices import builtin_specs, spec_by_id
from tracekit.cost.multi import compute_rate, parse_devices, peak_key, ridge, roof_kind
from tracekit.errors import TracekitError

MLX = ROOT / "captures" / "mlx"
LAZY = MLX / "seed_lazy_bf16_b128" / "graphs" / "001.dot"
COMPILED = MLX / "seed_compile_bf16_b128" / "graphs" / "001.dot"
EAGER_BUNDLE = ROOT / "captures" / "bundles" / "seed_eager"


def devices_doc(path, devices="rtx5090,apple-m5-pro", *extra) -> dict:
    out = run_cli("explain", path, "--devices", devices, "--format", "json", *extra)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def step_on(doc: dict, spec: str, step: int = 0) -> dict:
    return next(d for d in doc["devices"]["steps"][step]["devices"] if d["spec"] == spec)


def test_seed_b128_floors_table_on_rtx5090_and_m5_pro():
    doc = devices_doc(H200 / "seed_eager_b128.json.gz")
    assert [s["id"] for s in doc["devices"]["specs"]] == ["h200", "rtx5090", "apple-m5-pro"]   # own first
    step = doc["devices"]["steps"][0]
    assert step["kernels"] == 2 and step["fused_ops"] == 3          # addmm (mm + add) and relu
    assert step["one_kernel_bytes"] == 2_623_488
    r, m = step_on(doc, "rtx5090"), step_on(doc, "apple-m5-pro")
    assert r["one_kernel_floor_us"] == pytest.approx(1.464, abs=5e-4)
    assert r["memory_us"] == pytest.approx(1.464, abs=5e-4)
    # compute: the addmm's 2·128·1024² + 128·1024 (bias adds) = 268,566,528 FLOPs at 209.5 TFLOP/s = 1.28194 µs
    # + relu's 131,072 FLOPs at the fp32 vector rate 104.8 TFLOP/s (0.00125 µs)
    assert r["compute_us"] == pytest.approx(268_566_528 / 209.5e6 + 0.00125, abs=5e-4)
    assert r["bound"] == "memory" and r["ridge"] == pytest.approx(209.5e12 / 1792e9, rel=1e-6)   # 116.9 FLOP/B
    assert r["floor_sum_us"] == pytest.approx(1.7566, abs=5e-4)      # the 2-kernel floor
    assert m["one_kernel_floor_us"] == pytest.approx(8.5456, abs=5e-4)
    # no fp32 rate on the M5 Pro: relu's 131,072 FLOPs at the bf16 stand-in 31.5 (docs/devices.md) add 0.00416 µs
    assert m["compute_us"] == pytest.approx(268_566_528 / 31.5e6 + 131_072 / 31.5e6, abs=5e-5)   # addmm + relu
    assert m["ridge"] == pytest.approx(31.5e12 / 307e9, rel=1e-6)    # 102.6 FLOP/B
    assert (r["compute_roof"], r["memory_roof"]) == ("datasheet", "datasheet")
    assert (m["compute_roof"], m["memory_roof"]) == ("measured", "datasheet")
    # measured ÷ floor only on the trace's own device (the H200: 2,623,488 / 4800e3 = 0.54656 µs one-kernel)
    own = step_on(doc, "h200")
    assert own["trace_device"] and own["one_kernel_floor_us"] == pytest.approx(0.54656, abs=1e-6)
    assert own["measured_over_one_kernel"] == pytest.approx(doc["steps"][0]["costed_us"] / 0.54656, rel=1e-9)
    assert r["measured_over_one_kernel"] is None and m["measured_over_floor_sum"] is None


def test_seed_b1_one_kernel_floors():
    doc = devices_doc(H200 / "seed_eager_b1.json.gz")
    assert doc["devices"]["steps"][0]["one_kernel_bytes"] == 2_103_296
    assert step_on(doc, "rtx5090")["one_kernel_floor_us"] == pytest.approx(1.1737, abs=5e-4)
    assert step_on(doc, "apple-m5-pro")["one_kernel_floor_us"] == pytest.approx(6.8511, abs=5e-4)


@pytest.mark.parametrize("path, kernels, floor_sum", [
    (H200 / "seed_max-autotune-no-cudagraphs_b128.json.gz", 1, 1.4640),     # one fused template kernel
    (H200 / "seed_eager_b128.json.gz", 2, 1.7566),                          # nvjet addmm + relu
    (LAZY, 3, 2.0491)])                                                      # MLX lazy: Matmul, Add, Maximum
def test_one_two_and_three_kernel_floors_on_rtx5090(path, kernels, floor_sum):
    doc = devices_doc(path, "rtx5090")
    step = doc["devices"]["steps"][0]
    assert step["kernels"] == kernels
    r = step_on(doc, "rtx5090")
    assert r["floor_sum_us"] == pytest.approx(floor_sum, abs=5e-4)
    assert r["one_kernel_floor_us"] == pytest.approx(1.464, abs=5e-4)      # the same work in one kernel


def test_identical_steps_are_one_group_and_kernels_carry_floors():
    doc = devices_doc(H200 / "seed_eager_b128.json.gz")
    groups = doc["devices"]["step_groups"]
    assert [g["steps"] for g in groups] == [[0, 1, 2, 3, 4]]
    gemm = doc["devices"]["kernels"][0]
    assert gemm["op"] == "aten::addmm" and gemm["count_per_step"] == 1
    r = next(d for d in gemm["devices"] if d["spec"] == "rtx5090")
    assert r["floor_us"] == pytest.approx(1.4640, abs=5e-4)
    assert r["compute_us"] == pytest.approx(268_566_528 / 209.5e6, abs=5e-4)      # 2·128·1024² + 128·1024 bias adds
    relu = next(k for k in doc["devices"]["kernels"] if k["op"] == "aten::clamp_min")
    m = next(d for d in relu["devices"] if d["spec"] == "apple-m5-pro")
    assert m["floor_us"] == pytest.approx(524_288 / 307e3, rel=1e-9)       # 1.7078 µs, memory only
    # Apple publishes no fp32 rate: the relu's compute term stands in the bf16 rate, which bounds it
    assert (m["peak_key"], m["peak_stand_in"], m["compute_roof"]) == ("bf16", True, "measured")
    assert m["compute_us"] == pytest.approx(131_072 / 31.5e6, rel=1e-9)


def test_fp16_uses_the_fp32_accumulate_rate(tmp_path):
    """A GeForce card runs fp16 with fp32 accumulation at half its fp16-accumulate rate: a real fp16 MLX
    matmul (PyTorch and MLX accumulate in fp32) gets 209.5 TFLOP/s on the 5090, not 419."""
    pytest.importorskip("mlx.core")
    from tracekit.capture.mlx import capture_mlx_script

    out = tmp_path / "fp16"
    assert capture_mlx_script(str(ROOT / "tests" / "scripts" / "mlx_seed.py"),
                              ["--mode", "lazy", "--dtype", "fp16", "--batch", "128"], out, quiet=True) == 0
    doc = devices_doc(out / "graphs" / "001.dot", "rtx5090")
    mm = doc["devices"]["kernels"][0]
    assert mm["name"] == "Matmul" and mm["dtype"] == "fp16"
    r = next(d for d in mm["devices"] if d["spec"] == "rtx5090")
    assert (r["peak_key"], r["peak_tflops"]) == ("fp16", 209.5)
    assert r["compute_us"] == pytest.approx(268_435_456 / 209.5e6, rel=1e-9)    # 1.2813 µs, not 0.6407


def test_fp16_accumulate_rate_only_when_asked():
    """Synthetic: the peak key a kernel runs at, for each builtin spec, agrees with the rate the roofline
    uses; fp16 with fp16 accumulation gets the 5090's 419, and falls back to the one fp16 rate on a datasheet
    part that quotes one."""
    r, h = spec_by_id("rtx5090"), spec_by_id("h200")
    assert compute_rate(r, "fp16", "matrix") == 209.5 and compute_rate(r, "fp16_fp16acc", "matrix") == 419.0
    assert peak_key(r, "fp16_fp16acc", "matrix") == "fp16_fp16acc" and peak_key(h, "fp16_fp16acc", "matrix") == "fp16"
    assert compute_rate(h, "fp16_fp16acc", "matrix") == 989.5
    assert ridge(r, "bf16", "matrix") == pytest.approx(116.908, rel=1e-5)
    for spec in builtin_specs():
        for dtype in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp16_fp16acc", "fp8", "int8"):
            for unit in ("matrix", "vector"):
                key = peak_key(spec, dtype, unit)
                rate = compute_rate(spec, dtype, unit)
                assert (spec.peak_tflops[key] if key else None) == rate, (spec.id, dtype, unit)


def test_missing_fp16_rate_is_not_free_on_the_m5_pro():
    """Issue 24.1: BERT-base fp16 inference (batch 32 x 128, a real H200 capture) on the M5 Pro, whose spec has
    only a bf16 rate. By hand, per forward: 12 layers x 2 x 4096 tokens x (4·768² + 2·768·3072) = 695.78 GFLOP
    in the linears, 12 x 2 x (2·32·12·128²·64) = 19.33 GFLOP in attention, pooler 2·32·768² = 0.04 GFLOP:
    715.15 GFLOP at 31.5 TFLOP/s = 22.70 ms. The compute floor was 0 and the one-kernel floor 580 µs."""
    doc = devices_doc(ROOT / "captures" / "h200" / "models2" / "bert_infer", "h200,apple-m5-pro")
    step = doc["devices"]["steps"][0]
    m = step_on(doc, "apple-m5-pro")
    assert (step["dtype"], m["peak_key"], m["peak_stand_in"]) == ("fp16", "bf16", True)
    assert m["compute_us"] >= 715.15e9 / 31.5e6 - 1                 # the matmuls alone, 22,703 µs
    assert m["compute_us"] == pytest.approx(step["flops"] / 31.5e6, rel=1e-6)   # vector work at the stand-in too
    assert m["one_kernel_floor_us"] == m["compute_us"] and m["bound"] == "compute"
    h = step_on(doc, "h200")                                          # its own fp16 rate, no stand-in
    assert (h["peak_key"], h["peak_stand_in"]) == ("fp16", False)
    # the step's one device-to-host copy has no floor on the M5 Pro (no PCIe link in its spec): partial
    assert m["one_kernel_partial"] and not h["one_kernel_partial"]
    out = run_cli("explain", ROOT / "captures" / "h200" / "models2" / "bert_infer", "--devices", "h200,apple-m5-pro")
    assert "bf16 for fp16 31.5 TFLOP/s M" in out.stdout


def test_a_rate_nothing_bounds_leaves_the_floor_out():
    """Synthetic specs: fp8 on the A100 (no fp8 rate, and no listed rate bounds fp8) is unknown; fp16 <-> bf16
    stand in for each other; fp32 and vector work take the fastest 16-bit-or-wider rate."""
    from tracekit.cost.rates import rate_for
    a100, v100, m5, cpu = (spec_by_id(i) for i in ("a100-sxm-40gb", "v100", "apple-m5-pro", "cpu"))
    assert rate_for(a100, "fp8", "matrix") == (None, None, False)
    assert rate_for(v100, "bf16", "matrix") == ("fp16", 125.0, True)
    assert rate_for(m5, "fp32", "matrix") == ("bf16", 31.5, True)
    assert rate_for(cpu, "bf16", "matrix") == (None, None, False)     # fp32 does not bound an AMX bf16 matmul
    assert rate_for(cpu, "bf16", "vector") == ("fp32", 0.155, False)
    assert rate_for(a100, "fp16", "vector")[0] == "fp32"


def test_roof_kinds():
    assert roof_kind(spec_by_id("apple-m5-pro"), "peak.bf16") == "measured"
    assert roof_kind(spec_by_id("apple-m5-pro"), "memory.bandwidth_gbs") == "datasheet"
    assert roof_kind(spec_by_id("h200-measured"), "memory.bandwidth_gbs") == "measured"
    assert roof_kind(spec_by_id("rtx5090"), "peak.bf16") == "datasheet"
    assert roof_kind(spec_by_id("rtx5090"), "peak.fp8") is None


@pytest.mark.parametrize("devices, says", [("rtx5090,no-such-gpu", "no-such-gpu"), ("rtx5090,,h200", "commas"),
                                           ("missing/spec.toml", "missing/spec.toml")])
def test_bad_devices_exit_2_one_line(devices, says):
    out = run_cli("explain", H200 / "seed_eager_b128.json.gz", "--devices", devices)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and says in out.stderr and "Traceback" not in out.stderr
    with pytest.raises(TracekitError):
        parse_devices(devices)


def test_spec_files_and_duplicates(tmp_path):
    spec = tmp_path / "mine.toml"
    spec.write_text((ROOT / "tracekit" / "specs" / "rtx5090.toml").read_text().replace('id = "rtx5090"',
                                                                                      'id = "my5090"'))
    assert [s.id for s in parse_devices(f"rtx5090,{spec},rtx5090")] == ["rtx5090", "my5090"]


@pytest.mark.parametrize("path", [H200 / "seed_eager_b128.json.gz", MLX / "seed_lazy_bf16_b128",
                                  H200 / "block_compile.json.gz"])
@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_formats_and_width(path, fmt):
    out = run_cli("explain", path, "--devices", "h200,rtx5090,apple-m5-pro", "--format", fmt)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    if fmt == "table":
        assert max(len(line) for line in lines) <= 80
        assert any(line.startswith("rtx5090 ") for line in lines)
    elif fmt == "markdown":
        assert any(line.startswith("| rtx5090 |") for line in lines)
    else:
        assert lines[0].startswith("graph,level,steps,name")
        assert {line.split(",")[1] for line in lines[1:]} <= {"step", "kernel"}


# ---- compare ------------------------------------------------------------------------------------------------

def compare_doc(a, b, *extra) -> dict:
    out = run_cli("compare", a, b, "--format", "json", *extra)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_compare_h200_bundle_with_mlx_lazy_graph():
    """H200 eager (nvjet addmm with the bias, relu) against MLX lazy (Matmul, Add, Maximum): names differ,
    the work matches by op class. Floors on each side's own spec: A on the H200 (0.54656 + 524,288 / 4.8e6 =
    0.65579 µs; one kernel 0.54656), B on the cpu spec (25.3 GB/s, no bf16 matrix rate and none that bounds
    it: the Matmul has no floor (issue 24.1), the Add and Maximum's bytes 526,336 + 524,290 = 1,050,626 /
    25.3e3 = 41.527 µs; one kernel 2,623,490 / 25.3e3 = 103.70, the Matmul's FLOPs left out)."""
    doc = compare_doc(EAGER_BUNDLE, LAZY)
    per = doc["per_step"]
    assert (per["kernels"]["a"], per["kernels"]["b"]) == (2, 3)
    assert (per["fused_ops"]["a"], per["fused_ops"]["b"]) == (3, 3)
    assert per["floor_us"]["a"] == pytest.approx(0.65579, abs=1e-5)
    assert per["one_kernel_floor_us"]["a"] == pytest.approx(0.54656, abs=1e-6)
    assert per["floor_us"]["b"] == pytest.approx(41.527, abs=0.001)
    assert per["one_kernel_floor_us"]["b"] == pytest.approx(103.70, abs=0.01)
    explained = run_cli("explain", EAGER_BUNDLE, "--format", "json")
    steps = json.loads(explained.stdout)["steps"]
    kernel_us = sorted(s["kernel_us"] for s in steps)[len(steps) // 2]
    assert per["kernel_us"]["a"] == pytest.approx(kernel_us) and per["kernel_us"]["b"] is None
    assert per["measured_over_floor"]["b"] is None
    assert [w["work"] for w in doc["work"]] == ["matmul", "elementwise"]
    mm, ew = doc["work"]
    assert mm["matched_by"] == ew["matched_by"] == "op class"
    assert mm["a"]["fused_op_sets"] == {"mm+add": 1} and mm["b"]["fused_op_sets"] == {"matmul": 1}
    assert mm["b"]["names"] == ["Matmul"] and mm["a"]["names"][0].startswith("nvjet_sm90")
    assert (ew["a"]["kernels"], ew["b"]["kernels"]) == (1, 2)
    assert ew["a"]["fused_op_sets"] == {"relu": 1} and ew["b"]["fused_op_sets"] == {"add": 1, "maximum": 1}
    assert mm["a"]["floor_us"] == pytest.approx(0.54656, abs=1e-6)
    assert mm["b"]["floor_us"] is None          # bf16 matmul on the cpu spec: no rate bounds it (issue 24.1)


def test_compare_compiled_sides_match_fused_elementwise_and_same_spec_floors_agree():
    """Inductor's triton_poi_fused_relu_0 (category triton) and MLX's CompiledBroadcastAddBroadcastMaximum are
    both the step's fused elementwise kernel. Costed on one spec (--spec-a/--spec-b rtx5090) the two captures
    of one workload give one one-kernel floor, 1.464 µs, and the same 2-kernel floor sum: 1.4640 + 0.2926 µs on
    A; 1.4629 (mm) + 0.2937 (add+maximum reads out, b and the 0, writes out: 526,338 B) on B = 1.7566 µs."""
    doc = compare_doc(ROOT / "captures" / "bundles" / "seed_compile", COMPILED, "--spec-a", "rtx5090",
                      "--spec-b", "rtx5090")
    assert doc["a"]["spec"] == doc["b"]["spec"] == "rtx5090"
    ew = next(w for w in doc["work"] if w["work"] == "elementwise")
    assert ew["a"]["names"] == ["triton_poi_fused_relu_0"]
    assert ew["b"]["names"] == ["CompiledBroadcastAddBroadcastMaximum"]
    assert ew["b"]["fused_op_sets"] == {"add+maximum": 1}
    per = doc["per_step"]
    for side in ("a", "b"):
        assert per["one_kernel_floor_us"][side] == pytest.approx(1.464, abs=5e-4)
        assert per["floor_us"][side] == pytest.approx(1.7566, abs=5e-4)
    assert per["measured_over_floor"]["a"] == pytest.approx(per["kernel_us"]["a"] / per["floor_us"]["a"], rel=0.02)


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv"])
def test_compare_formats(fmt):
    out = run_cli("compare", EAGER_BUNDLE, LAZY, "--format", fmt)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    if fmt == "text":
        assert max(len(line) for line in lines) <= 80
        assert any(line.startswith("matmul ") for line in lines)
    elif fmt == "markdown":
        assert any(line.startswith("| matmul | A | 1 | mm+add |") for line in lines)
    else:
        assert lines[0].startswith("section,key,side")
        assert sum(line.startswith("work,elementwise,") for line in lines) == 2


@pytest.mark.parametrize("args, says", [
    ((MLX / "seed_lazy_bf16_b128",), "holds 3 MLX graphs"),
    ((LAZY, "--spec-b", "no-such-gpu"), "no-such-gpu"),
    ((ROOT / "nothing.json",), "no such file")])
def test_compare_refuses_in_one_line(args, says):
    out = run_cli("compare", EAGER_BUNDLE, *args)
    assert out.returncode == 2 and out.stdout == ""
    assert says in out.stderr and out.stderr.strip().count("\n") == out.stderr.count("warning")


def test_html_report_carries_the_floors_on_each_device(tmp_path):
    """explain --devices --html: the page gains the devices section, with the seed's hand-derived
    one-kernel floors at B = 128 (H200 0.547 µs, RTX 5090 1.46 µs, M5 Pro 8.55 µs)."""
    page = tmp_path / "seed.html"
    out = run_cli("explain", H200 / "seed_eager_b128.json.gz", "--devices", "h200,rtx5090,apple-m5-pro",
                  "--html", page)
    assert out.returncode == 0, out.stderr
    html = page.read_text()
    section = html[html.index("The same work on other devices"):]
    rows = [re.findall(r"<td[^>]*>([^<]*)</td>", r) for r in section.split("<tr>")]
    one_kernel = {r[0]: r[6] for r in rows if len(r) == 10}        # device, roof, ..., one-kernel floor, ...
    assert one_kernel == {"h200*": "0.547 µs", "rtx5090": "1.46 µs", "apple-m5-pro": "8.55 µs"}   # µs everywhere
