"""Inductor under max-autotune (issue 24 item 8): GEMM templates on 3-D/4-D views, template sources
capture did not keep, and the bytes Inductor slices and gathers read.

captures/h200/inductor (README.md there), GPT-2-like training steps (2 layers, d 768, 12 heads,
16,384 vocabulary, bf16 autocast) under torch.compile(mode="max-autotune-no-cudagraphs") on an H100:
``gpt2_max_autotune_unnamed`` (4 x 1,024 tokens), captured before capture named template sources (its
8 ``triton_tem_`` kernels a step have no ``kernel_file`` and no kept source), and
``gpt2_max_autotune`` (16 x 256 tokens of 1,024 positions), captured with them named. ``*_ncu.csv.gz``:
Nsight Compute DRAM reads of every kernel of each bundle's last profiled call (caches flushed per kernel).
"""

from __future__ import annotations

import csv
import gzip
import sys
from collections import OrderedDict

import pytest

from conftest import H200, analyze

HERE = H200 / "inductor"
UNNAMED = HERE / "gpt2_max_autotune_unnamed"
FIXED = 70 * 1024            # per-launch DRAM traffic besides the data (code, parameters)

# tokens 4 x 1,024 = 4,096 rows (M); d 768; qkv 2,304; MLP 3,072 (gpt2_train.py --seq 1024 --batch 4);
# the forward Linears have biases: their addmm templates also add M·N (4,096 x out features)
TEMPLATE_FLOPS = {
    "triton_tem_fused__to_copy_add_addmm_native_layer_norm_t_view_5": 2 * 4096 * 768 * 2304 + 4096 * 2304,  # c_attn
    "triton_tem_fused__to_copy_addmm_t_transpose_view_8": 2 * 4096 * 768 * 768 + 4096 * 768,                # c_proj
    "triton_tem_fused__to_copy_addmm_native_layer_norm_t_view_16": 2 * 4096 * 768 * 3072 + 4096 * 3072,     # c_fc
    "triton_tem_fused__to_copy_addmm_gelu_t_view_13": 2 * 4096 * 3072 * 768 + 4096 * 768,                   # mlp_proj
    "triton_tem_fused__to_copy_mm_t_transpose_view_15": 2 * 4096 * 768 * 768,                 # c_proj dX
    "triton_tem_fused__to_copy_cat_mm_t_transpose_view_16": 2 * 4096 * 2304 * 768,            # c_attn dX
}


def last_step(trace):
    df = trace.kernels
    return df[(df["step"] == df["step"].max()) & (df["kind"] == "kernel")].sort_values("start_us")


def test_template_gemms_on_views_are_costed():
    """Each template's operands are the buffers Inductor hands it ([4, 1024, 768] for A[4096, 768], the
    attention output [4, 12, 1024, 64] stored as [4, 1024, 12, 64] for c_proj): 2·M·N·K from the
    shapes, with no source kept. Per step: 2 c_attn, 2 c_proj, one each of c_fc, mlp_proj and two
    backward dX GEMMs (the other GEMMs ran as cuBLAS)."""
    trace = analyze(UNNAMED)[0]
    step = last_step(trace)
    tem = step[step["name"].str.startswith("triton_tem_")]
    assert sorted(tem["name"].value_counts().items()) == sorted({
        **{n: 1 for n in TEMPLATE_FLOPS}, "triton_tem_fused__to_copy_add_addmm_native_layer_norm_t_view_5": 2,
        "triton_tem_fused__to_copy_addmm_t_transpose_view_8": 2}.items())
    for name, flops in zip(tem["name"], tem["flops"]):
        assert flops == TEMPLATE_FLOPS[name], name
    assert tem["flops"].sum() == 2 * (2 * 4096 * 768 * 2304 + 2 * 4096 * 768 * 768) + 2 * 4096 * 768 * 3072 * 2 \
        + 2 * 4096 * 768 * 768 + 2 * 4096 * 2304 * 768 + 4096 * (2 * (2304 + 768) + 3072 + 768)   # + bias adds
    assert (tem["compute_unit"] == "matrix").all() and (tem["dtype"] == "bf16").all()


