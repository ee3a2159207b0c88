"""`tracekit capture` on CPU: real scripts under the profiler, the bundle they leave, exit codes, errors."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, explain_json, run_cli
from tracekit.load.kineto import load_trace
from tracekit.load.mlx import load_mlx

torch = pytest.importorskip("torch")
SCRIPTS = ROOT / "tests" / "scripts"
SMALL = SCRIPTS / "small_model.py"


def events(bundle: Path) -> list[dict]:
    return json.loads(gzip.decompress((bundle / "trace.json.gz").read_bytes()))["traceEvents"]


def meta(bundle: Path) -> dict:
    return json.loads((bundle / "meta.json").read_text())


def steps_in(bundle: Path) -> list[str]:
    return sorted(e["name"] for e in events(bundle) if str(e.get("name", "")).startswith("ProfilerStep#")
                  and e.get("cat") == "user_annotation")


def our_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tracekit:")]


@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("cap") / "small"
    proc = run_cli("capture", SMALL, "-o", out, "--", "--iters", "3")
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_small_model_bundle_holds_ops_shapes_and_steps(small_bundle):
    out, proc = small_bundle
    # the script ran as `python small_model.py --iters 3`: own argv, __main__, output untouched
    assert "argv=['--iters', '3'] out=(4, 32) name=__main__" in proc.stdout
    assert sorted(p.name for p in out.iterdir()) == ["et.json.gz", "meta.json", "trace.json.gz"]
    ev = events(out)
    dims = {e["name"]: e["args"].get("Input Dims") for e in ev if e.get("cat") == "cpu_op"}
    assert dims["aten::addmm"] == [[32], [4, 512], [512, 32], [], []]
    assert dims["aten::linear"] == [[4, 512], [32, 512], [32]]
    assert dims["aten::conv2d"][:3] == [[4, 3, 8, 8], [8, 3, 3, 3], [8]]
    assert dims["aten::softmax"][0] == [4, 32]
    assert steps_in(out) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    m = meta(out)
    assert m["framework"] == "torch" and m["step_rule"] == "module:Net" and m["exit_code"] == 0
    assert m["steps_recorded"] == 3 and m["first_call_s"] > 0 and m["args"] == ["--iters", "3"]
    assert m["torch_version"] == torch.__version__ and m["device_name"].startswith("CPU")
    assert "step rule: each call of the root module Net starts a step" in proc.stderr


def test_explain_bundle_costs_linear_and_conv(small_bundle):
    out, _ = small_bundle
    doc = explain_json(out)
    assert [s["name"] for s in doc["steps"]] == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    rows = {(k["op"], k["step"]): k for k in doc["kernels"]}
    for step in range(3):
        linear, conv = rows[("aten::linear", step)], rows[("aten::conv2d", step)]
        assert linear["flops"] == 2 * 4 * 512 * 32 + 4 * 32               # 2·M·N·K, M=4 N=32 K=512, + M·N bias adds
        assert conv["flops"] == 2 * 4 * 8 * 8 * 8 * 3 * 3 * 3 + 4 * 8 * 8 * 8  # 2·N·Cout·H·W·Cin·kh·kw + bias adds


def test_exit_code_3_is_passed_on_with_the_bundle_written(tmp_path):
    proc = run_cli("capture", SMALL, "-o", tmp_path / "b", "--", "--exit", "3")
    assert proc.returncode == 3
    assert meta(tmp_path / "b")["exit_code"] == 3
    trace = load_trace(tmp_path / "b")
    assert trace.step_rule == "ProfilerStep" and len(trace.steps) == 3


def test_script_that_raises_shows_its_traceback_and_leaves_a_usable_bundle(tmp_path):
    proc = run_cli("capture", SMALL, "-o", tmp_path / "b", "--", "--raise")
    assert proc.returncode == 1
    assert "Traceback (most recent call last):" in proc.stderr
    assert 'small_model.py", line' in proc.stderr
    assert "ValueError: deliberate failure after the model ran" in proc.stderr
    assert "capture_cli.py" not in proc.stderr                # our own frames are left out
    assert meta(tmp_path / "b")["exit_code"] == 1
    assert len(load_trace(tmp_path / "b").steps) == 3


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("setup, needle", [
    (lambda d: d / "missing.py", "no such file"),
    (lambda d: _write(d / "a.out", b"\x7fELF\x02\x01\x01\x00\x00"), "not a Python script (binary"),
    (lambda d: _write(d / "bad.py", b"def f(:\n    pass\n"), "not valid Python"),
    (lambda d: d, "is a folder"),
])
def test_unusable_scripts_exit_2_with_one_line(tmp_path, setup, needle):
    proc = run_cli("capture", setup(tmp_path), "-o", tmp_path / "out")
    assert proc.returncode == 2
    assert len(our_lines(proc.stderr)) == 1 and needle in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_existing_output_is_refused_unless_force_and_a_bundle(tmp_path):
    out = tmp_path / "b"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    proc = run_cli("capture", SMALL, "-o", out)
    assert proc.returncode == 2 and "already exists (use --force" in proc.stderr
    proc = run_cli("capture", SMALL, "-o", out, "--force")
    assert proc.returncode == 2 and "not a tracekit bundle" in proc.stderr
    assert (out / "keep.txt").read_text() == "mine"
    (out / "keep.txt").unlink()
    assert run_cli("capture", SMALL, "-o", out, "--force").returncode == 0
    assert run_cli("capture", SMALL, "-o", out, "--force", "--", "--iters", "2").returncode == 0
    assert meta(out)["steps_recorded"] == 2


def test_bad_numbers_exit_2(tmp_path):
    for opt in (["--steps", "0"], ["--warmup", "-1"], ["--step-fn", "nocolon"]):
        proc = run_cli("capture", SMALL, "-o", tmp_path / "b", *opt)
        assert proc.returncode == 2 and len(our_lines(proc.stderr)) == 1, (opt, proc.stderr)
        assert not (tmp_path / "b").exists()


def test_step_fn_in_the_script_with_warmup_and_steps(tmp_path):
    out = tmp_path / "b"
    proc = run_cli("capture", SCRIPTS / "step_fn.py", "-o", out, "--step-fn", "step_fn:train_step",
                   "--warmup", "1", "--steps", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    assert steps_in(out) == ["ProfilerStep#1", "ProfilerStep#2"]      # call 0 warm-up, calls 3.. unprofiled
    m = meta(out)
    assert (m["step_rule"], m["steps_begun"], m["steps_recorded"]) == ("step-fn:step_fn:train_step", 4, 2)
    mm = [e["args"]["Input Dims"] for e in events(out) if e.get("name") == "aten::mm"]
    assert mm == [[[16, 64], [64, 32]]] * 2


def test_step_fn_in_an_imported_module(tmp_path):
    out = tmp_path / "b"
    proc = run_cli("capture", SCRIPTS / "uses_lib.py", "-o", out, "--step-fn", "steplib:Worker.work")
    assert proc.returncode == 0, proc.stderr
    assert steps_in(out) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    proc = run_cli("capture", SCRIPTS / "uses_lib.py", "-o", tmp_path / "c", "--step-fn", "steplib:nothing")
    assert proc.returncode == 2 and "has no function nothing" in proc.stderr


def test_script_with_its_own_profiler_keeps_its_steps(tmp_path):
    out = tmp_path / "b"
    proc = run_cli("capture", SCRIPTS / "own_profiler.py", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "own handler called 1 time(s)" in proc.stdout          # the script's handler still runs
    assert meta(out)["step_rule"] == "profiler.step"
    assert steps_in(out) == ["ProfilerStep#2", "ProfilerStep#3"]   # wait=1, warmup=1, active=2
    assert any(e.get("name") == "aten::mm" and e["args"].get("Input Dims") == [[8, 32], [32, 32]]
               for e in events(out))                               # shapes recorded although it asked for none


def test_default_output_folder_and_quiet(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tracekit", "capture", str(SMALL), "--quiet"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "small_model.tracekit" / "trace.json.gz").is_file()
    assert our_lines(proc.stderr) == []


def test_python_api_steps_and_warmup(tmp_path):
    import tracekit

    lin = torch.nn.Linear(16, 8)
    x = torch.randn(2, 16)
    with tracekit.capture(out=tmp_path / "api", warmup=1, steps=2, quiet=True) as cap:
        for _ in range(4):
            lin(x)
            cap.step()
    assert steps_in(tmp_path / "api") == ["ProfilerStep#1", "ProfilerStep#2"]
    m = meta(tmp_path / "api")
    assert m["step_rule"] == "cap.step()" and m["steps_recorded"] == 2 and m["exit_code"] == 0
    addmm = [e["args"]["Input Dims"] for e in events(tmp_path / "api") if e.get("name") == "aten::addmm"]
    assert addmm == [[[8], [2, 16], [16, 8], [], []]] * 2
    assert torch.profiler.profile.__name__ == "profile" and torch.profiler.profile.__module__ == "torch.profiler.profiler"


def test_importing_the_cli_module_does_not_import_torch():
    code = "import sys, tracekit.capture.script, tracekit.cli.app; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def test_mlx_script_goes_to_the_mlx_capture(tmp_path):
    """Was one test passing on both branches (mlx importable or not); now each branch is its own test."""
    pytest.importorskip("mlx.core")
    script = tmp_path / "m.py"
    script.write_text("import mlx.core as mx\nmx.eval(mx.arange(8) * 2)\nprint('mlx script')\n")
    proc = run_cli("capture", script, "-o", tmp_path / "b")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "mlx script\n" and meta(tmp_path / "b")["framework"] == "mlx"
    [graph] = load_mlx(tmp_path / "b")                     # one mx.eval: one graph, arange then multiply
    assert list(graph.kernels["name"]) == ["Arange", "Multiply"]


def test_mlx_script_without_mlx_exits_2_with_one_line(tmp_path):
    script = tmp_path / "m.py"
    script.write_text("import mlx.core as mx\n")
    code = ("import sys; sys.modules['mlx'] = None; from tracekit.cli.app import main; "    # mlx not importable
            "sys.argv = ['tracekit', 'capture', *sys.argv[1:]]; main()")
    proc = subprocess.run([sys.executable, "-c", code, str(script), "-o", str(tmp_path / "b")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and our_lines(proc.stderr) == [f"tracekit: {script}: imports mlx, which is not "
                                                               "installed here"]
    assert not (tmp_path / "b").exists()


def test_copy_kernel_files_keeps_sources_and_marks_vanished_ones(tmp_path, monkeypatch):
    """Inductor sources live under /tmp and vanish: the bundle keeps a copy of each one still there."""
    from tracekit.bundle import copy_kernel_files
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    src = tmp_path / ("c" + "a1" * 26 + ".py")
    src.write_text("def triton_poi_fused_relu_0(in_out_ptr0, xnumel, XBLOCK): pass\n")
    kdir = tmp_path / "bundle" / "kernels"
    kdir.parent.mkdir()
    gone = tmp_path / ("c" + "b2" * 26 + ".py")
    copied = copy_kernel_files({str(src), str(gone)}, kdir)
    assert copied == {str(src): src.name, str(gone): None}
    assert (kdir / src.name).read_text() == src.read_text()


@pytest.mark.parametrize("source", ["from steps import train_step\n", "import steps as train_step\n",
                                    "def make():\n    return len\ntrain_step = make()\n"])
def test_step_fn_the_script_imports_or_assigns_is_wrapped(source):
    """--step-fn script:train_step where the script binds train_step by import or assignment (the
    models2 scripts import theirs from _common.py): wrapped right after the binding statement."""
    from tracekit.capture.script import WRAP_NAME, wrap_in_script
    code = wrap_in_script(source + "after = train_step\n", Path("script.py"), "train_step")
    assert code is not None
    sys.modules.setdefault("steps", type(sys)("steps")).train_step = len
    ns = {WRAP_NAME: lambda fn: ("wrapped", fn)}
    exec(code, ns)
    assert ns["train_step"][0] == "wrapped" and ns["after"] is ns["train_step"]
    assert wrap_in_script("other = 1\n", Path("script.py"), "train_step") is None
