"""CLI conventions and exports, in process, on committed real traces: --version, bare `tracekit`, one-line
usage errors, --x/--no-x flags, --width and $COLUMNS, CSV --by, --xlsx, formula escaping, µs in diff,
each warning once, progress only on a terminal."""

from __future__ import annotations

import gzip
import io
import json

import pandas as pd
import pytest

from conftest import H200, ROOT, run_cli

import tracekit
from tracekit.report.export import FORMULA_START, escape_cell, workbook_tables

BLOCK = H200 / "block_eager.json.gz"
BLOCK_COMPILE = H200 / "block_compile.json.gz"
SEED = H200 / "seed_eager_b1.json.gz"
MLP3 = ROOT / "captures" / "cpu" / "mlp3"


def test_version():
    for flag in ("--version", "-V"):
        proc = run_cli(flag)
        assert proc.returncode == 0 and proc.stdout == f"tracekit {tracekit.__version__}\n" and proc.stderr == ""


def test_bare_tracekit_prints_help_on_stdout_and_exits_0():
    proc = run_cli()
    assert proc.returncode == 0 and proc.stderr == ""
    assert "Usage: tracekit" in proc.stdout
    assert all(cmd in proc.stdout for cmd in ("explain", "check", "diff", "capture", "ranks"))


@pytest.mark.parametrize("args, says", [
    (["explain"], "Missing argument 'trace'"),
    (["explain", BLOCK, "--bogus"], "No such option: --bogus"),
    (["explain", BLOCK, "--by", "nope"], "Invalid value for '--by'"),
    (["explain", "--fusion", "true", BLOCK], "--fusion is a flag and takes no value: write --fusion or --no-fusion"),
    (["explain", BLOCK, "--no-cache", "1"], "write --no-cache or --cache"),
    (["explain", BLOCK, "--top", "0"], "Invalid value for '--top'"),
    (["diff", BLOCK], "Missing argument 'b'"),
    (["nosuch"], "No such command 'nosuch'"),
])
def test_usage_errors_are_one_line_exit_2(args, says):
    proc = run_cli(*args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("tracekit: error: ") and says in proc.stderr
    assert "--help" in proc.stderr and "╭" not in proc.stderr


def test_bool_options_take_both_forms():
    plain = run_cli("explain", BLOCK, "--width", "80")
    negated = run_cli("explain", BLOCK, "--width", "80", "--no-fusion", "--no-wide", "--cache")
    assert plain.returncode == negated.returncode == 0 and plain.stdout == negated.stdout
    fusion = run_cli("explain", BLOCK, "--width", "80", "--fusion", "--no-cache")
    assert fusion.returncode == 0 and len(fusion.stdout) > len(plain.stdout)
    help_text = run_cli("explain", "--help").stdout
    assert "--no-fusion" in help_text and "--no-wide" in help_text and "--cache" in help_text
    assert run_cli("diff", BLOCK, BLOCK, "--no-fail-on-regression").returncode == 0


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_width_and_columns_when_piped(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert _widest(run_cli("explain", BLOCK).stdout) == 200              # a pipe, nothing said: 200
    assert _widest(run_cli("explain", BLOCK, "--width", "80").stdout) <= 80
    monkeypatch.setenv("COLUMNS", "100")
    out = run_cli("explain", BLOCK).stdout
    assert 80 < _widest(out) <= 100
    assert _widest(run_cli("explain", BLOCK, "--width", "80").stdout) <= 80   # --width wins over $COLUMNS


def test_csv_by_op_and_category_round_trip():
    """Per step, block_eager runs 4 addmm kernels (qkv, out, fc1, fc2), 2 LayerNorms, 2 adds, 1 GELU."""
    default = pd.read_csv(io.StringIO(run_cli("explain", BLOCK, "--format", "csv").stdout))
    assert len(default) == 55 and "dur_us" in default                    # without --by: one row per kernel
    ops = pd.read_csv(io.StringIO(run_cli("explain", BLOCK, "--format", "csv", "--by", "op").stdout))
    assert list(ops.columns[:3]) == ["op", "count", "dur_us"]
    counts = dict(zip(ops["op"], ops["count"]))
    assert counts["aten::addmm"] == 4 and counts["aten::native_layer_norm"] == 2
    assert counts["aten::add"] == 2 and counts["aten::gelu"] == 1
    assert ops["count"].sum() == 11
    # what was written is what is read back: the API's table, to the last digit
    api = tracekit.load(BLOCK).ops
    pd.testing.assert_frame_equal(ops[["op", "count", "dur_us", "floor_us", "flops"]],
                                  api[["op", "count", "dur_us", "floor_us", "flops"]], check_exact=True)
    cats = pd.read_csv(io.StringIO(run_cli("explain", BLOCK, "-f", "csv", "--by", "category").stdout))
    assert cats.set_index("category").loc["gemm", "count"] == 4
    kernels = pd.read_csv(io.StringIO(run_cli("explain", BLOCK, "-f", "csv", "--by", "kernel").stdout))
    assert kernels["count"].sum() == 11 and kernels.columns[0] == "name"


@pytest.fixture(scope="module")
def formula_trace(tmp_path_factory):
    """The real seed_eager_b1 capture with its two kernels renamed to text a spreadsheet would run as a
    formula (the names are synthetic; every other byte is the capture's)."""
    doc = json.loads(gzip.decompress(SEED.read_bytes()))
    renamed = ["=HYPERLINK(\"http://x\",\"y\")", "@SUM(A1:A2)"]
    names: dict[str, str] = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            if e["name"] not in names:
                names[e["name"]] = renamed[len(names)]
            e["name"] = names[e["name"]]
    path = tmp_path_factory.mktemp("formula") / "trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


@pytest.mark.parametrize("text", ["=1+1", "+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_formula_cells_are_escaped(text):
    assert escape_cell(text) == "'" + text
    assert escape_cell("aten::add") == "aten::add" and escape_cell(-1) == -1    # numbers stay numbers
    assert text.startswith(FORMULA_START)


def test_csv_escapes_formula_names(formula_trace):
    rows = pd.read_csv(io.StringIO(run_cli("explain", formula_trace, "--format", "csv").stdout))
    assert set(rows["name"]) == {"'=HYPERLINK(\"http://x\",\"y\")", "'@SUM(A1:A2)"}
    assert (rows["step"] >= 0).all() and rows["dur_us"].dtype == float        # numbers are not escaped
    grouped = run_cli("explain", formula_trace, "--format", "csv", "--by", "kernel").stdout
    assert all(not line.startswith(FORMULA_START) for line in grouped.splitlines())


def test_xlsx_sheets_round_trip(tmp_path, formula_trace):
    pytest.importorskip("openpyxl")
    out = tmp_path / "block.xlsx"
    proc = run_cli("explain", BLOCK, "--xlsx", out, "--format", "json")
    assert proc.returncode == 0 and f"wrote {out}" in proc.stderr and json.loads(proc.stdout)["kernels"]
    sheets = pd.read_excel(out, sheet_name=None)
    assert list(sheets) == ["kernels", "ops", "categories", "steps", "devices"]
    assert len(sheets["kernels"]) == 55 and sheets["steps"]["kernels"].tolist() == [11] * 5
    assert sheets["devices"].loc[0, "spec"] == "h200" and sheets["devices"].loc[0, "device"] == "NVIDIA H200"
    written = workbook_tables(tracekit.load(BLOCK).traces)
    for name in ("ops", "steps"):
        pd.testing.assert_frame_equal(sheets[name][["count", "dur_us"] if name == "ops" else ["kernels", "kernel_us"]],
                                      written[name][["count", "dur_us"] if name == "ops" else ["kernels", "kernel_us"]],
                                      check_dtype=False)
    # formula-like kernel names are text cells with a leading ', not formulas
    import openpyxl
    tracekit.load(formula_trace).to_xlsx(tmp_path / "f.xlsx")
    ws = openpyxl.load_workbook(tmp_path / "f.xlsx")["kernels"]
    names = {c.value for c in ws["B"][1:]}
    assert names == {"'=HYPERLINK(\"http://x\",\"y\")", "'@SUM(A1:A2)"}
    assert all(c.data_type == "s" for c in ws["B"])


def test_diff_prints_microseconds():
    text = run_cli("diff", BLOCK, BLOCK_COMPILE).stdout
    assert "kernel time (µs)" in text and "µs/step" in text
    assert " us" not in text and "(us)" not in text


def test_each_warning_printed_once():
    """A CPU-only trace warns that it has no floors; diff of the trace with itself reads it once and says so once,
    and explain says each of its warnings once."""
    diff = run_cli("diff", MLP3, MLP3)
    lines = diff.stderr.splitlines()
    assert diff.returncode == 0 and len(lines) == len(set(lines))
    assert sum("CPU-only trace: no floors" in line for line in lines) == 1
    explain = run_cli("explain", MLP3).stderr.splitlines()
    assert len(explain) == len(set(explain)) and any("CPU-only trace" in line for line in explain)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal(monkeypatch):
    from tracekit.cli import app, progress
    from tracekit.ranks.run import ranks_progress

    monkeypatch.setattr(progress, "PROGRESS_BYTES", 1)         # the block capture counts as a large input
    quiet = io.StringIO()
    with app._loading(str(BLOCK), quiet):
        pass
    assert quiet.getvalue() == ""
    terminal = _Terminal()
    with app._loading(str(BLOCK), terminal):
        pass
    assert "loading block_eager.json.gz" in terminal.getvalue()
    with ranks_progress(4, io.StringIO()) as done:
        assert done(7) == 7
    terminal = _Terminal()
    with ranks_progress(4, terminal) as done:
        for r in range(4):
            done(r)
    assert "ranks analysed" in terminal.getvalue()
    # in a pipe (the test runner's stderr), explain of a multi-rank folder says nothing but its warnings
    proc = run_cli("explain", ROOT / "captures" / "cpu" / "ddp2" / "bundle", "--workers", "1", "--format", "json")
    assert proc.returncode == 0 and all(line.startswith("tracekit: warning: ") for line in proc.stderr.splitlines())


def test_capture_step_counter_only_on_a_terminal():
    from tracekit.capture.progress import StepTicker

    piped = io.StringIO()
    ticker = StepTicker(False, 3, piped, after_s=0, every_s=0)
    ticker.tick(1), ticker.clear()
    assert piped.getvalue() == ""
    terminal = _Terminal()
    ticker = StepTicker(False, 3, terminal)
    ticker.tick(1)
    assert terminal.getvalue() == ""                      # a fast capture (under 2 s so far) shows nothing
    ticker = StepTicker(False, 3, terminal, after_s=0, every_s=0)
    ticker.tick(1), ticker.tick(2)
    assert "recorded step 2/3" in terminal.getvalue()
    ticker.clear()
    assert terminal.getvalue().endswith("\r\x1b[K")
    quiet = _Terminal()
    StepTicker(True, 3, quiet, after_s=0, every_s=0).tick(1)
    assert quiet.getvalue() == ""


def test_xlsx_without_openpyxl_is_one_line(monkeypatch, tmp_path):
    import sys
    monkeypatch.setitem(sys.modules, "openpyxl", None)          # as if the xlsx extra were not installed
    proc = run_cli("explain", BLOCK, "--xlsx", tmp_path / "x.xlsx")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "tracekit[xlsx]" in proc.stderr
    assert not (tmp_path / "x.xlsx").exists()


def test_a_table_piped_into_head_exits_0():
    """`tracekit explain T | head -1`: the reader closes the pipe; that is no failed check (rich's own
    broken-pipe handler exited 1). A real process, its pipe closed before it writes."""
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "tracekit", "explain", str(H200 / "block_eager.json.gz"),
                             "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()                   # closed before the table is written (loading takes ~1 s)
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert b"Traceback" not in err