def test_template_gemm_dims_from_source_and_from_views():
    """With the source kept, the M, N and K it states; without it, the views; the fewest FLOPs when
    the shapes allow two readings."""
    from tracekit.ops import OpCall
    from tracekit.ops.inductor import inductor_cost, view_gemm_dims
    from tracekit.ops.inductor_source import template_gemm
    seed = H200 / "seed_max-autotune-no-cudagraphs_b128.kernels" / "c64ktn4y2sarj5zjkhytswvhsus6l5com4wtgjmk6d7krgfujylz.py"
    assert template_gemm(seed.read_text(), "triton_tem_fused_addmm_relu_t_0") == (1, 128, 1024, 1024)
    bf = "c10::BFloat16"
    call = OpCall("triton_tem_fused_mm_0", [[4096, 768], [4, 12, 1024, 64], [768, 768]], [bf] * 3,
                  [[768, 1], [786432, 64, 768, 1], [768, 1]], kernel="triton_tem_fused_mm_0")
    cost = inductor_cost(call, ["mm"], None)
    assert cost.flops == 2 * 4096 * 768 * 768
    batch, m, n, k = view_gemm_dims([call.tensor(i) for i in range(3)], None, call.strides)
    assert batch == 1 and sorted((m, n, k)) == [768, 768, 4096]       # which operand is A: not needed
    assert view_gemm_dims([call.tensor(i) for i in range(3)], None, None) is None    # the 4-D view needs its strides
    bmm = OpCall("triton_tem_fused_bmm_0", [[96, 1024, 64], [96, 64, 1024], [96, 1024, 1024]], [bf] * 3,
                 kernel="triton_tem_fused_bmm_0")
    assert inductor_cost(bmm, ["bmm"], ["arg_A", "arg_B", "out_ptr0"]).flops == 2 * 96 * 1024 * 1024 * 64


def test_template_sources_missing_leave_the_step_an_estimate():
    """What issue 24 saw: a template's profiler op names no kernel_file, capture kept no source, so its
    kernels miss the execution-trace join and the step's one-kernel floor is only an estimate."""
    from tracekit.fusion.dataflow import step_fusion
    trace = analyze(UNNAMED)[0]
    step = last_step(trace)
    tem = step[step["name"].str.startswith("triton_tem_")]
    assert len(tem) == 8 and tem["kernel_file"].isna().all() and tem["et_io"].isna().all()
    assert step[~step["name"].str.startswith("triton_tem_")]["et_io"].notna().all()
    assert step_fusion(trace, int(step["step"].iloc[0]))["kind"] == "estimate"
    from conftest import run_cli
    out = run_cli("explain", UNNAMED).stdout        # the ET is there: say that kernels missed it, not that it is not
    assert "an estimate: not every kernel joined an execution trace" in " ".join(out.split())


