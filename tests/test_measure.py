"""`tracekit measure` on the CPU: a tiny real model run as a subprocess (the script's output and exit code
kept, the JSON schema, the order the scopes must keep), the root-module rule, refusals; the NVML energy
window against a fake counter and clock."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import ROOT, run_cli, run_cli_subprocess

pytest.importorskip("torch")
TINY = ROOT / "tests" / "scripts" / "measure_tiny.py"
FAST = ["--device", "cpu", "--flush-bytes", "4000000", "--repeats", "5", "--profile-steps", "2", "--calls", "5"]
ORDER = ["kernel_hot", "kernel_cold", "continuous", "graph_replay", "single_call", "end_to_end", "first_call"]
TOP_KEYS = {"schema", "tracekit_version", "command", "step_rule", "step", "device", "settings", "arguments", "reset",
            "floor", "scopes", "breakdown", "profile_trace", "energy", "warnings", "script"}
STAT_KEYS = {"scope", "label", "timer", "available", "n", "median_us", "min_us", "max_us", "p25_us", "p75_us",
             "spread_pct", "x_floor"}


@pytest.fixture(scope="module")
def step_fn_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("measure") / "tiny.json"
    proc = run_cli_subprocess("measure", TINY, "--step-fn", "measure_tiny:step", "-o", out, *FAST,
                              "--tokens-per-step", "8", "--", "--iters", "3", "--exit", "3")
    return proc, json.loads(out.read_text()), out


def test_script_output_and_exit_code_are_kept(step_fn_run):
    proc, doc, out = step_fn_run
    assert proc.returncode == 3, proc.stderr
    # three calls of a step that adds 1 to pos: the measurement's repeats are undone, the script sees 3
    assert "pos=3 y=(8,)" in proc.stdout
    assert doc["script"]["exit_code"] == 3 and doc["script"]["args"] == ["--iters", "3", "--exit", "3"]
    assert out.with_suffix(".md").read_text().startswith("# tracekit measure")
    assert "③ single call + sync" in proc.stderr and f"tracekit: wrote {out}" in proc.stderr


def test_json_schema(step_fn_run):
    _, doc, _ = step_fn_run
    assert set(doc) == TOP_KEYS and doc["schema"] == 1
    assert [s["scope"] for s in doc["scopes"]] == ORDER
    for s in doc["scopes"]:
        assert STAT_KEYS <= set(s), s["scope"]
    by = {s["scope"]: s for s in doc["scopes"]}
    assert doc["step_rule"] == "step-fn:measure_tiny:step"
    assert doc["device"]["device"] == "cpu" and doc["device"]["timer"] == "wall clock (time.perf_counter)"
    # repeats as asked; kernel time over the 2 hot and 2 cold profiled steps; the first call once
    assert [by[k]["n"] for k in ("continuous", "single_call", "end_to_end")] == [5, 5, 5]
    assert by["kernel_hot"]["n"] == by["kernel_cold"]["n"] == 2 and by["first_call"]["n"] == 1
    assert by["continuous"]["calls_per_repeat"] == 5
    assert not by["graph_replay"]["available"] and "CPU" in by["graph_replay"]["reason"]
    # the step's tensor arguments, from the script: x (8, 64) fp32 and pos (1,) int64, which the step changes
    assert doc["arguments"] == [
        {"name": "arg1", "shape": [8, 64], "dtype": "float32", "device": "cpu", "bytes": 8 * 64 * 4, "mutated": False},
        {"name": "arg2", "shape": [1], "dtype": "int64", "device": "cpu", "bytes": 8, "mutated": True}]
    assert doc["reset"] == {"mode": "auto", "mutated_by_first_call": ["arg2"], "reset_before_each_call": ["arg2"],
                            "reset_bytes_per_call": 8}
    # on the CPU there is nothing to copy: no h2d/d2h, and it says so
    assert by["end_to_end"]["h2d"] == [] and by["end_to_end"]["d2h_bytes"] == 0
    assert any("CPU" in n for n in by["end_to_end"]["not_copied"])
    e = doc["energy"]
    assert e["available"] is False and "CPU" in e["reason"]
    assert doc["settings"]["tokens_per_step"] == 8 and doc["settings"]["flush_bytes"] == 4_000_000


def test_scopes_keep_their_order_and_floor(step_fn_run):
    _, doc, _ = step_fn_run
    by = {s["scope"]: s for s in doc["scopes"]}
    # the first call pays one-time costs; back to back a call costs no more than alone + sync. On a CPU
    # the sync is nothing and each back-to-back call also copies pos back (--reset-args), so the two are
    # equal up to noise: 25 % allowed (minima against medians: the dev box is shared, noise only adds)
    assert by["first_call"]["median_us"] >= by["single_call"]["min_us"]
    assert by["continuous"]["min_us"] <= 1.25 * by["single_call"]["median_us"]
    for s in doc["scopes"]:
        if s["available"]:
            assert s["min_us"] <= s["p25_us"] <= s["median_us"] <= s["p75_us"] <= s["max_us"]
            assert math.isclose(s["x_floor"], s["median_us"] / doc["floor"]["us"])
    assert doc["floor"]["spec"] == "cpu" and doc["floor"]["us"] > 0
    # six top-level CPU ops per step (add_, linear, relu, linear, sum, add), no device launches
    assert by["kernel_hot"]["kernels_per_step"] == 6
    assert doc["breakdown"]["kernels"] == 6 and doc["breakdown"]["launches"] == 0


def test_root_module_rule_and_a_module_called_once(tmp_path):
    out = tmp_path / "m.json"
    proc = run_cli_subprocess("measure", TINY, "-o", out, *FAST, "--no-profile", "--", "--iters", "3", "--module",
                              "--count-hooks")
    assert proc.returncode == 0, proc.stderr
    # the two global module hooks (tracekit's pre and post) time the root module's first call only: left
    # in while measuring, they run at every submodule call and slow each repeat (issue 24 item 6)
    assert "global hooks: first call 2, later calls [0]" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["step_rule"] == "module:Tiny" and "forward only" in doc["step"]
    assert doc["arguments"] == [{"name": "arg0", "shape": [8, 64], "dtype": "float32", "device": "cpu",
                                 "bytes": 2048, "mutated": False}]
    by = {s["scope"]: s for s in doc["scopes"]}
    assert not by["kernel_hot"]["available"] and by["kernel_hot"]["reason"] == "--no-profile"
    assert doc["floor"]["us"] is None and by["single_call"]["x_floor"] is None
    once = run_cli_subprocess("measure", TINY, "-o", tmp_path / "once.json", *FAST, "--", "--iters", "1", "--module")
    assert once.returncode == 2 and "called at most once" in once.stderr
    assert "pos=0 y=(8, 64)" in once.stdout


TRAIN = ROOT / "tests" / "scripts" / "measure_train_tiny.py"
PARAMS = 2 * (64 * 64 + 64)              # measure_train_tiny: two Linear(64, 64), fp32


@pytest.mark.parametrize("optimizer", ["fused", "foreach"])
def test_the_profile_records_the_execution_trace_so_the_optimizer_is_costed(optimizer, tmp_path):
    """Issue 24 item 5: without an execution trace the profiler records no shapes for tensor lists, so a
    fused or foreach AdamW step's optimizer was uncosted and the step floor low."""
    from tracekit.analyze import analyze_path

    out, kept = tmp_path / "t.json", tmp_path / "trace"
    proc = run_cli_subprocess("measure", TRAIN, "--step-fn", "measure_train_tiny:train_step", "-o", out, *FAST,
                              "--keep-trace", kept, "--", "--iters", "2", *(["--foreach"] if optimizer == "foreach" else []))
    assert proc.returncode == 0, proc.stderr
    assert (kept / "et.json.gz").is_file()
    assert json.loads((kept / "meta.json").read_text())["execution_trace"] == "et.json.gz"
    trace = analyze_path(str(kept), device="cpu")[0]
    k = trace.kernels
    k = k[k["step"] == 0]
    fp32 = PARAMS * 4
    if optimizer == "fused":
        # params, grads, exp_avg, exp_avg_sq read, params and both moments written; the 4 fp32 step counters read
        opt = k[k["name"] == "aten::_fused_adamw_"]
        assert len(opt) == 1 and opt["bytes"].iloc[0] == 7 * fp32 + 4 * 4
    else:
        opt = k[k["name"].str.startswith("aten::_foreach_") & (k["name"] != "aten::_foreach_add_")]
        # exp_avg.lerp_(grad, 1 - beta1): two lists read, one written
        assert k[k["name"] == "aten::_foreach_lerp_"]["bytes"].tolist() == [3 * fp32]
        assert len(opt) >= 6
    assert opt["floor_us"].notna().all() and opt["covered"].all()
    doc = json.loads(out.read_text())
    # the step's floor (median over the hot steps) holds the optimizer's
    assert doc["floor"]["us"] > opt["floor_us"].sum()


