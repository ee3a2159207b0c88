"""The committed H200 `tracekit measure` results (captures/h200/measure/results, 2026-12-03): each
figure agrees with the raw numbers it was made from, and the floors with their hand derivation."""

from __future__ import annotations

import json

import pytest

from conftest import H200

RESULTS = H200 / "measure" / "results"
FILES = sorted(RESULTS.glob("*.json"))
HBM = 4.8e12          # h200 spec, bytes/s


def load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())


def test_all_seven_runs_are_committed_with_markdown():
    names = {f.stem for f in FILES}
    assert names == {"seed_eager_b1", "seed_eager_b128", "seed_compile_b128", "llama_decode_eager",
                     "llama_decode_reduce_overhead", "gpt_train_eager", "gpt_train_compile"}
    assert all(f.with_suffix(".md").is_file() for f in FILES)


def test_seed_floors_are_the_hand_derived_ones():
    """B = 128, two kernels: addmm 2·(128·1024 + 1024² + 1024 + 128·1024) B + relu 2·2·128·1024 B;
    B = 1: 2·(1024 + 1024² + 1024 + 1024) + 2·2·1024; both memory-bound at 4.8 TB/s."""
    assert load("seed_eager_b128")["floor"]["us"] == pytest.approx((2_623_488 + 524_288) / HBM * 1e6)
    assert load("seed_eager_b1")["floor"]["us"] == pytest.approx((2_103_296 + 4_096) / HBM * 1e6)


def test_decode_floor_is_its_weights_and_kv_cache():
    """Weights read per step 953,229,312 B + KV cache 33,554,432 B (llama_decode.py prints both) =
    986.8 MB → 205.6 µs; explain's floor adds the step's small activations on top (under 0.5 %)."""
    floor = load("llama_decode_eager")["floor"]["us"]
    assert (953_229_312 + 33_554_432) / HBM * 1e6 <= floor < 1.005 * (953_229_312 + 33_554_432) / HBM * 1e6


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_energy_and_ratios_follow_from_the_raw_figures(path):
    doc = json.loads(path.read_text())
    e = doc["energy"]
    assert e["available"] and e["window_ok"] and e["window_s"] >= 1.0
    assert e["j_per_step"] == pytest.approx(e["joules"] / e["calls"])
    assert e["avg_w"] == pytest.approx(e["joules"] / e["window_s"])
    if e.get("tokens_per_step"):
        assert e["tok_per_j"] == pytest.approx(e["tokens_per_step"] / e["j_per_step"])
    assert 0 < e["avg_w"] <= e["device"]["power_limit_w"]
    for s in doc["scopes"]:
        if s["available"] and s["median_us"]:
            assert s["min_us"] <= s["median_us"] <= s["max_us"]
            assert s["x_floor"] == pytest.approx(s["median_us"] / doc["floor"]["us"])


@pytest.mark.parametrize("name", ["seed_eager_b128", "llama_decode_eager", "gpt_train_eager"])
def test_a_call_back_to_back_takes_at_least_its_kernels(name):
    """Kernel time is the device part of a call: back to back and single call can only add to it."""
    by = {s["scope"]: s for s in load(name)["scopes"]}
    kernels = by["kernel_hot"]["median_us"]
    assert kernels <= by["continuous"]["median_us"] <= by["single_call"]["median_us"]


def test_fused_adamw_is_costed_only_with_the_execution_trace(tmp_path):
    """Issue 24 item 5 on a real H200 trace: the committed `tracekit capture` of the same GPT training step
    (captures/h200/models/gpt_train_eager, fused AdamW). Its optimizer is costed from the execution trace's
    tensor lists; without et.json.gz (what measure's profile recorded before) it is not, and the step
    floor lacks it. 79,443,456 fp32 parameters in 37 tensors: params, grads and both moments read, params and
    moments written, 7 · 4 B each, plus the 37 fp32 step counters read: 2,224,416,916 B at 4.8 TB/s."""
    import shutil

    from tracekit.analyze import analyze_path

    src = H200 / "models" / "gpt_train_eager"
    bare = tmp_path / "no_et"
    shutil.copytree(src, bare)
    (bare / "et.json.gz").unlink()
    floors, opt_bytes = {}, 7 * 4 * 79_443_456 + 37 * 4
    for name, path in (("et", src), ("no_et", bare)):
        trace = analyze_path(str(path), device="h200")[0]
        k = trace.kernels
        k = k[k["step"] == k["step"].min()]
        opt = k[k["name"].str.contains("FusedAdam")]
        assert len(opt) == 4                               # one op, launched in 4 chunks
        floors[name] = k["floor_us"].sum()
        if name == "et":
            assert opt["covered"].all() and opt["bytes"].iloc[0] == opt_bytes
            assert opt["floor_us"].iloc[0] == pytest.approx(opt_bytes / HBM * 1e6)
        else:
            assert not opt["covered"].any() and opt["floor_us"].isna().all()
    assert floors["et"] - floors["no_et"] == pytest.approx(opt_bytes / HBM * 1e6, rel=1e-6)