def ncu_reads(csv_path) -> list[dict]:
    kernels: OrderedDict[int, dict] = OrderedDict()
    with gzip.open(csv_path, "rt", newline="") as f:
        for row in csv.DictReader(f):
            k = kernels.setdefault(int(row["ID"]), {"name": row["Kernel Name"]})
            k[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    return list(kernels.values())


def distinct_ids(high: int, shape: tuple) -> int:
    """Distinct values of gpt2_train.py's token ids: torch.randint from a CPU generator seeded 1."""
    torch = pytest.importorskip("torch")
    g = torch.Generator(device="cpu").manual_seed(1)
    return torch.randint(0, high, shape, generator=g).unique().numel()


def test_an_inductor_gather_reads_the_rows_it_gathers_in_the_dataflow():
    """The token embedding fused into the first layer norm gathers 4,096 rows of the fp32 [16384, 768]
    table through loaded ids (``in_ptr1 + (r0_1 + 768*tmp4)``): the execution-trace join counts one
    element per point of its iteration space (4,096 x 768), not the table (50 MB) and not one element
    (4 B: the ET's xnumel/r0_numel integers had been dropped). Nsight Compute reads the ids, one row per
    distinct id, the position rows and the layer-norm weights."""
    trace = analyze(UNNAMED)[0]
    step = last_step(trace)
    ncu = ncu_reads(HERE / "gpt2_max_autotune_unnamed_ncu.csv.gz")
    assert len(ncu) == len(step)
    assert [k["name"] for k in ncu if k["name"].startswith("triton_")] == [n for n in step["name"] if n.startswith("triton_")]
    name = "triton_per_fused__to_copy_add_embedding_native_layer_norm_1"
    (i,) = [i for i, n in enumerate(step["name"]) if n == name]
    io = step.iloc[i]["et_io"]
    table = [a for a in io.reads if a.t.shape == (16384, 768)]
    assert len(table) == 1 and table[0].partial and table[0].nbytes == 4096 * 768 * 4
    rows, wpe, ln, ids, rstd = 4096 * 768 * 4, 1024 * 768 * 4, 2 * 768 * 4, 4096 * 8, 4096 * 4
    assert sum(a.nbytes for a in io.reads) == rows + wpe + ln + ids + rstd
    distinct = distinct_ids(16384, (4, 1024))
    assert distinct == 3607
    need = distinct * 768 * 4 + wpe + ln + ids
    assert need <= ncu[i]["dram__bytes_read.sum"] <= need + rstd + FIXED


def test_et_keeps_integer_arguments():
    """An Inductor kernel's ET node lists its xnumel and r0_numel as Int values after the tensors."""
    from tracekit.load.execution_trace import read_execution_trace
    et = read_execution_trace(UNNAMED / "et.json.gz")
    node = next(n for n in et.nodes.values() if n.name == "triton_per_fused__to_copy_add_embedding_native_layer_norm_1")
    assert node.inputs[-3:] == (4096, 768, 0)


# ---- captures/h200/inductor/gpt2_max_autotune: the same model, 16 x 256 tokens of 1,024 positions,
# captured with template sources named (tracekit/capture/inductor_files.py) --------------------------

NAMED = HERE / "gpt2_max_autotune"


def test_capture_names_template_sources_and_the_one_kernel_floor_is_exact():
    """Every Inductor op of the trace names its kernel_file (the two templates of this compile too),
    kernels/ keeps each source, every kernel of every step joins the execution trace, and each step's
    one-kernel floor is exact (the unnamed capture: 8 templates a step without a source, an estimate)."""
    import json
    from tracekit.fusion.dataflow import step_fusion
    events = json.loads(gzip.open(NAMED / "trace.json.gz").read())["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e["name"].startswith("triton_")]
    assert len(ops) == 234 and all(e["args"].get("kernel_file") for e in ops)
    assert {e["name"] for e in ops if e["name"].startswith("triton_tem_")} == {
        "triton_tem_fused__to_copy_mm_t_transpose_view_15", "triton_tem_fused__to_copy_cat_mm_t_transpose_view_16"}
    kept = {p.name for p in (NAMED / "kernels").iterdir()}
    assert {e["args"]["kernel_file"].rsplit("/", 1)[-1] for e in ops} <= kept
    trace = analyze(NAMED)[0]
    df = trace.kernels
    steps = df[df["step"] >= 0]
    assert len(steps) == 3 * 132 and steps["et_io"].notna().all()
    assert not [w for w in trace.warnings if "not joined" in w]
    for s in trace.steps:
        f = step_fusion(trace, s.index)
        assert f["kind"] == "exact" and f["joined_kernels"] == 132 and f["uncosted_kernels"] == 0


def test_template_gemms_take_m_n_k_from_their_source():
    """The two backward dX templates state M = 4096, N = 768 and K = 768 / 2304 (rows 16 x 256); their
    reads in the dataflow are what Nsight Compute reads (within 0.2 %)."""
    trace = analyze(NAMED)[0]
    step = last_step(trace)
    ncu = ncu_reads(HERE / "gpt2_max_autotune_ncu.csv.gz")
    assert [k["name"] for k in ncu if k["name"].startswith("triton_")] == [n for n in step["name"] if n.startswith("triton_")]
    want = {"triton_tem_fused__to_copy_mm_t_transpose_view_15": 2 * 4096 * 768 * 768,
            "triton_tem_fused__to_copy_cat_mm_t_transpose_view_16": 2 * 4096 * 768 * 2304}
    for i, row in enumerate(step.itertuples()):
        if row.name in want:
            assert row.flops == want[row.name] and "from its source" in row.cost_note
            reads = sum(a.nbytes for a in row.et_io.reads)
            assert reads <= ncu[i]["dram__bytes_read.sum"] <= reads * 1.002 + FIXED


def test_a_slice_reads_the_rows_its_indexing_reaches():
    """``self.wpe(torch.arange(256))`` on a [1024, 768] fp32 table compiles to a copy of its first 256 rows
    (``tl.load(in_ptr0 + (x2))``, x2 = xindex, xnumel 196,608): the dataflow and the kernel's bytes count
    256 x 768 x 4 read, not the table's 3,145,728 B (0.25 of it; Nsight Compute reads 790 KB)."""
    trace = analyze(NAMED)[0]
    step = last_step(trace)
    ncu = ncu_reads(HERE / "gpt2_max_autotune_ncu.csv.gz")
    (i,) = [i for i, n in enumerate(step["name"]) if n == "triton_poi_fused_embedding_0"]
    row = step.iloc[i]
    (read,) = row["et_io"].reads
    assert read.t.nbytes == 1024 * 768 * 4 and read.partial and read.nbytes == 256 * 768 * 4
    assert row["bytes"] == 2 * 256 * 768 * 4                       # read once, written once
    assert 256 * 768 * 4 <= ncu[i]["dram__bytes_read.sum"] <= 256 * 768 * 4 + FIXED


def test_pointer_reach_of_index_expressions():
    """Synthetic kernel text (not from a trace): ranges from % and // of a base index, products of
    variables, a gather through a loaded index, an address the parser cannot take, and a pointer also
    loaded in a form it does not read (its whole tensor, not the one site it can count)."""
    from tracekit.ops.inductor_source import pointer_reach
    src = '''def triton_poi_fused_k_0(in_ptr0, in_ptr1, in_ptr2, in_ptr3, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 3145728
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    x0 = (xindex % 768)
    x1 = xindex // 768
    x2 = ((xindex // 768) % 256)
    tmp0 = tl.load(in_ptr0 + (x0 + 2304*x1), None)
    tmp1 = tl.load(in_ptr1 + (x0 + 768*x2), None)
    tmp2 = tl.load(in_ptr2 + (x0 + 768*tmp0), None)
    tmp3 = tl.load(in_ptr3 + (x0 + foo(x1)), None)
    tmp4 = tl.load(in_ptr4 + (x0), None)
    tmp5 = tl.load(in_ptr4 + 768 * x1)
    tl.store(out_ptr0 + (xindex), tmp3, None)
'''
    assert pointer_reach(src, "triton_poi_fused_k_0") == {
        "in_ptr0": 3145728, "in_ptr1": 768 * 256, "in_ptr2": 3145728, "in_ptr3": None, "in_ptr4": None}
    assert pointer_reach(src, "triton_tem_fused_mm_0") == {}


def test_capture_wrapper_names_a_kernel_without_a_file(tmp_path, monkeypatch):
    """Synthetic stand-in for torch._inductor.async_compile (no GPU here): a kernel returned without a
    filename, directly or through a future, gets the source's cache file; the wrapper comes off after."""
    import types
    from tracekit.capture.inductor_files import name_template_files

    class Kernel:
        def __init__(self):
            self.filename, self.kernel_hash = None, ""

    class Future:
        def __init__(self, k):
            self.k = k

        def result(self, timeout=None):
            return self.k

    class AsyncCompile:
        def triton(self, kernel_name, source_code, device_str="cuda"):
            return Future(Kernel()) if "future" in source_code else Kernel()

    fake = types.ModuleType("tk_fake_async_compile")
    fake.AsyncCompile = AsyncCompile
    monkeypatch.setitem(sys.modules, "tk_fake_async_compile", fake)
    remove = name_template_files("tk_fake_async_compile", source_path=lambda s: f"/cache/c{len(s)}.py")
    k = AsyncCompile().triton("triton_tem_fused_mm_0", "abc")
    assert (k.filename, k.kernel_hash) == ("/cache/c3.py", "c3")
    assert AsyncCompile().triton("triton_tem_fused_mm_0", "future").result().filename == "/cache/c6.py"
    remove()
    assert AsyncCompile().triton("triton_tem_fused_mm_0", "abc").filename is None


def test_capture_wrapper_waits_for_the_module_to_be_imported(tmp_path, monkeypatch):
    """Synthetic module file: installed before the module is imported (a capture starts before the
    script compiles), the wrapper patches it as the import runs it."""
    from tracekit.capture.inductor_files import name_template_files
    (tmp_path / "tk_fake_ac2.py").write_text(
        "class Kernel:\n    filename = None\n    kernel_hash = ''\n"
        "class AsyncCompile:\n    def triton(self, kernel_name, source_code):\n        return Kernel()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tk_fake_ac2", raising=False)
    remove = name_template_files("tk_fake_ac2", source_path=lambda s: "/cache/cabc.py")
    try:
        import tk_fake_ac2
        assert tk_fake_ac2.AsyncCompile().triton("k", "src").filename == "/cache/cabc.py"
    finally:
        remove()
    assert tk_fake_ac2.AsyncCompile().triton("k", "src").filename is None


def test_template_bias_adds_from_the_source_or_the_addmm_in_its_name():
    """Issue 24.9 for Inductor: a GEMM template that fused an addmm adds the bias to each of its M·N
    outputs. With the source kept (captures/h200/seed_max-autotune-no-cudagraphs_b128: relu(x Wᵀ + b),
    x [128, 1024], W [1024, 1024]) its epilogue reads `tmp1 = acc + tmp0`: 2·128·1024·1024 + 128·1024 =
    268,566,528 FLOPs. Without it (the unnamed bundle), the `addmm` in the kernel's name says the same:
    c_attn 2·4096·768·2304 + 4096·2304 = 14,504,951,808. The backward dX templates fuse `mm`: no adds."""
    from tracekit.ops.inductor_source import template_acc_adds
    seed = H200 / "seed_max-autotune-no-cudagraphs_b128.kernels" / "c64ktn4y2sarj5zjkhytswvhsus6l5com4wtgjmk6d7krgfujylz.py"
    assert template_acc_adds(seed.read_text(), "triton_tem_fused_addmm_relu_t_0") == 1
    k = analyze(H200 / "seed_max-autotune-no-cudagraphs_b128.json.gz")[0].kernels
    tem = k[k["name"] == "triton_tem_fused_addmm_relu_t_0"]
    assert set(tem["flops"]) == {268_566_528} and all("its epilogue adds to acc" in n for n in tem["cost_note"])
    step = last_step(analyze(UNNAMED)[0])
    c_attn = step[step["name"] == "triton_tem_fused__to_copy_add_addmm_native_layer_norm_t_view_5"]
    assert set(c_attn["flops"]) == {14_504_951_808}
    assert all("the bias of the addmm its name fuses" in n for n in c_attn["cost_note"])
    named = last_step(analyze(HERE / "gpt2_max_autotune")[0])
    dx = named[named["name"].str.startswith("triton_tem_")]
    assert len(dx) == 2 and set(dx["flops"]) == {2 * 4096 * 768 * 768, 2 * 4096 * 2304 * 768}
    assert not any("adds" in n for n in dx["cost_note"])


BLOCK_PTR_SRC = '''def triton_poi_fused_add_embedding_0(in_ptr0, in_ptr1, in_ptr2, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 786432
    xoffset = tl.program_id(0) * XBLOCK
    tmp0 = tl.load(tl.make_block_ptr(in_ptr0, shape=[786432], strides=[1], block_shape=[XBLOCK], order=[0], offsets=[xoffset]), boundary_check=[0])
    tmp1 = tl.load(tl.make_block_ptr(in_ptr1, shape=[4, 256, 768], strides=[0, 768, 1], block_shape=[1, 1, XBLOCK], order=[2, 1, 0], offsets=[xoffset // 196608, (xoffset // 768) % 256, xoffset % 768]), boundary_check=[2])
    tmp2 = tl.load(tl.make_block_ptr(in_ptr2, shape=[ks0, 768], strides=[768, 1], block_shape=[1, XBLOCK], order=[1, 0], offsets=[xoffset // 768, xoffset % 768]), boundary_check=[1])
    tmp3 = tmp0 + tmp1 * tmp2
    tl.store(tl.make_block_ptr(out_ptr0, shape=[786432], strides=[1], block_shape=[XBLOCK], order=[0], offsets=[xoffset]), tl.broadcast_to(tmp3, [XBLOCK]).to(tl.float32), boundary_check=[0])
'''


def test_block_pointer_reach_from_its_shape():
    """Issue 24 (block pointers, Inductor's triton.use_block_ptr). SYNTHETIC kernel text in Inductor's
    block-pointer form (no committed trace uses them): x [4, 256, 768] + pos[:256] (a [1024, 768] table
    whose block pointer spans [4, 256, 768] with the batch dim's stride 0: 256·768 = 196,608 distinct
    elements) * s (a block pointer of shape [ks0, 768]: not derivable, its whole tensor). fp32 bytes:
    x 786,432·4 + pos 196,608·4 + s 1024·768·4 + out 786,432·4 = 10,223,616 (the pos table counted
    whole gave 12,582,912), and the note names in_ptr2."""
    from tracekit.ops import OpCall
    from tracekit.ops.inductor import inductor_cost
    from tracekit.ops.inductor_source import opaque_block_pointers, pointer_reach
    name = "triton_poi_fused_add_embedding_0"
    assert pointer_reach(BLOCK_PTR_SRC, name) == {"in_ptr0": 786432, "in_ptr1": 196608, "in_ptr2": None,
                                                   "out_ptr0": 786432}
    assert opaque_block_pointers(BLOCK_PTR_SRC, name) == ["in_ptr2"]
    call = OpCall(name, [[4, 256, 768], [1024, 768], [1024, 768], [4, 256, 768], []], ["float"] * 4 + ["Int"],
                  None, ["", "", "", "", "786432"], kernel=name)
    roles = ["in_ptr0", "in_ptr1", "in_ptr2", "out_ptr0", "xnumel"]
    cost = inductor_cost(call, ["add", "embedding"], roles, BLOCK_PTR_SRC)
    assert cost.bytes == 4 * (786432 + 196608 + 1024 * 768 + 786432) == 10_223_616
    assert "block pointer shape not derivable for in_ptr2: its whole tensor" in cost.model