def test_floor_given_by_the_user(tmp_path):
    out = tmp_path / "f.json"
    proc = run_cli_subprocess("measure", TINY, "--step-fn", "measure_tiny:step", "-o", out, *FAST, "--no-profile",
                              "--floor-us", "2.5", "--reset-args", "off", "--", "--iters", "2")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert doc["floor"] == {"us": 2.5, "source": "--floor-us"}
    single = next(s for s in doc["scopes"] if s["scope"] == "single_call")
    assert math.isclose(single["x_floor"], single["median_us"] / 2.5)
    # --reset-args off: nothing copied back, and the change is said
    assert doc["reset"]["reset_before_each_call"] == [] and doc["reset"]["mutated_by_first_call"] == ["arg2"]
    assert any("--reset-args off" in w for w in doc["warnings"])


@pytest.mark.parametrize("window", ["0.5", "0", "nan"])
def test_energy_window_under_one_second_is_refused(window, tmp_path):
    proc = run_cli("measure", TINY, "--energy-window", window, "-o", tmp_path / "x.json")
    assert proc.returncode == 2 and "refused" in proc.stderr and "1 s" in proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_mlx_scripts_and_bad_options_are_one_line(tmp_path):
    mlx = run_cli("measure", ROOT / "tests" / "scripts" / "mlx_seed.py")
    assert mlx.returncode == 2 and "mx.eval" in mlx.stderr and len(mlx.stderr.strip().splitlines()) == 1
    bad = run_cli("measure", TINY, "--reset-args", "sometimes", "-o", tmp_path / "x.json")
    assert bad.returncode == 2 and "--reset-args" in bad.stderr


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now


