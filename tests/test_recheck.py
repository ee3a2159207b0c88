"""Issue 24.4 on the committed H100 GPT-2 max-autotune bundle (captures/h200/inductor/gpt2_max_autotune:
an H100 80GB HBM3, 3 steps, 2 layers d 768, vocabulary 16,384, 1,024 positions, tied head, 16 × 256
tokens) and its Nsight Compute CSV (captures/h200/recheck/README.md has the figures).

Without an L2 rate (h100-sxm.toml with its l2_gbs left out) 32 Triton kernel runs have a gap below 1 and
no L2 state says why. Which runs are hot does not depend on the L2 rate; their bytes over their measured
time reach at most 4,437 GB/s, so any L2 rate above that explains them. h100-sxm.toml's l2_gbs is the
5,500 GB/s measured on an H100 (captures/h200/recheck/raw/capture_log.txt, a 12 MiB copy resident in L2,
min of 50): above the 4,437 GB/s, so the built-in spec explains all 31.
"""

from __future__ import annotations

import csv
import gzip
from collections import OrderedDict

import pytest

from conftest import H200, ROOT, analyze

BUNDLE = H200 / "inductor" / "gpt2_max_autotune"
NCU = H200 / "inductor" / "gpt2_max_autotune_ncu.csv.gz"
DRAM_GBS = 3350                              # h100-sxm.toml: the datasheet's 3.35 TB/s
L2_GBS = 5500                                # h100-sxm.toml: measured, 12 MiB copy in L2
FIXED = 70 * 1024                            # per-launch DRAM traffic besides the data (code, parameters)


def spec_file(tmp_path_factory, name: str) -> str:
    """h100-sxm.toml with its l2_gbs left out, as a user's file."""
    lines = [x for x in (ROOT / "tracekit" / "specs" / "h100-sxm.toml").read_text().splitlines()
             if not x.startswith("l2_gbs")]
    text = "\n".join(lines).replace('id = "h100-sxm"', f'id = "h100-sxm-{name}"')
    path = tmp_path_factory.mktemp("spec") / f"{name}.toml"
    path.write_text(text + "\n")
    return str(path)


@pytest.fixture(scope="module")
def no_l2_spec(tmp_path_factory):
    return spec_file(tmp_path_factory, "no-l2")


@pytest.fixture(scope="module")
def l2_spec():
    """The built-in spec, with the measured l2_gbs."""
    return "h100-sxm"


def test_the_builtin_h100_l2_rate_is_the_fastest_measured_copy():
    """A hot floor must stay a lower bound: the fastest of the 8/12/16 MiB copies (min of 50 each),
    12 MiB = 25,165,824 B read + written in 4.576 µs, above the 4,437 GB/s the GPT-2 bundle's hot runs reach."""
    from tracekit.cost.devices import load_spec
    spec = load_spec("h100-sxm")
    assert spec.l2_gbs == 5500 and "memory.l2_gbs" in spec.measured
    assert 2 * 12 * 2**20 / 4.576e3 == pytest.approx(5500, abs=1)
    assert spec.l2_gbs > 4437.33


def kernels(spec):
    df = analyze(BUNDLE, spec=spec)[0].kernels
    return df[df["kind"] == "kernel"].sort_values("start_us").reset_index(drop=True)


def test_without_an_l2_rate_no_run_below_its_floor_says_why(no_l2_spec):
    k = kernels(no_l2_spec)
    below = k[k["gap"] < 1]
    assert len(below) == 32 and below["name"].str.startswith("triton_").all()
    # none proven hot or cold without an L2 rate; each run below its DRAM floor is "assumed" in L2 and
    # its note names the number the spec lacks (cost/l2.py assume_hot)
    assert set(k["l2"].dropna()) == {"assumed"} and (below["l2"] == "assumed").all()
    assert below["cost_note"].str.contains("has no l2_gbs to floor it", regex=False).all()


