"""Unusable input: one line on stderr naming the file and the problem, exit 2, no traceback.

The broken files here are synthetic (made by each test), not traces."""

from __future__ import annotations

import gzip
import sys

import pytest

from conftest import PEERS, ROOT, run_cli

REAL = PEERS / "hta/triton_example_triton_example.json.gz"


def _assert_clean_error(proc, *words):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]
    assert proc.stdout == ""


def test_missing_file(tmp_path):
    _assert_clean_error(run_cli("explain", tmp_path / "nope.json"), "nope.json", "no such file")


def test_folder_without_trace(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    _assert_clean_error(run_cli("explain", tmp_path), "holds no trace")


def test_invalid_json(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _assert_clean_error(run_cli("explain", bad), "bad.json", "invalid JSON")


def test_truncated_json_inside_valid_gzip(tmp_path):
    text = gzip.open(REAL).read()
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes(gzip.compress(text[: len(text) // 2]))
    _assert_clean_error(run_cli("explain", bad), "cut.json.gz", "invalid JSON")


def test_truncated_gzip(tmp_path):
    raw = REAL.read_bytes()
    bad = tmp_path / "short.json.gz"
    bad.write_bytes(raw[: len(raw) // 2])
    _assert_clean_error(run_cli("explain", bad), "short.json.gz", "gzip")


def test_bad_gzip(tmp_path):
    bad = tmp_path / "junk.json.gz"
    bad.write_bytes(b"\x1f\x8b" + b"\x00garbage" * 10)
    _assert_clean_error(run_cli("explain", bad), "junk.json.gz", "gzip")


def test_json_without_trace_events(tmp_path):
    bad = tmp_path / "other.json"
    bad.write_text('{"hello": 1}')
    _assert_clean_error(run_cli("explain", bad), "other.json", "traceEvents")


@pytest.mark.parametrize("event, words", [
    ({"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0}, ("event #0", "'dur'")),
    ({"ph": "X", "cat": "kernel", "ts": 1.0, "dur": 2.0}, ("event #0", "'name'")),
    ({"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": -3.0}, ("event #0", "negative duration")),
    ({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": "x", "dur": 1.0}, ("event #0", "non-numeric")),
])
def test_events_with_missing_or_bad_fields(tmp_path, event, words):
    import json
    bad = tmp_path / "ev.json"
    bad.write_text(json.dumps({"traceEvents": [event]}))
    _assert_clean_error(run_cli("explain", bad), "ev.json", *words)


def test_bad_step_marker_regex():
    _assert_clean_error(run_cli("explain", REAL, "--step-marker", "("), "--step-marker", "regex")


def test_step_marker_matching_nothing():
    _assert_clean_error(run_cli("explain", REAL, "--step-marker", "NoSuchStep"), "matches no event")


def test_unknown_device_id():
    _assert_clean_error(run_cli("explain", REAL, "--device", "tpu9"), "unknown device spec")


def test_unknown_format_is_usage_error():
    proc = run_cli("explain", REAL, "--format", "yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_input_file_is_left_untouched(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    run_cli("explain", bad)
    assert bad.read_text() == "{not json"


def test_event_args_that_are_not_an_object(tmp_path):
    import json
    bad = tmp_path / "args.json"
    bad.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2,
                                                "args": [1, 2]}]}))
    _assert_clean_error(run_cli("explain", bad), "args.json", "event #0", "'args'")


def test_device_properties_of_the_wrong_shape_mean_unknown_device(tmp_path):
    import json
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"deviceProperties": "H200", "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {}}]}))
    proc = run_cli("explain", odd, "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["device"]["spec"] is None
    assert "unknown device" in proc.stderr


BOOM = """
import sys
import tracekit.analyze as analyze
def boom(*args, **kwargs):
    raise RuntimeError("boom")
analyze.analyze_path = boom
sys.argv = ["tracekit", "explain", "some.json"]
from tracekit.cli.app import main
main()
"""


@pytest.mark.parametrize("debug", [False, True])
def test_an_internal_error_is_one_line_unless_debugging(debug):
    import os
    import subprocess
    import sys
    env = {**os.environ, **({"TRACEKIT_DEBUG": "1"} if debug else {})}
    env.pop("TRACEKIT_DEBUG", None) if not debug else None
    proc = subprocess.run([sys.executable, "-c", BOOM], capture_output=True, text=True, env=env)
    if debug:
        assert proc.returncode == 1 and "Traceback" in proc.stderr and "RuntimeError: boom" in proc.stderr
    else:
        _assert_clean_error(proc, "internal error", "RuntimeError: boom", "TRACEKIT_DEBUG")


def test_unknown_spec_id_names_the_known_ones():
    _assert_clean_error(run_cli("explain", REAL, "--spec", "h300-measured"), "h300-measured",
                        "no builtin spec has that id", "h200-measured")


MLX_DOT = ROOT / "captures" / "mlx" / "seed_lazy_bf16_b128" / "graphs" / "001.dot"


@pytest.mark.parametrize("args", [("check", MLX_DOT, "--rules", ROOT / "rules" / "seed_eager.toml"),
                                  ("check", REAL, "--baseline", MLX_DOT), ("diff", MLX_DOT, REAL),
                                  ("diff", REAL, MLX_DOT.parent.parent)])
def test_mlx_graph_given_to_check_or_diff_says_to_explain_it(args):
    """Was "invalid JSON (...); is the file truncated?" for a .dot file."""
    _assert_clean_error(run_cli(*args), "MLX graph", "check and diff take torch.profiler traces",
                        "tracekit explain")


def test_missing_pydot_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    """A dot layout other than MLX's own goes through pydot (the `dot` extra): without it, one line."""
    text = MLX_DOT.read_text()
    one_line = tmp_path / "one_line.dot"            # the same graph on one line: MLX's own reader declines it
    one_line.write_text(" ".join(ln.strip() + ("" if ln.strip().endswith(("{", "}")) else ";")
                                 for ln in text.splitlines()))
    monkeypatch.setitem(sys.modules, "pydot", None)  # `import pydot` now fails as if not installed
    _assert_clean_error(run_cli("explain", one_line), "optional package 'pydot'", "tracekit[dot]")


def test_a_folder_above_a_bundle_names_the_bundle():
    """captures/cpu/ddp2 holds its script and README beside the bundle: the error points at the bundle."""
    proc = run_cli("explain", ROOT / "captures" / "cpu" / "ddp2")
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith(f"the capture bundle inside is {ROOT / 'captures' / 'cpu' / 'ddp2' / 'bundle'}")
