"""The Python API (``tracekit.load`` → ``Analysis``) on committed real traces, and the example notebook
executed cell by cell (docs/examples/quickstart.ipynb) so that it cannot rot.

The block capture (captures/h200/block_eager.json.gz, README there): a pre-norm transformer block, bf16,
d_model 1024, 16 heads, seq 512, batch 4 (T = 2048 tokens), forward; 5 ProfilerStep steps of 11 kernels:
LN, qkv GEMM, cuDNN SDPA + its memset, out GEMM, add, LN, fc1 GEMM, GELU, fc2 GEMM, add.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pandas as pd
import pytest

from conftest import H200, ROOT, run_cli

import tracekit
from tracekit.errors import TracekitError
from tracekit.model.schema import COLUMNS

BLOCK = H200 / "block_eager.json.gz"
BLOCK_COMPILE = H200 / "block_compile.json.gz"
DDP2 = ROOT / "captures" / "cpu" / "ddp2" / "bundle"
MLX_MLP = ROOT / "captures" / "mlx" / "mlp_nn_fp32_b8"
NOTEBOOK = ROOT / "docs" / "examples" / "quickstart.ipynb"
T, D, FF = 2048, 1024, 4096          # tokens (4 × 512), model width, MLP width

GPT_MODULES = ROOT / "captures/h200/modules/gpt_train/trace.json.gz"


@pytest.fixture(scope="module")
def block():
    return tracekit.load(BLOCK)


def test_import_tracekit_loads_no_pandas_or_torch():
    code = "import sys, tracekit; print('pandas' in sys.modules, 'torch' in sys.modules, callable(tracekit.load))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["False", "False", "True"]


def test_load_stays_callable_after_the_load_stage_is_imported():
    import tracekit.load.kineto as kineto       # binds the name tracekit.load to the stage package
    assert tracekit.load.kineto is kineto
    assert tracekit.load(BLOCK).kernels.shape[0] == 55


def test_kernels_table_is_the_schema(block):
    assert list(block.kernels.columns) == [c.name for c in COLUMNS]
    assert block.kernels.shape == (55, len(COLUMNS))           # 5 steps × 11 kernels, none outside a step
    assert (block.kernels["step"] >= 0).all()


def test_steps_and_summary(block):
    steps = block.steps
    assert steps["step"].tolist() == [0, 1, 2, 3, 4] and steps["kernels"].tolist() == [11] * 5
    # each step's kernel time is the sum of that step's kernel durations in the kernel table
    by_step = block.kernels.groupby("step")["dur_us"].sum()
    assert steps["kernel_us"].tolist() == pytest.approx(by_step.tolist(), rel=1e-12)
    assert block.summary["kernels_per_step"] == [11] * 5
    assert block.summary["steps"] == 5 and block.summary["step_rule"] == "ProfilerStep"


def test_ops_table_gemm_flops_by_hand(block):
    """addmm per step: qkv 2·T·D·3D + out 2·T·D·D + fc1 2·T·D·FF + fc2 2·T·FF·D FLOPs, in 4 kernels, + one
    bias add per output element: T·(3D + D + FF + D)."""
    addmm = block.ops.set_index("op").loc["aten::addmm"]
    assert addmm["count"] == 4
    gemm = 2 * T * D * 3 * D + 2 * T * D * D + 2 * T * D * FF + 2 * T * FF * D                  # 51,539,607,552
    assert addmm["flops"] == gemm + T * (3 * D + D + FF + D)
    assert addmm["category"] == "gemm" and addmm["dtype"] == "bf16"
    layer_norm = block.ops.set_index("op").loc["aten::native_layer_norm"]
    assert layer_norm["count"] == 2                              # two LayerNorms per block
    assert block.categories.set_index("category").loc["gemm", "count"] == 4


def test_to_json_is_the_cli_json(block):
    cli = run_cli("explain", BLOCK, "--format", "json")
    assert cli.returncode == 0
    assert json.loads(block.to_json()) == json.loads(cli.stdout)


def test_diff_and_check_match_the_cli(block):
    compiled = tracekit.load(BLOCK_COMPILE)
    doc = block.diff(compiled)
    assert doc["per_step"]["kernels"]["a"] == 11 and doc["per_step"]["kernels"]["b"] == 10
    assert doc["regressions"] == []                              # fewer kernels, less time: no regression
    assert block.diff(block)["kernels"]["added"] == []
    cli = json.loads(run_cli("diff", BLOCK, BLOCK_COMPILE, "--format", "json").stdout)
    assert cli["per_step"] == doc["per_step"] and cli["by_category"] == doc["by_category"]
    rules = ROOT / "rules" / "block_compile.toml"
    assert compiled.check(rules)["ok"] is True
    failed = {r["rule"] for r in block.check(rules)["results"] if not r["ok"]}
    # eager: 11 kernels (> 10), LayerNorm not fused with the add, norm 4.1× its floor (> 2×)
    assert failed == {"kernels_per_step.max", "must_fuse[residual add + LayerNorm in one kernel]", "max_gap[norm]"}
    # a baseline that is itself: every rule holds
    assert block.check(baseline=block)["ok"] is True


def test_to_html_and_to_perfetto(block, tmp_path):
    size = block.to_html(tmp_path / "r.html")
    text = (tmp_path / "r.html").read_text()
    assert size == (tmp_path / "r.html").stat().st_size and text.lstrip().lower().startswith("<!doctype html")
    info = block.to_perfetto(tmp_path / "p.json")
    assert info["annotated"] == 55                               # every kernel's event carries tracekit's args
    events = json.loads((tmp_path / "p.json").read_text())["traceEvents"]
    assert sum(1 for e in events if isinstance(e.get("args"), dict) and "tracekit" in e["args"]) == 55


def test_multi_rank_folder():
    a = tracekit.load(DDP2)
    assert a.multi_rank and [t.metadata.get("distributedInfo", {}).get("rank") for t in a.traces] == [0, 1]
    assert a.kernels["rank"].unique().tolist() == ["rank0", "rank1"]
    assert a.summary["ranks"] == 2 and a.summary["world_size"] == 2
    assert len(a.warnings) == len(set(a.warnings))
    with pytest.raises(TracekitError, match="holds 2 traces"):
        a.to_perfetto("unused.json")


def test_mlx_graphs_are_stacked_with_their_index():
    a = tracekit.load(MLX_MLP)
    assert len(a.traces) == 2 and a.kernels["graph_index"].unique().tolist() == [0, 1]
    assert a.kernels["dur_us"].isna().all()                     # MLX graphs carry no timings
    assert set(a.summary) == {"graphs"} and len(a.summary["graphs"]) == 2


def test_modules_none_without_a_tree(block):
    assert block.modules is None


def test_module_tree_is_flattened_by_path():
    """The H200 GPT training step recorded by a user's own profiler with with_modules: one row per tree node of
    every step; each step's root holds all its kernels, and CSV --by module and the workbook carry the same."""
    from tracekit.report.export import csv_text, workbook_tables

    a = tracekit.load(GPT_MODULES)
    table = a.modules
    roots = table[table["level"] == 0]
    per_step = a.kernels.groupby("step").size()
    assert roots["kernels"].tolist() == [per_step[s] for s in roots["step"]]
    # the 4 blocks' forward: one instance per block under GPT's forward
    fwd_blocks = table[(table["step"] == roots["step"].iat[0]) & (table["kind"] == "module")
                       & table["path"].str.fullmatch(r"forward/GPT_0/Block_\d")]
    assert len(fwd_blocks) == 4 and fwd_blocks["floor_us"].nunique() == 1
    rows = pd.read_csv(io.StringIO(csv_text(a.traces, "module")))
    assert len(rows) == len(table) and rows["path"].fillna("").tolist() == table["path"].tolist()
    assert list(workbook_tables(a.traces, table)) == ["kernels", "ops", "categories", "steps", "devices", "modules"]
    assert csv_text([tracekit.load(BLOCK).trace], "module") == ""        # no tree: nothing, not an error