class FakeNvml:
    """An energy counter (mJ) of a device drawing ``watts`` on the fake clock, updated every ``tick`` s."""

    def __init__(self, clock, watts=300.0, tick=0.0):
        self.clock, self.watts, self.tick = clock, watts, tick

    def energy_mj(self):
        t = self.clock.now if not self.tick else math.floor(self.clock.now / self.tick) * self.tick
        return int(self.watts * t * 1e3)

    def sample(self):
        return {"sm_clock_mhz": 1980, "power_w": self.watts}

    def limits(self):
        return {"power_limit_w": 700.0}


def _energy(monkeypatch, real_s, guess_s, window=1.0, tries=3, tick=0.0, tokens=None):
    from tracekit.measure import energy

    clock = FakeClock()
    monkeypatch.setattr(energy, "time", clock)

    def run_calls(n):
        clock.now += n * real_s

    return energy.measure_energy(run_calls, lambda: None, FakeNvml(clock, tick=tick), window, guess_s, tokens, tries)


def test_energy_per_step_from_the_counter(monkeypatch):
    e = _energy(monkeypatch, real_s=0.004, guess_s=0.004, tokens=1)
    # 300 W x 4 ms = 1.2 J per call; the window at least 1 s
    assert e["window_ok"] and e["window_s"] >= 1.0 and e["attempts"] == 1
    assert math.isclose(e["j_per_step"], 1.2, rel_tol=1e-3) and math.isclose(e["avg_w"], 300.0, rel_tol=1e-3)
    assert math.isclose(e["tok_per_j"], 1 / 1.2, rel_tol=1e-3) and math.isclose(e["tok_per_s"], 250.0, rel_tol=1e-3)
    assert e["device"]["power_limit_w"] == 700.0 and e["samples"]["middle"]["sm_clock_mhz"] == 1980


def test_energy_window_that_came_out_short_is_repeated_then_flagged(monkeypatch):
    # the per-call guess is 10x too slow: 263 calls of 0.4 ms make a 0.105 s window, so it runs again
    e = _energy(monkeypatch, real_s=0.0004, guess_s=0.004)
    assert e["attempts"] == 2 and e["window_s"] >= 1.0 and e["window_ok"]
    assert math.isclose(e["j_per_step"], 300 * 0.0004, rel_tol=1e-3)
    short = _energy(monkeypatch, real_s=0.0004, guess_s=0.004, tries=1)
    assert not short["window_ok"] and short["window_s"] < 1.0 and "too coarse" in short["flags"][0]
    # a counter that never moves (coarse ticks over a short window) is flagged too
    still = _energy(monkeypatch, real_s=1e-6, guess_s=1e-6, tries=1, tick=1e9)
    assert not still["window_ok"] and any("did not advance" in f for f in still["flags"])


def test_energy_window_api_refuses_short_windows():
    from tracekit.errors import TracekitError
    from tracekit.measure.energy import check_window

    for w in (0.99, -1.0, float("inf") * 0):
        with pytest.raises(TracekitError, match="refused"):
            check_window(w)
    check_window(1.0)


def test_summary_statistics():
    from tracekit.measure.stats import summarize

    s = summarize([1e-6, 2e-6, 3e-6, 4e-6, 10e-6])
    assert s["median_us"] == pytest.approx(3.0) and s["min_us"] == pytest.approx(1.0)
    assert s["p25_us"] == pytest.approx(2.0) and s["p75_us"] == pytest.approx(4.0)
    assert s["spread_pct"] == pytest.approx(100 * 2 / 3)
    assert summarize([5e-6])["spread_pct"] is None and summarize([])["median_us"] is None
