"""Issue 27, hostile names and inputs: kernel names that made internal regexes quadratic, file names that
are not UTF-8 or 255 bytes long, deep nesting in a field tracekit does not read, ranks with a rank of
2^63, a dict ``dur`` or glob characters in the folder name, a huge TRACEKIT_REGEX_SECONDS.

Names are synthetic (one token repeated to 100 KB). Traces are the committed real trace
captures/h200/seed_eager_b1.json.gz, copied, renamed or with one field changed by the test. Timing of
the name matching is in bench/bench_regex.py, not here."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import pytest

from conftest import run_cli, run_cli_subprocess
from test_robustness import EAGER, _doc, _one_line_error

from tracekit.classify.categories import category_of
from tracekit.fusion.names import fused_ops_of, is_vendor_gemm
from tracekit.ops.inductor import split_ops

N = 100_000


def _repeat(token: str) -> str:
    return token * (N // len(token))


@pytest.mark.parametrize("name, category", [
    (_repeat("triton_tem_fused_") + "addmm_0", "gemm"),        # the GEMM rule sees the addmm at the end
    (_repeat("triton_tem_fused_") + "relu_0", "triton"),        # no product: an Inductor kernel
    (_repeat("cudnn::") + "x", "conv"),                         # cudnn:: with no gemm after it
    (_repeat("cudnn::") + "gemm", "gemm"),                      # ... with one: not conv, the gemm rule
    (_repeat("a") + "cutlass", "gemm"),
])
def test_a_100_kb_name_classifies_as_a_short_one_would(name, category):
    assert category_of(name) == category


def test_the_cutlass_gemm_rule_on_100_kb_names():
    assert is_vendor_gemm(_repeat("cutlass") + "_tensorop")
    assert not is_vendor_gemm(_repeat("cutlass"))
    assert not is_vendor_gemm("cutlass\n" + _repeat("x") + "gemm"[:0] + "\ntensorop")   # '.' stops at a newline
    assert fused_ops_of(_repeat("cutlass_") + "gemm_relu", None) == ["mm", "relu"]


def test_inductor_names_split_by_the_known_ops_that_start_with_the_token():
    assert split_ops("add_mean_native_layer_norm") == ["add", "mean", "native_layer_norm"]
    assert set(fused_ops_of("triton_tem_fused_" + "addmm_" * (N // 6) + "0", None)) == {"addmm"}


def _copy(tmp_path, name: bytes):
    path = os.path.join(os.fsencode(str(tmp_path)), name)
    shutil.copy(EAGER, path)
    return os.fsdecode(path)


@pytest.mark.parametrize("name", [b"\xff\xfe.json.gz", b"y" * 247 + b".json.gz"])
def test_file_names_that_are_not_utf8_or_255_bytes_long(tmp_path, name):
    path = _copy(tmp_path, name)
    for fmt in ("table", "json", "csv", "markdown"):
        proc = run_cli("explain", path, "-f", fmt)
        assert proc.returncode == 0, (fmt, proc.stderr)
    doc = json.loads(run_cli("explain", path, "-f", "json").stdout)
    assert len(doc["steps"]) == 5                       # the trace's 5 ProfilerSteps
    rules = tmp_path / "r.toml"
    rules.write_text("[kernels_per_step]\nmax = 2\n")   # 2 kernels per step (addmm, clamp_min)
    for fmt in ("json", "junit"):
        assert run_cli("check", path, "--rules", rules, "--format", fmt).returncode == 0
    assert run_cli("diff", path, EAGER, "-f", "json").returncode == 0
    long_out = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"z" * 256))
    _one_line_error(run_cli("explain", path, "--html", long_out), "too long")


def test_perfetto_on_nesting_deeper_than_254_in_a_field_tracekit_does_not_read(tmp_path):
    text = json.dumps(_doc(EAGER)).replace('"traceEvents": [', '"extra": ' + "[" * 600 + "]" * 600
                                           + ', "traceEvents": [', 1)
    src = tmp_path / "deep.json"
    src.write_text(text)
    out = tmp_path / "p.json"
    proc = run_cli_subprocess("explain", src, "--perfetto", out, "-f", "json")   # the test cache deep-copies
    assert proc.returncode == 0, proc.stderr
    written = out.read_text()
    assert written.count("[") >= 600 and '"tracekit"' in written


def _ranks_folder(tmp_path, name="run"):
    folder = tmp_path / name
    folder.mkdir()
    for r in (0, 1):
        doc = _doc(EAGER)
        doc["distributedInfo"] = {"rank": r, "world_size": 2, "backend": "nccl"}
        (folder / f"rank{r}.json").write_text(json.dumps(doc))
    return folder


def test_a_rank_of_2_to_the_63_is_an_unknown_rank(tmp_path):
    folder = _ranks_folder(tmp_path)
    doc = json.loads((folder / "rank1.json").read_text())
    doc["distributedInfo"] = {"rank": 2 ** 63, "world_size": 2 ** 63 + 1, "backend": "nccl"}
    (folder / "rank1.json").write_text(json.dumps(doc))
    proc = run_cli("ranks", folder, "--workers", "1", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    ranks = {r["label"]: r["rank"] for r in json.loads(proc.stdout)["ranks"]}
    assert ranks == {"rank0.json": 0, "rank1.json": 1}       # the file name's rank, not 2^63


def test_glob_characters_in_the_ranks_folder_name(tmp_path):
    folder = _ranks_folder(tmp_path, "run[0]*?")
    proc = run_cli("ranks", folder, "--workers", "1", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert [r["steps"] for r in json.loads(proc.stdout)["ranks"]] == [5, 5]


def test_a_bundle_rank_with_a_dict_dur_is_that_ranks_error_not_an_internal_one(tmp_path):
    folder = tmp_path / "bundle"
    for r in (0, 1):
        sub = folder / f"rank{r}"
        sub.mkdir(parents=True)
        doc = _doc(EAGER)
        if r == 1:
            kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
            kernel["dur"] = {"a": 1}
        (sub / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
        (sub / "meta.json").write_text(json.dumps({"framework": "torch", "tracekit_version": "0", "state": "done",
                                                   "exit_code": 0, "rank": r, "world_size": 2}))
    proc = run_cli("ranks", folder, "--workers", "1", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["label"]: r for r in json.loads(proc.stdout)["ranks"]}
    assert rows["rank0"]["error"] is None and "dur" in rows["rank1"]["error"]


@pytest.mark.parametrize("value, words", [("1e300", "at most 86400"), ("inf", "positive number")])
def test_a_huge_regex_time_budget_is_refused(monkeypatch, value, words):
    monkeypatch.setenv("TRACEKIT_REGEX_SECONDS", value)
    _one_line_error(run_cli("explain", EAGER, "--step-marker", "ProfilerStep"), "TRACEKIT_REGEX_SECONDS", words)