def test_with_an_l2_rate_all_runs_below_the_dram_floor_but_one_are_hot(l2_spec):
    k = kernels(l2_spec)
    below_dram = k[(k["gap"] < 1) | ((k["dur_us"] < k["floor_us"]) & k["name"].str.startswith("triton_"))]
    hot = below_dram[below_dram["l2"] == "hot"]
    assert len(below_dram) == 32 and len(hot) == 31
    # the highest rate a hot run implies: the GELU backward reduction of step 2, 25,559,040 B in 5.76 µs
    rate = hot["bytes"] / hot["dur_us"] / 1e3
    top = k.loc[rate.idxmax()]
    assert top["name"] == "triton_red_fused_gelu_gelu_backward_sum_view_7" and top["step"] == 2
    assert top["bytes"] == 25_559_040 and rate.max() == pytest.approx(4437.33, abs=0.01)
    # a hot run's floor: its bytes at the L2 rate (its other input is hot too: nothing read from DRAM)
    assert top["l2_floor_us"] == pytest.approx(25_559_040 / (L2_GBS * 1e3))
    assert (hot["gap"] >= 1).all()
    # the one left: the bf16 -> fp32 cast [768, 3072] of step 0, whose input the ET shows written 8
    # kernels before (beyond the 4-kernel window): below its DRAM floor, so held to an assumed L2 floor
    assert (k["gap"] < 1).sum() == 0
    left = below_dram[below_dram["l2"] != "hot"]
    assert len(left) == 1
    cast = left.iloc[0]
    assert cast["name"] == "triton_poi_fused__to_copy_5" and cast["step"] == 0 and cast["l2"] == "assumed"
    assert cast["l2_floor_us"] == pytest.approx(768 * 3072 * 6 / (L2_GBS * 1e3))
    assert cast["gap"] == pytest.approx(cast["dur_us"] / cast["l2_floor_us"]) and cast["gap"] >= 1
    assert cast["bytes"] == 768 * 3072 * (2 + 4)
    assert cast["floor_us"] == pytest.approx(768 * 3072 * 6 / (DRAM_GBS * 1e3))
    assert cast["dur_us"] / cast["floor_us"] == pytest.approx(0.992, abs=0.001)


def ncu_kernels() -> list[dict]:
    return _ncu(NCU)


