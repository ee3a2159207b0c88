"""MLX graphs: capture real scripts on the CPU backend, parse the dot files, model and cost them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

mx = pytest.importorskip("mlx.core")

from conftest import ROOT, explain_json

from tracekit.capture.mlx import NO_COMPILER, capture_mlx_script
from tracekit.errors import TracekitError
from tracekit.classify.categories import classify
from tracekit.load.mlx import fused_parts, load_mlx, parse_dot, read_dot

SCRIPTS = Path(__file__).parent / "scripts"
COMMITTED = ROOT / "captures" / "mlx"
KINETO = {"fp32": "float", "fp16": "c10::Half", "bf16": "c10::BFloat16"}
ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2}
B = 16


def capture(tmp: Path, script: str, *args: str) -> Path:
    out = tmp / "bundle"
    assert capture_mlx_script(str(SCRIPTS / script), list(args), out, quiet=True) == 0
    return out


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> dict:
    """Seed Y = maximum(X @ W.T + b, 0), lazy and compiled, in three dtypes: the Y graph of each."""
    found = {}
    for mode in ("lazy", "compile"):
        for dtype in ("fp32", "fp16", "bf16"):
            out = capture(tmp_path_factory.mktemp(f"{mode}_{dtype}"), "mlx_seed.py",
                          "--mode", mode, "--dtype", dtype, "--batch", str(B))
            found[mode, dtype] = (out, load_mlx(out))
    return found


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_seed_lazy_is_three_kernels_compiled_is_two(seeds, dtype):
    lazy, compiled = seeds["lazy", dtype][1][1], seeds["compile", dtype][1][1]
    assert list(lazy.kernels["name"]) == ["Matmul", "Add", "Maximum"]
    assert list(compiled.kernels["name"]) == ["Matmul", "CompiledBroadcastAddBroadcastMaximum"]
    assert list(lazy.kernels["fused_ops"]) == [["matmul"], ["add"], ["maximum"]]
    assert list(compiled.kernels["fused_ops"]) == [["matmul"], ["add", "maximum"]]
    assert list(classify(lazy.kernels.copy())["category"]) == ["gemm", "elementwise", "elementwise"]
    assert lazy.kernels["category"].isna().all()            # the loader leaves classifying to classify
    assert lazy.metadata["mlx"]["views"] == {"Transpose": 1, "Broadcast": 2}
    assert compiled.metadata["mlx"]["views"] == {"Transpose": 1}
    for trace in (lazy, compiled):
        mm = trace.kernels.iloc[0]
        assert mm["op"] == "aten::mm"
        assert mm["op_dims"] == [[B, 1024], [1024, 1024]]
        assert mm["op_types"] == [KINETO[dtype]] * 2
        assert mm["kind"] == "kernel" and mm["device"] == -1
        assert trace.kernels["dur_us"].isna().all()
        assert any("no timings" in w for w in trace.warnings)
    fused = compiled.kernels.iloc[1]
    assert fused["op"] == "mlx::compiled"
    assert fused["op_dims"] == [[B, 1024], [1024], [], [B, 1024]]        # X@Wᵀ, b, the 0, then Y
    assert fused["op_concrete"] == ["in", "in", "in", "out"]


def test_seed_explain_json_flops_and_floors(seeds):
    """End to end through ``tracekit explain --format json``: FLOPs 2·B·1024·1024, floors on the cpu spec."""
    for mode, kernels in (("lazy", 3), ("compile", 2)):
        out = explain_json(seeds[mode, "fp32"][0])
        assert isinstance(out["graphs"], list) and len(out["graphs"]) == 3     # inputs, Y, the .item()
        graph = out["graphs"][1]
        assert graph["summary"]["kernels_per_step"] == [kernels]
        assert graph["summary"]["kernel_us_per_step"] == [None]
        mm = graph["kernels"][0]
        assert mm["flops"] == 2 * B * 1024 * 1024
        assert mm["bytes"] == 4 * (B * 1024 + 1024 * 1024 + B * 1024)
        # by hand on the cpu spec (fp32 0.155 TFLOP/s = 155,000 FLOP/µs, 25.3 GB/s = 25,300 bytes/µs):
        # 33,554,432 FLOPs / 155,000 = 216.4802 µs > 4,325,376 bytes / 25,300 = 170.963 µs: compute-bound
        # (was max(flops / spec peak, bytes / spec bandwidth) read from the same spec object the code uses)
        assert mm["floor_us"] == pytest.approx(216.48020645, rel=1e-8)
        assert mm["bound"] == "compute"
        assert mm["dur_us"] is None and mm["gap"] is None
        total = sum(k["floor_us"] for k in graph["kernels"])
        assert graph["summary"]["floor_us_per_step"][0] == pytest.approx(total)
    fused = explain_json(seeds["compile", "bf16"][0])["graphs"][1]["kernels"][1]
    assert fused["flops"] == 2 * B * 1024                                   # add + maximum per element
    assert fused["bytes"] == 2 * (B * 1024 + 1024 + 1 + B * 1024)           # read X@Wᵀ, b, 0; write Y


def test_mlp_lazy_compiled_and_nn(tmp_path):
    lazy = load_mlx(capture(tmp_path / "l", "mlx_mlp.py", "--mode", "lazy"))[1].kernels
    comp = load_mlx(capture(tmp_path / "c", "mlx_mlp.py", "--mode", "compile"))[1].kernels
    assert list(lazy["name"]) == ["Matmul", "Add", "Maximum"] * 2
    assert list(comp["name"]) == ["Matmul", "CompiledBroadcastAddBroadcastMaximum"] * 2
    assert [k["op_dims"] for _, k in comp.iloc[[0, 2]].iterrows()] == [[[8, 1024], [1024, 2048]],
                                                                       [[8, 2048], [2048, 1024]]]
    # mlx.nn: Linear is AddMM, gelu is compiled by MLX itself even in a lazy script
    nn = load_mlx(capture(tmp_path / "n", "mlx_mlp.py", "--mode", "nn"))[1]
    assert [n[:8] for n in nn.kernels["name"]] == ["AddMM", "Compiled", "AddMM", "Compiled"]
    assert nn.kernels.iloc[1]["fused_ops"] == ["divide", "erf", "add", "multiply", "divide"]
    assert nn.kernels.iloc[0]["op"] == "aten::addmm"
    assert nn.kernels.iloc[0]["op_dims"] == [[8, 2048], [8, 1024], [1024, 2048]]    # bias, x, Wᵀ
    assert nn.metadata["mlx"]["kernels_without_shapes"] == 0


def test_dot_parsing_on_real_output(seeds):
    """pydot's read_dot drops MLX's labels (each node sits in its own { } subgraph); parse_dot keeps
    them, and the pydot fallback for other layouts reads the same graph."""
    path = seeds["compile", "fp32"][0] / "graphs" / "001.dot"
    text = path.read_text()
    plain = nx.nx_pydot.read_dot(path)
    assert not any("label" in d for _, d in plain.nodes(data=True))
    dot = read_dot(path)
    assert [dot.label(p) for p in dot.prims] == ["Transpose", "Matmul", "CompiledBroadcastAddBroadcastMaximum"]
    one_line = " ".join(line.strip() + ("" if line.strip().endswith(("{", "}")) else ";") for line in
                        text.splitlines())
    other = parse_dot(one_line)
    assert [other.label(p) for p in other.prims] == [dot.label(p) for p in dot.prims]
    assert [other.inputs(p) for p in other.prims] == [dot.inputs(p) for p in dot.prims]
    with pytest.raises(TracekitError):
        parse_dot("not a graph")


def test_shared_compiled_primitive_is_one_node_per_call(tmp_path):
    """One compiled function called twice with the same shapes: both calls name the same primitive
    address in the dot; each is its own kernel."""
    x = mx.ones((4, 8))
    mx.eval(x)
    f = mx.compile(lambda v: mx.exp(v) * 2 + 1)
    mx.export_to_dot(str(tmp_path / "g.dot"), f(f(x)))
    ids = re.findall(r"\{ (\d+) \[label =\"Compiled", (tmp_path / "g.dot").read_text())
    assert len(ids) == 2 and ids[0] == ids[1]
    dot = read_dot(tmp_path / "g.dot")
    assert [dot.label(p)[:8] for p in dot.prims] == ["Compiled", "Compiled"]
    assert dot.prims[1] == ids[0] + "#2"


def test_fused_parts():
    assert fused_parts("CompiledBroadcastAddBroadcastMaximum") == ["Broadcast", "Add", "Broadcast", "Maximum"]
    assert fused_parts("CompiledErfInvGreaterEqualAsType") == ["ErfInv", "GreaterEqual", "AsType"]
    assert fused_parts("CompiledFooBar") == ["Foo", "Bar"]


def test_bare_dot_counts_only(seeds):
    src = seeds["compile", "fp16"][0] / "graphs" / "001.dot"
    bare = src.parent.parent / "bare.dot"
    bare.write_text(src.read_text())
    [trace] = load_mlx(bare)
    assert list(trace.kernels["name"]) == ["Matmul", "CompiledBroadcastAddBroadcastMaximum"]
    assert trace.kernels["op_dims"].isna().all() and trace.spec is None
    assert any("kernel counts only" in w for w in trace.warnings)
    graph = explain_json(bare)                                  # one graph: the single-trace layout
    assert graph["summary"]["kernels_per_step"] == [2]
    assert all(k["floor_us"] is None for k in graph["kernels"])


def test_capture_leaves_the_scripts_graph_alone(tmp_path):
    """y = (a*2)+1 then h = a*2: h comes with y, so its own evaluation has no work, captured or not."""
    out = capture(tmp_path, "mlx_misc.py", "reuse")
    meta = json.loads((out / "meta.json").read_text())
    assert meta["framework"] == "mlx" and meta["exit_code"] == 0
    assert meta["evaluations"]["without_work"] == 1
    assert list(load_mlx(out)[0].kernels["name"]) == ["Arange", "Multiply", "Add"]


def test_stateful_compile_and_async_eval(tmp_path):
    traces = load_mlx(capture(tmp_path, "mlx_misc.py", "state"))
    assert [t.metadata["evaluated_by"] for t in traces][:2] == ["async_eval", "async_eval"]
    step = traces[1].kernels
    assert list(step["name"]) == ["CompiledBroadcastMultiplyExpAdd", "Sum"]
    assert step.iloc[0]["op_dims"] == [[4, 4], [], [4, 4], [4, 4]]


def _run_capture(tmp: Path, args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    code = ("import sys; from tracekit.capture.mlx import capture_mlx_script; "
            "sys.exit(capture_mlx_script(sys.argv[1], sys.argv[3:], sys.argv[2], False))")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env)


def test_exit_codes_and_bundle_kept(tmp_path):
    proc = _run_capture(tmp_path, [SCRIPTS / "mlx_misc.py", tmp_path / "r", "raise"])
    assert proc.returncode == 1
    assert "ValueError: deliberate failure" in proc.stderr and "mlx_misc.py" in proc.stderr
    assert "capture_mlx" not in proc.stderr.split("Traceback")[1]          # the script's frames only
    assert json.loads((tmp_path / "r" / "meta.json").read_text())["exit_code"] == 1
    assert (tmp_path / "r" / "graphs" / "000.dot").is_file()
    proc = _run_capture(tmp_path, [SCRIPTS / "mlx_misc.py", tmp_path / "e", "exit", "3"])
    assert proc.returncode == 3


def test_no_compiler_no_fusion_and_said_so(tmp_path):
    """MLX on Linux/CPU fuses only with g++; with PATH lacking it mx.compile leaves the seed unfused."""
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    proc = _run_capture(tmp_path, [SCRIPTS / "mlx_seed.py", tmp_path / "b", "--mode", "compile"], env)
    assert proc.returncode == 0, proc.stderr
    assert NO_COMPILER in proc.stderr
    meta = json.loads((tmp_path / "b" / "meta.json").read_text())
    assert meta["compiler"]["found"] is False and meta["compiler"]["warning"] == NO_COMPILER
    graph = load_mlx(tmp_path / "b")[1]
    assert list(graph.kernels["name"]) == ["Matmul", "Add", "Maximum"]
    assert NO_COMPILER in graph.warnings
    assert NO_COMPILER not in load_mlx(tmp_path / "b")[0].warnings        # no compiled call reached it


@pytest.mark.parametrize("name, kernels", [
    ("seed_lazy_bf16_b128", ["Matmul", "Add", "Maximum"]),
    ("seed_compile_bf16_b128", ["Matmul", "CompiledBroadcastAddBroadcastMaximum"])])
def test_committed_graphs(name, kernels):
    """The real graphs under captures/mlx load with their shapes (bf16, B=128)."""
    traces = load_mlx(COMMITTED / name)
    assert list(traces[1].kernels["name"]) == kernels
    assert traces[1].kernels.iloc[0]["op_dims"] == [[128, 1024], [1024, 1024]]
    assert traces[1].kernels.iloc[0]["op_types"] == ["c10::BFloat16"] * 2


def test_lazy_bias_add_reads_the_bias_once():
    """MLX's Broadcast is a stride-0 view: the lazy seed's Add reads b [1024] once, not the [128, 1024] it is
    broadcast to. By hand (bf16): Add 2·128·1024 + 2·1024 + 2·128·1024 = 526,336 B; Maximum reads the 0-d
    zero (2 B): 524,290 B; the compiled kernel already read b once (test above)."""
    seed = load_mlx(COMMITTED / "seed_lazy_bf16_b128")[1]
    add, maximum = seed.kernels.iloc[1], seed.kernels.iloc[2]
    assert add["op_dims"] == [[128, 1024], [1024]] and maximum["op_dims"] == [[128, 1024], []]
    out = explain_json(COMMITTED / "seed_lazy_bf16_b128")["graphs"][1]["kernels"]
    assert [k["bytes"] for k in out] == [2_621_440, 526_336, 524_290]
