"""Issue 27, bounded memory and manners: execution-trace node ids do not size arrays, a trace of many
steps costs no per-step fusion work for steps without kernels, exit 2 after warnings is one line,
``explain DIR`` reads only a trace-like JSON, a rules file's baseline stays in its folder.

Inputs: the committed real captures/h200/models/sdpa_backends/et.json.gz (a PyTorch execution trace) and
seed_eager_b1.json.gz, changed by the test; HTA's CPU-only trace; one synthetic trace of 2,000
ProfilerSteps (labelled where it is made)."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from conftest import H200, PEERS, run_cli, traced
from test_robustness import EAGER, _one_line_error

from tracekit.load.execution_trace import _Tree, read_execution_trace

SDPA_ET = H200 / "models" / "sdpa_backends" / "et.json.gz"
CPU_ONLY = PEERS / "hta/cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"


def test_a_node_id_of_2_to_the_31_does_not_size_an_array(tmp_path):
    doc = json.loads(gzip.decompress(SDPA_ET.read_bytes()))
    parents = {n.get("ctrl_deps") for n in doc["nodes"]}
    leaf = next(n for n in reversed(doc["nodes"]) if n["id"] not in parents)       # no node's parent
    leaf["id"] = 2 ** 31                              # one id far past the others
    path = tmp_path / "et.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    changed, _, peak = traced(read_execution_trace, path)
    assert peak < 200 << 20                          # the dense array for id 2^31 was 32 GiB (16 B a node)
    original = read_execution_trace(SDPA_ET)
    assert changed.nodes.keys() == original.nodes.keys()
    assert {k: n.within for k, n in changed.nodes.items()} == {k: n.within for k, n in original.nodes.items()}


def test_the_node_tree_keeps_dense_ids_in_arrays_and_far_ones_aside():
    tree = _Tree()
    tree.add(0, -1, 10)
    tree.add(1, 0, 11)
    tree.add(2 ** 40, 1, 12)                         # its parent chain: node 1 (rf 11), node 0 (rf 10)
    tree.add(2 ** 70, 1, 13)                         # past int64: no id
    assert len(tree.parent) == 2 and tree.within(2 ** 40) == (11, 10)


def _many_steps(path, n: int):
    """SYNTHETIC: n ProfilerStep annotations and one CPU op (the campaign's 100k-step trace, smaller)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": i * 100, "dur": 90,
               "pid": 1, "tid": 1} for i in range(n)]
    events.append({"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 5, "dur": 5, "pid": 1, "tid": 1,
                   "args": {"External id": 1}})
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_many_steps_without_kernels_cost_one_fusion_pass(tmp_path, monkeypatch):
    path = _many_steps(tmp_path / "steps.json", 2000)
    from tracekit.fusion import dataflow
    calls = []
    real = dataflow.step_fusion
    monkeypatch.setattr(dataflow, "step_fusion", lambda *a, **k: calls.append(1) or real(*a, **k))
    proc = run_cli("explain", path, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert len(doc["steps"]) == 2000 and len(doc["summary"]["fusion_per_step"]) == 2000
    assert doc["steps"][0]["kernels"] == 1 and all(s["kernels"] == 0 for s in doc["steps"][1:])
    assert doc["steps"][1]["window_us"] == 0.0 and doc["steps"][1]["gap"] is None
    assert len(calls) == 2                           # step 0 (its op) and one for every empty step


def test_exit_2_after_warnings_is_one_line_and_warnings_print_once(tmp_path):
    # HTA's CPU-only trace warns twice (no device kernels; no floors); --perfetto then refuses it
    _one_line_error(run_cli("explain", CPU_ONLY, "--perfetto", tmp_path / "p.json"), "--perfetto annotates")
    proc = run_cli("diff", CPU_ONLY, CPU_ONLY, "-f", "json")        # both sides warn the same two lines
    assert proc.returncode == 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == len(set(lines)) == 2 and all(line.startswith("tracekit: warning: ") for line in lines)


def test_explain_on_a_folder_reads_only_a_trace_like_json(tmp_path):
    (tmp_path / "config.json").write_text('{"model": "llama", "layers": 32}')
    _one_line_error(run_cli("explain", tmp_path), "folder holds no trace", "config.json", "traceEvents")
    (tmp_path / "config.json").unlink()
    shutil.copy(EAGER, tmp_path / "run.json.gz")
    doc = json.loads(run_cli("explain", tmp_path, "-f", "json").stdout)
    assert len(doc["steps"]) == 5


@pytest.mark.parametrize("where", ["../outside.json.gz", "/etc/hostname", "link.json.gz"])
def test_a_rules_file_baseline_stays_in_its_folder(tmp_path, where):
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    shutil.copy(EAGER, tmp_path / "outside.json.gz")
    (rules_dir / "link.json.gz").symlink_to(tmp_path / "outside.json.gz")     # a link leading out
    rules = rules_dir / "r.toml"
    rules.write_text(f'[baseline]\npath = "{where}"\n')
    _one_line_error(run_cli("check", EAGER, "--rules", rules), "outside the rules file's folder", "--baseline")
    assert run_cli("check", EAGER, "--rules", rules, "--baseline", tmp_path / "outside.json.gz").returncode == 0
    shutil.copy(EAGER, rules_dir / "base.json.gz")
    rules.write_text('[baseline]\npath = "base.json.gz"\n')
    assert run_cli("check", EAGER, "--rules", rules).returncode == 0          # the same trace: nothing regressed


def test_a_folder_of_unrelated_json_files_is_no_run_of_ranks(tmp_path):
    """`explain /tmp`-like folders: JSON files without traceEvents are neither ranks nor a trace (three
    unrelated files had been read as the ranks of one run, exit 0); beside one real trace they are left out
    (the H200 block capture, whatever config.json sits next to it)."""
    import shutil
    from conftest import H200, run_cli
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "x.json").write_text('{"a": 1}')
    (junk / "y.json").write_text("[1, 2]")
    proc = run_cli("explain", junk)
    assert proc.returncode == 2 and "holds no trace" in proc.stderr and len(proc.stderr.splitlines()) == 1
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(H200 / "block_eager.json.gz", run)
    (run / "config.json").write_text('{"lr": 0.1}')
    proc = run_cli("explain", run, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["trace"].endswith("block_eager.json.gz") and doc["summary"]["kernels_per_step"] == [11] * 5


def test_the_document_of_many_empty_steps_takes_less_than_3x_the_input(tmp_path):
    """Issue 27's memory bound on its 100k-step trace, at 20k steps: building the explain document peaks at
    under 3x the input's bytes (a dict per step and per fusion record took 15x: 1.9 KB a step against
    the input's 128 B); its JSON, written in pieces, is the bytes the whole document gives."""
    import orjson

    from tracekit.analyze import analyze_path
    from tracekit.report.diagnosis import document

    path = _many_steps(tmp_path / "steps.json", 20_000)
    [trace] = analyze_path(path)
    doc, _, peak = traced(document, trace)
    assert peak < 3 * path.stat().st_size, (peak, path.stat().st_size)
    from tracekit.model.rows import plain
    from tracekit.outputs import ROWS_PER_PIECE, json_bytes, json_chunks
    option = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
    pieces = list(json_chunks(doc, option))
    whole = json_bytes(plain(doc), option)
    assert b"".join(pieces) == whole and max(map(len, pieces)) < len(whole) / 10
    assert len(orjson.loads(whole)["steps"]) == 20_000 > ROWS_PER_PIECE
    for real in (EAGER, H200 / "block_eager.json.gz"):            # real traces: one piece per kept row set
        [t] = analyze_path(real)
        d = document(t)
        assert b"".join(json_chunks(d, option)) == json_bytes(plain(d), option)


def test_many_empty_steps_build_no_module_tree_each(tmp_path, monkeypatch):
    """explain --by module on 20k SYNTHETIC steps, one of them holding the trace's one op: one tree is built
    (step 0's); every empty step's JSON and CSV row comes from one template (100k such steps held 100k
    trees: 90 MB and 30 s for 13 MB of JSON)."""
    path = _many_steps(tmp_path / "steps.json", 20_000)
    from tracekit.fusion import tree
    built, empty = [], []
    real_step, real_empty = tree.step_tree, tree.empty_tree
    monkeypatch.setattr(tree, "step_tree", lambda *a, **k: built.append(a[1]) or real_step(*a, **k))
    monkeypatch.setattr(tree, "empty_tree", lambda *a, **k: empty.append(1) or real_empty(*a, **k))
    proc = run_cli("explain", path, "--by", "module", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    steps = json.loads(proc.stdout)["modules"]["steps"]
    assert len(steps) == 20_000 and [s["step"] for s in steps[:3]] == [0, 1, 2]
    assert steps[0]["tree"]["kernels"] == 1 and steps[19_999]["tree"]["name"] == "ProfilerStep#19999"
    assert built == [0] and len(empty) <= 1                   # the template's one
    built.clear()
    empty.clear()
    proc = run_cli("explain", path, "--by", "module", "-f", "csv")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 1 + 20_000 + 4     # header, a root a step, step 0: phase, (no module), op, kernel
    assert built == [0] and not empty


def test_module_rows_of_empty_steps_equal_the_per_step_trees(tmp_path):
    """The template rows (``StepTrees``) against a tree built per step by ``step_tree``, on 40 SYNTHETIC steps:
    the same ``modules`` JSON and CSV rows, the same median step."""
    from tracekit.analyze import analyze_path
    from tracekit.fusion.tree import module_trees, step_tree
    from tracekit.model.rows import plain
    from tracekit.outputs import json_bytes
    from tracekit.report.tree_view import modules_csv, modules_document, node_rows

    [trace] = analyze_path(_many_steps(tmp_path / "steps.json", 40))
    trees, scopes = module_trees(trace)
    per_step = [step_tree(trace, k, scopes) for k in trace.steps.indices()]
    assert len(trees.built) == 1 and len(per_step) == len(trees) == 40
    lazy, eager = modules_document(trace, trees, scopes), modules_document(trace, per_step, scopes)
    assert json_bytes(plain(lazy)) == json_bytes(eager)
    assert list(node_rows(trace, trees)) == list(node_rows(trace, per_step))
    assert modules_csv(trace, trees) == modules_csv(trace, per_step)
    assert [t.signature for t in trees] == [t.signature for t in per_step]


def test_the_xlsx_steps_sheet_holds_no_cell_object_per_cell(tmp_path):
    """--xlsx writes its sheets through openpyxl's write-only workbook a few thousand rows at a time, the
    steps sheet made a part at a time from the step rows (``StepSheet``): 5k SYNTHETIC steps (18 columns)
    peak at 48 bytes a cell (the sheets made included), pandas' to_excel of the frames at 347; every
    sheet's values (and their types) are what to_excel writes, on the synthetic trace and a real one."""
    import openpyxl
    import pandas as pd

    from tracekit.analyze import analyze_path
    from tracekit.report.export import _plain, escape_cells, workbook_tables, write_xlsx

    [trace] = analyze_path(_many_steps(tmp_path / "steps.json", 5_000))
    cells = sum(df.size for df in workbook_tables([trace]).values())
    write_xlsx(workbook_tables([trace], frames=False), tmp_path / "new.xlsx")   # openpyxl's writer imported
    _, _, peak = traced(lambda: write_xlsx(workbook_tables([trace], frames=False), tmp_path / "new.xlsx"))
    assert cells > 90_000 and peak < 80 * cells, (peak, cells)
    for t in (trace, analyze_path(EAGER)[0]):
        write_xlsx(workbook_tables([t], frames=False), tmp_path / "new.xlsx")
        with pd.ExcelWriter(tmp_path / "old.xlsx", engine="openpyxl") as writer:   # the writer before
            for name, df in workbook_tables([t]).items():
                escape_cells(_plain(df)).to_excel(writer, sheet_name=name, index=False)
        new, old = (openpyxl.load_workbook(tmp_path / f) for f in ("new.xlsx", "old.xlsx"))
        assert new.sheetnames == old.sheetnames
        for name in old.sheetnames:
            got, want = list(new[name].values), list(old[name].values)
            assert got == want and [list(map(type, r)) for r in got] == [list(map(type, r)) for r in want], name


def test_the_module_scan_of_many_steps_holds_one_event_at_a_time(tmp_path):
    """``read_scopes`` reads the file again for the module events: one event decoded at a time (RawEvents)
    peaks under 3x the input's bytes on 20k SYNTHETIC steps (every event as a dict took 17x); a real trace's
    places are those of the events read whole."""
    from tracekit.analyze import analyze_path
    from tracekit.load.scopes import _events, read_scopes

    path = _many_steps(tmp_path / "steps.json", 20_000)
    [trace] = analyze_path(path)
    scopes, _, peak = traced(read_scopes, trace)
    assert peak < 3 * path.stat().st_size, (peak, path.stat().st_size)
    assert scopes.module_events == 0 and len(scopes.places) == 1
    from conftest import ROOT
    [real] = analyze_path(ROOT / "captures/cpu/gpt4_train/trace.json.gz", device="cpu")
    lazy, whole = read_scopes(real), read_scopes(real, _events(real.path))
    assert lazy.places == whole.places and lazy.module_events == whole.module_events > 0