def _ncu(path) -> list[dict]:
    rows: OrderedDict[int, dict] = OrderedDict()
    with gzip.open(path, "rt", newline="") as f:
        for row in csv.DictReader(f):
            r = rows.setdefault(int(row["ID"]), {"name": row["Kernel Name"]})
            r[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    return list(rows.values())


def test_why_the_cold_cast_beats_its_dram_floor(no_l2_spec):
    """The cold cast's input was written by the weight-gradient GEMM 8 kernels before it (beyond the
    4-kernel window of tracekit/cost/l2.py), the 7 kernels between moving 35,005,440 B: with the 4.7 MB
    input, less than the 50 MB L2. And its 9,437,184 B of fp32 output stay in the write-back L2: ncu
    (caches flushed before each kernel) reads its bf16 input from DRAM and writes 0 B. Both are left to
    the owner of tracekit/cost/ this session (README.md)."""
    k = kernels(no_l2_spec)
    cast = k[(k["name"] == "triton_poi_fused__to_copy_5") & (k["step"] == 0) & (k["bytes"] == 768 * 3072 * 6)]
    first = cast.index[2]                    # 4 such casts a step: [768, 3072], [3072, 768], this, [3072, 768]
    assert k.loc[first, "op_dims"][0] == [768, 3072] and k.loc[first, "dur_us"] == pytest.approx(4.192)
    source = k.loc[first, "et_io"].reads[0].t.storage
    writer = max(i for i in range(first) if hasattr(k.loc[i, "et_io"], "writes")
                 and any(a.t.storage == source for a in k.loc[i, "et_io"].writes))
    assert first - writer == 8 and k.loc[writer, "op"] == "aten::mm"
    assert k.loc[writer + 1:first - 1, "bytes"].sum() == 35_005_440
    # the backward graph's triton_poi_fused__to_copy_5 (bf16 -> fp32, [768, 3072] and [3072, 768]); the
    # forward graph's kernel of the same name casts the [768, 768] weights fp32 -> bf16
    grads = [r for r in ncu_kernels() if r["name"] == "triton_poi_fused__to_copy_5"
             and r["dram__bytes_read.sum"] > 768 * 3072 * 2]
    assert len(grads) == 4                   # 2 layers x (c_fc, mlp proj)
    for r in grads:
        assert 768 * 3072 * 2 <= r["dram__bytes_read.sum"] <= 768 * 3072 * 2 + FIXED
        assert r["dram__bytes_write.sum"] == 0


def test_a_fused_adamw_in_two_kernels_is_set_against_its_floor_as_one_op(no_l2_spec):
    """aten::_fused_adamw_ runs as two multi_tensor_apply kernels a step; the op's cost sits on the longer
    one, whose own time is below that floor (0.92-0.93x), but the gap is the op's time over it (1.25x).
    27,546,624 parameters (16,384 x 768 tied embedding, 1,024 x 768 positions, 2 layers of 7,087,872,
    final norm 1,536): param, grad, exp_avg, exp_avg_sq read, 3 written, fp32, + the 28 fp32 step counts."""
    d, layer = 768, 2 * 768 + (768 * 2304 + 2304) + (768 * 768 + 768) + 2 * 768 + 2 * (768 * 3072) + 3072 + 768
    n = 16384 * d + 1024 * d + 2 * layer + 2 * d
    assert n == 27_546_624
    k = kernels(no_l2_spec)
    adam = k[k["op"] == "aten::_fused_adamw_"]
    assert len(adam) == 6
    for _, g in adam.groupby("step"):
        carrier = g[g["bytes"].notna()].iloc[0]
        assert carrier["bytes"] == n * 7 * 4 + 28 * 4
        assert carrier["dur_us"] < carrier["floor_us"] == pytest.approx(carrier["bytes"] / (DRAM_GBS * 1e3))
        assert carrier["gap"] == pytest.approx(g["dur_us"].sum() / carrier["floor_us"])
        assert 1.2 < carrier["gap"] < 1.3
    reads = sum(r["dram__bytes_read.sum"] for r in ncu_kernels() if "FusedAdamMathFunctor" in r["name"])
    assert n * 4 * 4 <= reads <= n * 4 * 4 + 2 * FIXED


@pytest.mark.parametrize("name, runs", [("gpt2_max_autotune", 1), ("gpt2_max_autotune_unnamed", 5)])
def test_cold_runs_below_the_dram_floor_leave_writes_in_l2(l2_spec, name, runs):
    """With the L2 rate given, the runs still below their DRAM floor on both H100 bundles are cold, and
    each writes less to DRAM than it writes (ncu, same position in the profiled step): the forward
    LayerNorm of the unnamed bundle writes 3,355,136 of its 18.9 MB, the embedding backward's zero fill of
    the [16,384, 768] fp32 table 25,403,392 of 50,331,648 B, the cast 0 of 9.4 MB. Their DRAM reads and
    DRAM writes at the datasheet rate fit in their time: a floor that counts only the writes the L2 cannot
    keep would hold (tracekit/cost/l2.py, left to its owner this session)."""
    df = analyze(H200 / "inductor" / name, spec=l2_spec)[0].kernels
    k = df[df["kind"] == "kernel"].sort_values("start_us").reset_index(drop=True)
    per_step = int((k["step"] == 0).sum())
    assert per_step == 122
    ncu = ncu_kernels() if name == "gpt2_max_autotune" else _ncu(H200 / "inductor" / f"{name}_ncu.csv.gz")
    assert len(ncu) == per_step
    # below their DRAM floor with no ET proof of a hot input: held to the assumed L2 floor (cost/l2.py)
    below = k[k["l2"] == "assumed"]
    assert len(below) == runs and (~(k["gap"] < 1)).all()
    assert (below["dur_us"] < below["floor_us"]).all() and below["cost_note"].str.contains("L2 assumed").all()
    for i, r in below.iterrows():
        n = ncu[i - int(r["step"]) * per_step]
        assert n["name"] == r["name"]
        written = float(sum(a.nbytes for a in r["et_io"].writes))
        assert n["dram__bytes_write.sum"] < 0.55 * written
        assert (n["dram__bytes_read.sum"] + n["dram__bytes_write.sum"]) / (DRAM_GBS * 1e3) < r["dur_us"]


# ---- the re-check bundles captured on an H100 80GB HBM3 (captures/h200/recheck/, 2026-12-06) ----------

RECHECK = H200 / "recheck"
MODELS = ("deltanet_decode", "convnext_train", "mamba2_fwd", "whisper_fwd")


def recheck(model):
    df = analyze(RECHECK / model, spec="h100-sxm")[0].kernels
    k = df[(df["kind"] == "kernel") & df["step"].notna()].sort_values("start_us").reset_index(drop=True)
    return k


def last_step_calls(model):
    """The last step's kernels beside the ncu CSV's (the 5th call, caches flushed), grouped by op call:
    [(carrier row, ncu DRAM reads of all the call's kernels, their writes, kernels)]."""
    k = recheck(model)
    last = k[k["step"] == k["step"].max()]
    ncu = _ncu(ROOT / "captures" / "h200" / "recheck" / "raw" / f"{model}_ncu.csv.gz")
    assert len(ncu) == len(last)
    calls: OrderedDict = OrderedDict()
    for n, (i, r) in zip(ncu, last.iterrows()):
        c = calls.setdefault(r["op_id"] if r["op_id"] != -1 else ("k", i), [None, 0.0, 0.0, 0])
        if c[0] is None or r["floor_us"] == r["floor_us"]:
            c[0] = r
        c[1] += n["dram__bytes_read.sum"]
        c[2] += n["dram__bytes_write.sum"]
        c[3] += 1
    return list(calls.values())


@pytest.mark.parametrize("model, per_step", [("deltanet_decode", 352), ("convnext_train", 921),
                                             ("mamba2_fwd", 375), ("whisper_fwd", 130)])
def test_recheck_bundles_are_fully_costed(model, per_step):
    """Every kernel of every step is counted against a floor (issue 24 found 96.6-100 % on the H200)."""
    k = recheck(model)
    assert [int((k["step"] == s).sum()) for s in (0, 1, 2)] == [per_step] * 3
    assert k["covered"].astype(bool).all()


def test_deltanet_decode_lm_head_is_its_weight_read_once():
    """The tied head of one decode token: [1, 1024] x [1024, 248,320] bf16, 2·1024·248,320 FLOPs, the
    weight's 508,559,360 B + the input 2,048 B + the logits 496,640 B; ncu reads the weight once."""
    calls = last_step_calls("deltanet_decode")
    head = [c for c in calls if c[0]["op_dims"][:2] == [[1, 1024], [1024, 248320]]]
    assert len(head) == 1
    r, read, _, _ = head[0]
    assert r["flops"] == 2 * 1024 * 248320
    assert r["bytes"] == 1024 * 248320 * 2 + 1024 * 2 + 248320 * 2
    assert r["floor_us"] == pytest.approx(r["bytes"] / (DRAM_GBS * 1e3))
    assert 1.0 <= read / (1024 * 248320 * 2) < 1.001


def test_whisper_encoder_convs_count_their_output_frames():
    """conv1: 80 mels -> 512, k 3, pad 1, 3,000 frames; conv2: 512 -> 512, k 3, stride 2, 1,500 frames;
    batch 2: 2·C_out·C_in·k·frames·batch FLOPs each."""
    k = recheck("whisper_fwd")
    convs = k[(k["step"] == 2) & (k["op"] == "aten::cudnn_convolution") & k["flops"].notna()]
    assert sorted(convs["flops"]) == [2 * 512 * 80 * 3 * 3000 * 2, 2 * 512 * 512 * 3 * 1500 * 2]


def test_mamba2_ssd_sum_split_in_two_kernels_is_one_op():
    """The SSD path's G = (C[..., None, :] * B[..., None, :, :]).sum(-1) reads [2, 2, 256, 256, 24, 128]
    fp32 (3,221,225,472 B, over 2^31) and torch splits it in two reduce kernels that read half each: the
    op's cost sits on the first (alone 0.80x the floor) and its gap is both kernels' time over it. ncu
    reads the whole input over the two."""
    n_in = 2 * 2 * 256 * 256 * 24 * 128
    calls = [c for c in last_step_calls("mamba2_fwd")
             if c[0]["op"] == "aten::sum" and c[0]["op_dims"][0] == [2, 2, 256, 256, 24, 128]]
    assert len(calls) == 4                   # 4 layers
    for r, read, _, kernels in calls:
        assert kernels == 2
        assert r["bytes"] == n_in * 4 + n_in // 128 * 4
        assert 0.79 < r["dur_us"] / r["floor_us"] < 0.81 and 1.5 < r["gap"] < 1.7
        assert 1.0 <= read / (n_in * 4) < 1.001


def test_convnext_fused_adamw_counts_every_parameter():
    """convnext_tiny: dims 96/192/384/768, depths 3/3/9/3; a block has a 7x7 depthwise conv, a norm, two
    linears (d -> 4d -> d) and a layer scale: 8d² + 58d parameters; 182 tensors. AdamW reads param, grad,
    exp_avg, exp_avg_sq and writes 3 (fp32), plus the fp32 step counts."""
    dims, depths = (96, 192, 384, 768), (3, 3, 9, 3)
    n = 3 * 96 * 16 + 96 + 2 * 96                                       # stem conv 4x4 s4, norm
    n += sum(depth * (8 * d * d + 58 * d) for d, depth in zip(dims, depths))
    n += sum(2 * a + a * b * 4 + b for a, b in zip(dims, dims[1:]))     # downsample: norm, conv 2x2 s2
    n += 2 * 768 + 768 * 1000 + 1000                                     # head norm, fc
    assert n == 28_589_128                                               # the script's own count (log)
    tensors = 4 + 9 * sum(depths) + 4 * 3 + 4
    k = recheck("convnext_train")
    adam = k[(k["op"] == "aten::_fused_adamw_") & k["bytes"].notna()]
    assert len(adam) == 3
    assert (adam["bytes"] == n * 7 * 4 + tensors * 4).all()
    assert (adam["gap"] > 1.5).all()


@pytest.mark.parametrize("model, categories", [
    ("deltanet_decode", ("gemm",)), ("whisper_fwd", ("gemm", "elementwise", "attention", "norm")),
    ("mamba2_fwd", ("gemm", "reduction", "conv")), ("convnext_train", ("elementwise", "gemm", "reduction"))])
def test_ncu_reads_over_tracekit_reads_per_category(model, categories):
    """Per category, ncu's DRAM reads (caches flushed) over the execution-trace reads of the same op calls,
    each call counted once: 1.00-1.03 (the rest is code, parameters, a partial line). Not in the band:
    cuDNN convolutions (layout transforms read the tensor 2-7x) and layer-norm backward (two kernels)."""
    agg: dict = {}
    for r, read, _, _ in last_step_calls(model):
        x = r["et_io"]
        if hasattr(x, "reads"):
            a = agg.setdefault(r["category"], [0.0, 0.0])
            a[0] += read
            a[1] += float(sum(q.nbytes for q in x.reads))
    for c in categories:
        assert 0.99 < agg[c][0] / agg[c][1] < 1.03, (c, agg[c])


def test_convnext_cold_runs_below_the_dram_floor_leave_writes_in_l2():
    """The 21 ConvNeXt runs with a gap below 1 on h100-sxm (6 add, 3 add_, 12 fp32 -> bf16 copy_) are
    cold by the ET and all move 57,802,752 B (add: two [32, 192, 28, 28] fp32 reads, one write; copy_: a
    [32, 56, 56, 96] fp32 read, 38.5 MB, and its bf16 write, 19.27 MB), more than the 50 MB L2, so no hot
    floor applies, though each input was written 1-3 kernels before. ncu (caches flushed, last step) reads all of it from DRAM and writes
    0.46-4.6 MB of the 19.27 MB: DRAM reads + DRAM writes at 3,350 GB/s fit in the time. The same
    write-back case as the GPT-2 cast (left to the owner of tracekit/cost/l2.py)."""
    k = recheck("convnext_train")
    below = k[k["l2"] == "assumed"]            # below their DRAM floor, held to the assumed L2 floor
    assert len(below) == 21 and (~(k["gap"] < 1)).all() and (below["dur_us"] < below["floor_us"]).all()
    # 57,802,752 B at 5,500 GB/s: 10.51 µs, under the 11.6-12.9 µs they ran
    assert below["l2_floor_us"].to_numpy() == pytest.approx(57_802_752 / 5.5e6)
    assert dict(below["op"].value_counts()) == {"aten::copy_": 12, "aten::add": 6, "aten::add_": 3}
    assert (below["bytes"] == 32 * 192 * 28 * 28 * 4 * 3).all() and 32 * 192 * 28 * 28 * 12 == 32 * 56 * 56 * 96 * 6
    ncu = _ncu(ROOT / "captures" / "h200" / "recheck" / "raw" / "convnext_train_ncu.csv.gz")
    per_step = 921
    seen = 0
    for i, r in below[below["step"] == 2].iterrows():
        n = ncu[i - 2 * per_step]
        written = float(sum(a.nbytes for a in r["et_io"].writes))
        assert n["dram__bytes_write.sum"] < 0.25 * written
        assert (n["dram__bytes_read.sum"] + n["dram__bytes_write.sum"]) / (DRAM_GBS * 1e3) < r["dur_us"]
        seen += 1
    assert seen == 6


def test_h100_decode_gaps_are_set_against_the_launch_floor():
    """Issue 24.2 on the H100 decode: its 1-token kernels have roofline floors of nanoseconds (a
    [1, 1024] fp32 copy, 8,192 B read and written: 2.4 ns at 3,350 GB/s), so without the spec's
    [launch] kernel_us the gaps reached 924,000x (888 runs above 100x). h100-sxm's kernel_us
    (0.896 µs, the shortest H100 kernel of the committed bundles) lowered to the trace's own shortest
    activity (a 0.768 µs memset) is what no separate kernel can beat: every gap is within 10x."""
    k = recheck("deltanet_decode")
    shortest = 0.768
    launch = k[k["bound"] == "launch"]
    assert len(launch) > 900 and (launch["gap_floor_us"] >= shortest - 1e-9).all()
    assert (launch["floor_us"] < shortest).all()
    assert k["gap"].max() < 10