def test_unusable_input_raises_the_cli_message(tmp_path):
    with pytest.raises(TracekitError, match="no such file or folder"):
        tracekit.load(tmp_path / "nope.json")


def _cells(path):
    nb = json.loads(path.read_text())
    assert nb["nbformat"] == 4
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def test_quickstart_notebook_runs(monkeypatch, tmp_path):
    """Every code cell of docs/examples/quickstart.ipynb, in order, in one namespace (as a kernel would),
    from the repository root; files it writes go to a temporary folder."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TRACEKIT_EXAMPLE_OUT", str(tmp_path))
    cells = _cells(NOTEBOOK)
    assert len(cells) >= 5
    namespace: dict = {"__name__": "__main__"}
    for source in cells:
        exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    assert isinstance(namespace["a"].kernels, pd.DataFrame)


def test_check_reads_the_rules_files_baseline(tmp_path):
    """A rules file whose [baseline] names the compiled block: the eager block has 11 kernels per step
    against its 10 (a regression), the compiled block against itself none."""
    rules = tmp_path / "gate.toml"
    rules.write_text(f'[baseline]\npath = "{BLOCK_COMPILE}"\n')
    eager = tracekit.load(BLOCK).check(rules)
    assert eager["ok"] is False and eager["baseline"] == str(BLOCK_COMPILE)
    assert "baseline.kernels_per_step" in {r["rule"] for r in eager["results"] if not r["ok"]}
    assert tracekit.load(BLOCK_COMPILE).check(rules)["ok"] is True


def test_outputs_never_replace_an_input_nor_an_existing_file_unasked(tmp_path):
    """to_html / to_perfetto / to_xlsx follow the CLI's output rules: the input trace itself is refused (a new
    user's to_html(trace) had replaced a committed trace with HTML), an existing file is kept unless force."""
    import shutil
    from tracekit.errors import TracekitError
    trace = tmp_path / "t.json.gz"
    shutil.copy(BLOCK, trace)
    before = trace.read_bytes()
    a = tracekit.load(trace)
    for write in (a.to_html, a.to_perfetto):
        with pytest.raises(TracekitError, match="input"):
            write(trace)
    assert trace.read_bytes() == before
    mine = tmp_path / "r.html"
    mine.write_text("mine")
    with pytest.raises(TracekitError, match="exists"):
        a.to_html(mine)
    assert mine.read_text() == "mine"
    assert a.to_html(mine, force=True) > 1000 and mine.read_text().startswith("<!DOCTYPE html>")
