"""tracekit calibrate: a quick run on this CPU (torch) and on MLX's CPU backend gives plausible roofs that
explain reads back through --spec; usage errors are one line and exit 2; the spec writer round-trips odd
names; the datasheet comparison against the builtin H200 spec; the committed H200 calibration lands in
the ranges of shared/notes/h200.md."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, run_cli

from tracekit.calibrate.figures import ALL_KEYS, Calibration, Figure
from tracekit.calibrate.host import caches
from tracekit.calibrate.spec_file import compare, matching_builtin, spec_toml, table
from tracekit.cost.devices import load_spec, tomllib   # tomli on Python 3.10
from tracekit.errors import TracekitError

MLP3 = ROOT / "captures" / "cpu" / "mlp3"
H200_CALIBRATED = ROOT / "captures" / "h200" / "calibrate" / "h200-calibrated.toml"


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "this_cpu.toml"
    proc = run_cli("calibrate", "--device", "cpu", "--quick", "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out, proc


@pytest.fixture(scope="module")
def mlx_run(tmp_path_factory):
    pytest.importorskip("mlx.core", reason="MLX not installed (pip install 'tracekit[mlx]')")
    out = tmp_path_factory.mktemp("cal") / "mlx_cpu.toml"
    proc = run_cli("calibrate", "--device", "mlx", "--quick", "-o", out)
    assert proc.returncode == 0, proc.stderr
    return out, proc


def _every_key_measured_or_skipped(spec) -> None:
    measured = set(spec.sources)
    assert measured.isdisjoint(spec.skipped)
    assert measured | set(spec.skipped) == set(ALL_KEYS)
    assert all(reason.strip() for reason in spec.skipped.values())


def test_cpu_quick_values_are_plausible_and_marked_measured(cpu_run):
    out, proc = cpu_run
    spec = load_spec(out)
    assert spec.id == "this_cpu" and spec.vendor == "cpu" and spec.match == ()
    assert 0.5 <= spec.bandwidth_gbs <= 500                       # GB/s, bytes read + written
    assert 0.5 <= spec.elementwise_gbs <= 500
    # rates a loaded 2-core runner can measure (0.35 GFLOP/s fp32 beside another test run) up to 20 TFLOP/s;
    # the low end is the spec loader's own (devices.SANE_RANGE): what calibrate may write
    assert 1e-6 <= spec.peak("fp32") <= 20
    assert 1e-6 <= spec.peak("fp64") <= 20
    assert 0.05 <= spec.launch_us <= 1000                         # µs per op on a CPU
    assert set(spec.measured) >= {"peak.fp32", "peak.fp64", "memory.bandwidth_gbs", "launch.kernel_us"}
    assert spec.kinds.get("memory.l2_bytes", "device") == "device"
    assert "tf32" not in spec.peak_tflops and "NVIDIA tensor-core" in spec.skipped["peak.tf32"]
    _every_key_measured_or_skipped(spec)
    for key in spec.measured:                                      # how each was measured, in its source
        assert "median" in spec.sources[key] and "best" in spec.sources[key] and "batches" in spec.sources[key]
        assert "torch 2." in spec.sources[key]
    assert "no builtin spec matches" in proc.stdout                # CPUs have no datasheet spec
    assert f"wrote {out}" in proc.stdout
    assert all(len(line) <= 80 for line in proc.stdout.splitlines() if str(out) not in line)
    assert "calibrating" in proc.stderr and "peak.fp32" in proc.stderr


def test_cpu_spec_drives_explain_floors(cpu_run):
    """explain --spec FILE on the committed CPU MLP: each linear is 2·64·256·256 FLOP and reads/writes
    (64·256 + 256·256 + 64·256)·4 B; each relu moves 64·256·4 B in and out; floors from the file's numbers."""
    out, _ = cpu_run
    doc = tomllib.loads(out.read_text())
    fp32, bw = doc["peak"]["fp32"]["value"], doc["memory"]["bandwidth_gbs"]["value"]
    launch = doc["launch"]["kernel_us"]["value"]
    proc = run_cli("explain", MLP3, "--spec", out, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["device"]["spec"] == "this_cpu"
    linears = [k for k in result["kernels"] if k["name"] == "aten::linear"]
    relus = [k for k in result["kernels"] if k["name"] == "aten::relu"]
    assert len(linears) == 9 and len(relus) == 3
    for k in linears:
        assert k["flops"] == 8_388_608 and k["bytes"] == 393_216
        assert k["floor_us"] == pytest.approx(max(8_388_608 / (fp32 * 1e6), 393_216 / (bw * 1e3)), rel=1e-9)
    for k in relus:
        compute, memory = 16_384 / (fp32 * 1e6), 131_072 / (bw * 1e3)
        floor = max(compute, memory)
        assert k["floor_us"] == pytest.approx(floor, rel=1e-9)
        assert k["bound"] == ("launch" if floor < launch else "compute" if compute > memory else "memory")


def test_toml_on_stdout_without_out_and_json_format(tmp_path):
    proc = run_cli("calibrate", "--device", "cpu", "--quick", "--id", "piped")
    assert proc.returncode == 0, proc.stderr
    doc = tomllib.loads(proc.stdout)                               # stdout is the spec alone
    assert doc["id"] == "piped" and doc["peak"]["fp32"]["kind"] == "measured"
    assert "median" in proc.stderr and "left out:" in proc.stderr  # the table went to stderr
    proc = run_cli("calibrate", "--device", "cpu", "--quick", "-q", "-f", "json", "-o", tmp_path / "j.toml")
    assert proc.returncode == 0 and proc.stderr == ""
    result = json.loads(proc.stdout)
    assert result["spec_id"] == "j" and result["builtin"] is None and result["value_is"] == "best"
    fig = result["figures"]["peak.fp32"]
    assert fig["repeats"] == 3 and fig["calls_per_repeat"] >= 1 and fig["value"] == fig["best"] >= fig["median"] > 0
    assert load_spec(tmp_path / "j.toml").peak("fp32") == fig["value"]


def test_mlx_cpu_quick(mlx_run):
    out, proc = mlx_run
    spec = load_spec(out)
    assert spec.vendor in ("cpu", "apple", "nvidia")
    assert 0.1 <= spec.bandwidth_gbs <= 2000
    assert 0.0001 <= spec.peak("fp32") <= 200
    assert 0.05 <= spec.launch_us <= 10_000
    assert "MLX has no tf32" in spec.skipped["peak.tf32"]
    assert "int8" in spec.skipped["peak.int8"]                     # MLX refuses integer matmul
    _every_key_measured_or_skipped(spec)
    assert "mlx " in spec.sources["peak.fp32"] and "mx.eval(a @ b)" in spec.sources["peak.fp32"]
    proc = run_cli("explain", MLP3, "--spec", out, "--format", "json")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("args, says", [
    (["--device", "tpu"], "--device 'tpu': unknown"),
    (["--device", "cpu", "-f", "yaml"], "--format 'yaml': unknown"),
    (["--device", "cpu", "-o", "no/such/folder/x.toml"], "its folder does not exist"),
])
def test_usage_errors_are_one_line_exit_2(args, says):
    proc = run_cli("calibrate", *args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and says in proc.stderr and proc.stdout == ""


def test_cuda_without_a_gpu_is_exit_2():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    proc = run_cli("calibrate", "--device", "cuda", "--quick")
    assert proc.returncode == 2 and "sees no CUDA device" in proc.stderr and proc.stderr.count("\n") == 1


def _synthetic(name: str, props: dict, values: dict[str, float]) -> Calibration:
    """A calibration made up in the test (synthetic figures, no timing)."""
    cal = Calibration("cuda", name, "nvidia", props, {"torch": "2.11.0+cu130"}, "2026-12-03", False)
    for key, value in values.items():
        cal.add(Figure(key, value, "measured", "synthetic"))
    return cal


def test_datasheet_comparison_against_the_builtin_h200():
    cal = _synthetic("NVIDIA H200", {"name": "NVIDIA H200", "totalGlobalMem": 150_754_820_096, "numSms": 132},
                     {"peak.bf16": 790.0, "peak.fp64": 60.0, "peak.fp16_fp16acc": 757.0,
                      "memory.bandwidth_gbs": 4200.0, "memory.elementwise_gbs": 3600.0, "launch.kernel_us": 0.98})
    builtin = matching_builtin(cal)
    assert builtin is not None and builtin.id == "h200"
    rows = {r["key"]: r for r in compare(cal.values(), builtin)}
    assert rows["peak.bf16"]["builtin"] == 989.5 and rows["peak.bf16"]["ratio"] == pytest.approx(790 / 989.5)
    assert rows["peak.fp64"]["builtin"] == 67.0                          # DGEMM against fp64_tensor, not fp64 34
    assert rows["peak.fp16_fp16acc"]["builtin"] == 989.5                  # datacenter: one fp16 rate
    assert rows["memory.bandwidth_gbs"]["ratio"] == pytest.approx(4200 / 4800)
    assert rows["memory.elementwise_gbs"]["ratio"] == pytest.approx(3600 / 4800)
    assert rows["launch.kernel_us"]["builtin"] == 0.96 and rows["launch.kernel_us"]["builtin_measured"]
    assert not rows["peak.bf16"]["builtin_measured"]
    text = table(cal, builtin, None)
    assert "beside: builtin spec 'h200'" in text and "0.80" in text and "0.96*" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    other = _synthetic("NVIDIA H200 NVL", {"name": "NVIDIA H200 NVL"}, {"peak.bf16": 700.0})
    assert matching_builtin(other) is None                               # the NVL part has no builtin spec


def test_spec_writer_escapes_names_and_round_trips(tmp_path):
    name = 'GPU "quoted" \\ back\tslash\x7f'
    cal = _synthetic(name, {"name": name}, {"peak.bf16": 12.5, "memory.bandwidth_gbs": 300.0})
    cal.add(Figure("memory.l2_bytes", 50_331_648, "device", "synthetic"))
    cal.skip("peak.fp8", 'no "fp8" here')
    path = tmp_path / "odd.toml"
    path.write_text(spec_toml(cal, "odd"))
    spec = load_spec(path)
    assert spec.name == f"{name} (measured)" and spec.peak("bf16") == 12.5 and spec.l2_bytes == 50_331_648
    assert spec.kinds == {"peak.bf16": "measured", "memory.bandwidth_gbs": "measured", "memory.l2_bytes": "device"}
    assert spec.skipped == {"peak.fp8": 'no "fp8" here'}


def test_a_measured_rate_outside_the_sane_range_is_skipped_not_written(tmp_path):
    # an emulated fp8 matmul on this 2-core CPU measured 6.8e-05 TFLOP/s once; a much slower one must not
    # make calibrate write a spec its own loader refuses (it raised an internal error)
    cal = _synthetic("slow cpu", {"name": "slow cpu"}, {"peak.fp32": 0.034, "peak.fp8": 3e-7})
    path = tmp_path / "slow.toml"
    path.write_text(spec_toml(cal, "slow"))
    spec = load_spec(path)
    assert spec.peak("fp32") == 0.034 and "fp8" not in spec.peak_tflops
    assert spec.skipped["peak.fp8"].startswith("measured 3e-07 TFLOP/s, outside the sane range 1e-06")


def test_spec_kind_and_skipped_are_checked(tmp_path):
    base = 'id = "x"\nname = "x"\nvendor = "cpu"\n'
    bad_kind = tmp_path / "k.toml"
    bad_kind.write_text(base + '[peak]\nfp32 = { value = 1, kind = "guessed", source = "s" }\n')
    with pytest.raises(TracekitError, match="kind must be one of measured, datasheet, device"):
        load_spec(bad_kind)
    bad_skip = tmp_path / "s.toml"
    bad_skip.write_text(base + '[peak]\nfp32 = { value = 1, source = "s" }\n[skipped]\n"peak.fp8" = 3\n')
    with pytest.raises(TracekitError, match="skipped"):
        load_spec(bad_skip)


def test_builtin_measured_specs_are_marked():
    spec = load_spec("h200-measured")
    assert set(spec.measured) == {"peak.fp32", "peak.tf32", "peak.bf16", "peak.fp16",
                                  "memory.bandwidth_gbs", "launch.kernel_us", "memory.l2_gbs"}
    assert spec.kinds["memory.l2_bytes"] == "device"
    # the rest are datasheet figures (l2_gbs: captures/h200/l2, issue 24.4)
    assert set(load_spec("h200").measured) == {"launch.kernel_us", "memory.l2_gbs"}


def test_host_caches_count_shared_caches_once(tmp_path):
    """A synthetic sysfs: two CPUs with private 2 MiB L2s and one shared 32 MiB L3; an instruction cache
    is not counted."""
    for cpu in (0, 1):
        for index, (level, kind, size, shared) in enumerate([(2, "Unified", "2048K", str(cpu)),
                                                              (3, "Unified", "32M", "0-1"),
                                                              (1, "Instruction", "32K", str(cpu))]):
            d = tmp_path / f"cpu{cpu}" / "cache" / f"index{index}"
            d.mkdir(parents=True)
            for field, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
                (d / field).write_text(f"{value}\n")
    assert caches(tmp_path) == {2: (4 << 20, 2), 3: (32 << 20, 1)}


H200_RANGES = {      # shared/notes/h200.md (2026-12-02, medians of repeated runs); value in the spec's unit
    "memory.bandwidth_gbs": (4170, 4240),
    "peak.bf16": (784, 796), "peak.fp16": (756, 758), "peak.tf32": (402, 407), "peak.fp32": (50.6, 50.8),
    "peak.fp8": (1305, None), "peak.int8": (126, 126),
}   # fp8: the notes' 1305 is one 4096³ run; calibrate times 8192³, which a GEMM only runs faster
SLACK = 0.02         # day-to-day spread beyond the notes' ranges (clocks, power, another cuBLAS pick)


@pytest.mark.skipif(not H200_CALIBRATED.exists(), reason="no committed H200 calibration yet "
                    "(captures/h200/calibrate/run.sh writes it on the H200)")
def test_committed_h200_calibration_lands_in_the_notes_ranges():
    spec = load_spec(H200_CALIBRATED)
    assert spec.vendor == "nvidia" and "H200" in spec.name
    values = {f"peak.{k}": v for k, v in spec.peak_tflops.items()} | {"memory.bandwidth_gbs": spec.bandwidth_gbs}
    for key, (low, high) in H200_RANGES.items():
        assert key in values, (key, spec.skipped.get(key))
        assert low * (1 - SLACK) <= values[key] <= (high or values[key]) * (1 + SLACK), (key, values[key], (low, high))
        assert spec.kinds[key] == "measured"
    assert 0.5 <= spec.launch_us <= 2.0 and spec.l2_bytes == 62_914_560
    assert "torch 2.11" in spec.sources["peak.bf16"] and "8192x8192x8192" in spec.sources["peak.bf16"]


class FakeClock:
    """A synthetic clock: time moves only when a fake call says how long it took."""

    kind = "fake clock"

    def __init__(self):
        self.now = 0.0

    def sync(self):
        pass

    def start(self):
        return self.now

    def stop(self, mark):
        return self.now - mark


def test_grow_picks_the_largest_size_within_the_budget_and_sample_sizes_batches():
    from tracekit.calibrate.timing import Plan, grow, sample

    clock = FakeClock()

    def make(n):                                   # a synthetic call costing n³ ns
        def call():
            clock.now += n ** 3 * 1e-9
        return call

    plan = Plan(quick=True, repeats=3, repeat_s=0.05, call_s=0.1, min_n=64, max_n=4096, buffer_bytes=1)
    n, fn = grow(make, clock, plan)
    assert n == 256          # 128: 8 x 2.1 ms <= 0.1 s, go on; 256: 8 x 16.8 ms > 0.1 s, stop
    s = sample(fn, clock, plan)
    assert s.calls == 2 and len(s.seconds) == 3    # int(0.05 / 0.0168) calls per batch
    assert s.median_s == pytest.approx(256 ** 3 * 1e-9) and s.best_s == pytest.approx(256 ** 3 * 1e-9)
    assert grow(make, clock, Plan(True, 3, 0.05, 10.0, 64, 512, 1))[0] == 512       # capped by max_n


def test_table_calls_a_spread_figure_noisy():
    from tracekit.calibrate.figures import rate
    from tracekit.calibrate.timing import Sample

    cal = _synthetic("Some CPU", {"name": "Some CPU"}, {})
    cal.add(rate("peak.fp32", 2e9, 1e12, "synthetic", Sample((0.01, 0.02, 0.03), 1, "fake")))  # IQR 0.01 / 0.02
    assert cal.values()["peak.fp32"] == 0.2 and cal.figures[0].median == 0.1
    text = table(cal, None, None)
    assert "noisy (batches spread over 10% of the median): peak.fp32" in text
