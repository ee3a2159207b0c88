"""The few tests that run ``python -m tracekit`` in a fresh interpreter, as a user does.

Everything else runs the CLI in process (conftest.run_cli); these check that the console entry point
gives the same bytes, exit codes and one-line errors as the in-process runner the suite relies on.
(capture, which always runs in a subprocess, is covered in test_capture.py and test_capture_safety.py.)
"""

from __future__ import annotations

import json

from conftest import H200, ROOT, explain_json, run_cli_subprocess

BUNDLE = ROOT / "captures" / "bundles" / "seed_eager"
EAGER1 = H200 / "seed_eager_b1.json.gz"
AUTO1 = H200 / "seed_max-autotune-no-cudagraphs_b1.json.gz"


def test_explain_a_bundle_json_is_stdout_alone_and_equals_the_in_process_run():
    proc = run_cli_subprocess("explain", BUNDLE, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)                          # nothing but the JSON on stdout
    assert doc == explain_json(BUNDLE)
    assert doc["device"]["spec"] == "h200" and doc["summary"]["kernels_per_step"] == [2] * 5
    gemm = doc["kernels"][0]
    # bf16 addmm, bias [1024], x [128, 1024], W [1024, 1024] → y [128, 1024]:
    # 2·M·N·K + M·N (the bias adds) = 2·128·1024·1024 + 128·1024 FLOPs; reads 2·(1024 + 128·1024 +
    # 1024·1024), writes 2·128·1024 bytes
    assert (gemm["op"], gemm["flops"]) == ("aten::addmm", 268_435_456 + 131_072)
    assert gemm["bytes"] == 2 * (1024 + 131_072 + 1_048_576) + 2 * 131_072 == 2_623_488


def test_explain_a_bundle_table():
    proc = run_cli_subprocess("explain", BUNDLE)
    assert proc.returncode == 0, proc.stderr
    assert "h200" in proc.stdout and "gemm" in proc.stdout


def test_check_that_fails_exits_1():
    proc = run_cli_subprocess("check", EAGER1, "--baseline", AUTO1)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.rstrip().endswith("FAILED: 1 passed, 4 failed")


def test_unusable_input_is_one_line_and_exit_2(tmp_path):
    proc = run_cli_subprocess("explain", tmp_path / "nope.json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("tracekit: ") and "no such file" in proc.stderr


def test_usage_error_exits_2():
    proc = run_cli_subprocess("explain", EAGER1, "--format", "yaml")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stdout == ""
