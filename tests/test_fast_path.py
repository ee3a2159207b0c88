"""The console entry point's fast path (issue 26): ``tracekit explain TRACE -f json`` with plain options
is parsed by hand and run without typer (tracekit.cli.main); its stdout, stderr and exit status are the
typer path's, byte for byte, on real committed traces and on unusable input. Nothing here is timed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import H200, PEERS, ROOT, _runner
from tracekit.cli.main import fast_explain

BLOCK = H200 / "block_eager.json.gz"
LLAMA = H200 / "models" / "llama_decode_eager"                 # a bundle: meta, trace, execution trace
SEED = ROOT / "captures" / "bundles" / "seed_eager"
CPU_ONLY = PEERS / "hta" / "cpu_only_rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
MI250 = PEERS / "hta" / "amd_trace_mi250_minitoy_train_ROCm6_2_kineto.json.gz"


def test_only_plain_json_explains_take_the_fast_path():
    assert fast_explain(["explain", "t.json", "-f", "json"]) == {"format": "json", "trace": "t.json"}
    assert fast_explain(["explain", "--device=h200", "--no-cache", "--format", "json", "t.json", "--skip-steps",
                         "2", "--spec", "s.toml", "--step-marker", "Step", "--et", "e.json",
                         "--graph-captures", "g"]) == {
        "format": "json", "trace": "t.json", "device": "h200", "no_cache": True, "skip_steps": 2,
        "spec": "s.toml", "step_marker": "Step", "et": "e.json", "graph_captures": "g"}
    for argv in (["explain", "t.json"],                              # the table: rich draws it
                 ["explain", "t.json", "-f", "csv"], ["explain", "t.json", "-f", "JSON"],
                 ["explain", "t.json", "-fjson"],                    # a form click knows and this parser does not
                 ["explain", "t.json", "-f", "json", "--fusion"], ["explain", "t.json", "-f", "json", "--top", "3"],
                 ["explain", "t.json", "-f", "json", "-f", "json"], ["explain", "t.json", "-f", "json", "--device"],
                 ["explain", "t.json", "-f", "json", "--cache", "--no-cache"],
                 ["explain", "t.json", "-f", "json", "--skip-steps", "-1"],
                 ["explain", "t.json", "-f", "json", "--skip-steps", "²"],
                 ["explain", "t.json", "u.json", "-f", "json"], ["explain", "-f", "json"],
                 ["explain", "", "-f", "json"], ["explain", "t.json", "-f", "json", "--"],
                 ["explain", "t.json", "-f", "json", "--help"], ["check", "t.json", "-f", "json"], []):
        assert fast_explain(argv) is None, argv


def _both(argv: list[str]) -> tuple:
    """(exit status, stdout bytes, stderr bytes) of the fast path and of the typer path, in this process."""
    from tracekit.cli import app, main

    got = []
    for run in (main.run, app.run):
        with _runner().isolation() as streams:
            code = run(argv)
            sys.stdout.flush()
            sys.stderr.flush()
            got.append((code, streams[0].getvalue(), streams[1].getvalue()))
    return got[0], got[1]


@pytest.mark.parametrize("trace, extra", [
    (BLOCK, []), (BLOCK, ["--device", "h100-sxm", "--skip-steps", "1"]), (LLAMA, []), (SEED, ["--spec=h200-measured"]),
    (CPU_ONLY, []),                                                           # warning lines
    (MI250, ["--step-marker", "ProfilerStep"]),
    (BLOCK, ["--device", "no-such-device"]),                                   # unknown device: exit 2
    (BLOCK, ["--spec", "h300-measured"]),                                      # unusable: one line, exit 2
    (ROOT / "no_such_trace.json", []), (ROOT / "README.md", []), (BLOCK, ["--step-marker", "("]),
])
def test_fast_and_typer_paths_give_the_same_bytes(trace, extra):
    argv = ["explain", str(trace), "-f", "json", "--no-cache", *extra]
    assert fast_explain(argv) is not None
    fast, typer = _both(argv)
    assert fast == typer
    code, out, err = fast
    if code == 0:
        assert out.startswith(b"{") and b'"summary"' in out
    else:
        assert code == 2 and out == b"" and err.count(b"\n") == 1 and err.startswith(b"tracekit: ")


def _process(code: str, argv: list[str]) -> tuple:
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "TRACEKIT_NO_CACHE": "1"})
    return proc.returncode, proc.stdout, proc.stderr


FAST = "import sys; from tracekit.cli.main import run; c = run(); assert 'typer' not in sys.modules; sys.exit(c)"
TYPER = "from tracekit.cli.app import main; main()"


MAIN = "from tracekit.cli.main import main; main()"      # what `tracekit` and `python -m tracekit` run


@pytest.mark.parametrize("argv", [["explain", str(BLOCK), "-f", "json"],
                                  ["explain", str(CPU_ONLY), "-f", "json"],          # warning lines on stderr
                                  ["explain", str(ROOT / "README.md"), "--format=json"]])
def test_the_console_entry_point_imports_no_typer_and_writes_the_same(argv):
    fast = _process(FAST, argv)
    assert fast == _process(TYPER, argv) == _process(MAIN, argv)        # MAIN ends with os._exit: all flushed
    assert fast[0] in (0, 2) and (fast[0] == 0) == fast[1].startswith(b"{")
    assert (b"warning" in fast[2]) == (argv[1] == str(CPU_ONLY))


def test_a_full_disk_is_one_line_and_exit_2_on_both_paths():
    got = []
    for code in (MAIN, TYPER):
        with open("/dev/full", "wb") as full:
            proc = subprocess.run([sys.executable, "-c", code, "explain", str(BLOCK), "-f", "json"], stdout=full,
                                  stderr=subprocess.PIPE, cwd=ROOT, timeout=300,
                                  env={**os.environ, "PYTHONPATH": str(ROOT), "TRACEKIT_NO_CACHE": "1"})
        got.append((proc.returncode, proc.stderr))
    assert got[0] == got[1] == (2, b"tracekit: cannot write the output (No space left on device)\n")


def test_python_dash_m_and_the_console_script_take_the_fast_path():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["tracekit"] == "tracekit.cli.main:main"
    assert "tracekit.cli.main" in (ROOT / "tracekit" / "__main__.py").read_text()


PROBE = ("import os, sys; import tracekit.cli.main as m; "
         "m._dispatch = lambda argv, fast: print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules) "
         "or 0; m.main()")


def test_the_fast_path_starts_one_blas_thread_unless_told_otherwise():
    """numpy's BLAS starts a thread per core at import; explain does no linear algebra, so the fast path
    asks for one (before numpy is imported), unless OPENBLAS_NUM_THREADS is set already."""
    def probe(argv, **env):
        return subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=ROOT,
                              env={**{k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"},
                                   "PYTHONPATH": str(ROOT), **env}, timeout=120).stdout.strip()
    assert probe(["explain", "t.json", "-f", "json"]) == "1 False"
    assert probe(["explain", "t.json", "-f", "json"], OPENBLAS_NUM_THREADS="4") == "4 False"
    assert probe(["explain", "t.json"]) == "None False"              # the typer path is left alone
