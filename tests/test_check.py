"""tracekit check on the committed H200 seed/block captures and HTA's peer traces (all real)."""

from __future__ import annotations

import gzip
import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from tracekit.gate.baseline import expand_ops, load_side, parse_tolerance, short_name
from tracekit.errors import TracekitError
from tracekit.gate.rules import evaluate, load_rules

from conftest import H200, PEERS, ROOT, run_cli

EAGER1 = H200 / "seed_eager_b1.json.gz"
EAGER128 = H200 / "seed_eager_b128.json.gz"
AUTO1 = H200 / "seed_max-autotune-no-cudagraphs_b1.json.gz"       # the 1-kernel capture
AUTO128 = H200 / "seed_max-autotune-no-cudagraphs_b128.json.gz"
AUTO_GRAPHS1 = H200 / "seed_max-autotune_b1.json.gz"               # CUDA graphs: copy kernel + fused kernel
BLOCK_EAGER = H200 / "block_eager.json.gz"
BLOCK_COMPILE = H200 / "block_compile.json.gz"
RULES = ROOT / "rules"
CONTROL = PEERS / "hta/trace_diff_control_control.json.gz"
EAGER_FAILS = {"baseline.kernels_per_step", "baseline.kernels_per_step[elementwise]", "baseline.fused_ops",
               "baseline.kernel_us_per_step"}


def check_json(*args: str) -> tuple[int, dict]:
    proc = run_cli("check", *args, "--format", "json")
    assert "Traceback" not in proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def failed(doc: dict) -> set[str]:
    return {r["rule"] for r in doc["results"] if not r["ok"]}


def test_eager_against_one_kernel_baseline_fails_naming_the_kernel_count():
    proc = run_cli("check", EAGER1, "--baseline", AUTO1)
    assert proc.returncode == 1, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("FAIL baseline.kernels_per_step:"))
    assert "expected ≤ 1 kernels per step, found 2" in line
    assert "nvjet_sm90_tst_8x64_64x16_2x1_v_bz_bias_TNN" in line          # the kernel that came in
    assert "FAIL baseline.fused_ops: expected 1 kernel(s) per step doing add+mm+relu, found 0" in proc.stdout
    assert proc.stdout.rstrip().endswith("FAILED: 1 passed, 4 failed")


@pytest.mark.parametrize("capture", [EAGER1, AUTO1, AUTO_GRAPHS1, BLOCK_COMPILE], ids=lambda p: p.name[:30])
def test_capture_against_itself_passes(capture):
    rc, doc = check_json(capture, "--baseline", capture)
    assert rc == 0 and doc["ok"] and doc["failed"] == 0
    assert doc["steps"] == 5 and doc["passed"] == len(doc["results"]) >= 4


def test_fewer_kernels_than_the_baseline_passes():
    rc, doc = check_json(AUTO1, "--baseline", EAGER1)
    assert rc == 0
    assert {r["rule"]: r["found"] for r in doc["results"]}["baseline.kernels_per_step"] == "1"


def test_baseline_as_explain_json(tmp_path):
    proc = run_cli("explain", AUTO1, "--format", "json")
    assert proc.returncode == 0
    base = tmp_path / "seed_autotune_b1.explain.json"
    base.write_text(proc.stdout)
    rc, doc = check_json(EAGER1, "--baseline", base)
    assert rc == 1 and failed(doc) == EAGER_FAILS
    rc, doc = check_json(AUTO1, "--baseline", base)
    assert rc == 0
    rc_trace, doc_trace = check_json(EAGER1, "--baseline", AUTO1)     # same numbers as from the trace
    assert [r["found"] for r in doc_trace["results"]] == [r["found"] for r in check_json(
        EAGER1, "--baseline", base)[1]["results"]]
    rc, doc = check_json(base, "--baseline", AUTO1)                   # explain JSON as the checked side
    assert rc == 0


def test_output_formats_parse():
    rc, doc = check_json(EAGER1, "--baseline", AUTO1)
    assert rc == 1 and doc["failed"] == 4 and failed(doc) == EAGER_FAILS
    assert all(set(r) == {"rule", "ok", "expected", "found", "kernels", "message"} for r in doc["results"])

    proc = run_cli("check", EAGER1, "--baseline", AUTO1, "--format", "junit")
    assert proc.returncode == 1
    root = ET.fromstring(proc.stdout)
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == len(doc["results"]) and root.get("failures") == "4"
    assert {c.get("name") for c in cases if c.find("failure") is not None} == EAGER_FAILS

    proc = run_cli("check", EAGER1, "--baseline", AUTO1, "--format", "github")
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1
    assert len([ln for ln in lines if ln.startswith("::error title=tracekit check%3A baseline.")]) == 4
    assert lines[-1].startswith("::notice title=tracekit check::") and lines[-1].endswith("1 passed, 4 failed")


def test_text_junit_github_on_passing_rules():
    for fmt, check in (("junit", lambda out: ET.fromstring(out).get("failures") == "0"),
                       ("github", lambda out: "::error" not in out), ("text", lambda out: "OK: 4 passed" in out)):
        proc = run_cli("check", AUTO1, "--rules", RULES / "seed_autotune.toml", "--format", fmt)
        assert proc.returncode == 0 and check(proc.stdout), (fmt, proc.stdout)


RULE_CASES = [
    ("seed_eager", EAGER1, set()),
    ("seed_eager", EAGER128, set()),
    ("seed_eager", BLOCK_EAGER, {"kernels_per_step.max", "kernels_per_step.max_by_category[gemm]",
                                 "kernels_per_step.max_by_category[elementwise]"}),
    ("seed_autotune", AUTO1, set()),
    ("seed_autotune", AUTO128, set()),
    ("seed_autotune", EAGER1, {"kernels_per_step.max", "must_fuse[linear+bias+relu in one kernel]"}),
    ("seed_autotune", AUTO_GRAPHS1, {"kernels_per_step.max"}),
    ("block_compile", BLOCK_COMPILE, set()),
    ("block_compile", BLOCK_EAGER, {"kernels_per_step.max", "must_fuse[residual add + LayerNorm in one kernel]",
                                    "max_gap[norm]"}),
]


@pytest.mark.parametrize("rules,capture,fails", RULE_CASES,
                         ids=lambda x: getattr(x, "name", str(sorted(x) if isinstance(x, set) else x))[:24])
def test_rules_files_pass_on_their_capture_and_fail_on_the_wrong_one(rules, capture, fails):
    rc, doc = check_json(capture, "--rules", RULES / f"{rules}.toml")
    assert failed(doc) == fails
    assert rc == (1 if fails else 0)


def test_failure_lines_name_expected_found_and_kernels():
    rc, doc = check_json(EAGER1, "--rules", RULES / "seed_autotune.toml")
    msg = {r["rule"]: r["message"] for r in doc["results"]}
    assert msg["kernels_per_step.max"].startswith(
        "FAIL kernels_per_step.max: expected ≤ 1 kernels per step, found 2 in step ProfilerStep#")
    assert "(5 of 5 steps)" in msg["kernels_per_step.max"]
    fuse = msg["must_fuse[linear+bias+relu in one kernel]"]
    assert "found 0 in step" in fuse and "nvjet_sm90_tst_8x64_64x16_2x1_v_bz_bias_TNN [mm+add]" in fuse


def test_rule_kinds_on_a_real_peer_trace(tmp_path):
    """forbid (scope), min, max_idle_fraction and skip_steps on HTA's A100 trace (10 DtoH copies a step)."""
    rules = tmp_path / "peer.toml"
    rules.write_text('skip_steps = 1\nmax_idle_fraction = 0.2\n[kernels_per_step]\nmin = 1575\n'
                     '[[forbid]]\npattern = "^Memcpy DtoH"\nscope = "all"\n[[forbid]]\npattern = "^Memcpy HtoH"\n')
    r = load_rules(rules)
    results = {x.rule: x for x in evaluate(r, load_side(CONTROL, skip_steps=r.skip_steps))}
    assert not results["forbid[^Memcpy DtoH]"].ok
    assert results["forbid[^Memcpy DtoH]"].found == "60 kernel(s)"        # all six steps: scope = all
    assert results["forbid[^Memcpy HtoH]"].ok
    assert results["kernels_per_step.min"].ok
    assert results["max_idle_fraction"].ok and results["max_idle_fraction"].found.startswith("18.5% in step")


def test_tolerance_and_baseline_switches(tmp_path):
    rc, doc = check_json(EAGER1, "--baseline", AUTO1, "--tolerance", "time=60%,kernels=1")
    assert rc == 1 and failed(doc) == {"baseline.kernels_per_step[elementwise]", "baseline.fused_ops"}
    rules = tmp_path / "time_only.toml"
    shutil.copy(AUTO1, tmp_path / AUTO1.name)          # a rules file's baseline lies in its folder (issue 27)
    rules.write_text(f'[baseline]\npath = "{AUTO1.name}"\nkernels = false\nfused = false\n'
                     'max_time_ratio = 1.5\ntolerance = 0.0\n')
    rc, doc = check_json(EAGER1, "--rules", rules)      # 8.29 us vs 5.60 us × 1.5 = 8.40 us
    assert rc == 0 and [r["rule"] for r in doc["results"]] == ["baseline.kernel_us_per_step"]
    # a pass says the limit it was held to (the baseline × max_time_ratio, and the tolerance), in µs:
    # it read "expected ≤ 5.60 us, found 8.29 us" as a PASS
    assert doc["results"][0]["expected"] == "≤ 8.40 µs × (1 + 0%)" and doc["results"][0]["found"].endswith(" µs")
    rc, doc = check_json(EAGER1, "--rules", rules, "--tolerance", "0")
    assert rc == 0
    rules.write_text(rules.read_text().replace("1.5", "1.4"))
    rc, doc = check_json(EAGER1, "--rules", rules)
    assert rc == 1 and failed(doc) == {"baseline.kernel_us_per_step"}


BAD_RULES = [
    ("max_idle = 1\n", "unknown key 'max_idle'"),
    ('skip_steps = "1"\n', "skip_steps: must be an integer"),
    ("[kernels_per_step]\nmax = 1.5\n", "kernels_per_step.max: must be an integer"),
    ("[kernels_per_step]\nmax_by_category = { gemmm = 1 }\n", "unknown key 'gemmm'"),
    ('[[forbid]]\npattern = "(("\n', "forbid[0].pattern: bad regex"),
    ('[[must_fuse]]\nlabel = "x"\n', "must_fuse[0]: missing required key 'ops'"),
    ("[max_gap]\ngemm = -1\n", "max_gap.gemm: must be > 0.0"),
    ("max_idle_fraction = 1.5\n", "max_idle_fraction: must be ≥ 0.0 and ≤ 1.0"),
    ("[kernels_per_step\nmax = 1\n", "invalid TOML"),
    ("[baseline]\ntolerance = 0.1\n", "[baseline] rules need a baseline"),
]


@pytest.mark.parametrize("text,message", BAD_RULES, ids=[m for _, m in BAD_RULES])
def test_invalid_rules_file_exits_2_naming_it(tmp_path, text, message):
    path = tmp_path / "bad_rules.toml"
    path.write_text(text)
    proc = run_cli("check", EAGER1, "--rules", path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert str(path) in proc.stderr and message in proc.stderr and "Traceback" not in proc.stderr


def test_unreadable_input_exits_2(tmp_path):
    truncated = tmp_path / "truncated.json.gz"          # synthetic: the first 2000 bytes of a real capture
    truncated.write_bytes(EAGER1.read_bytes()[:2000])
    not_a_trace = tmp_path / "other.json"               # synthetic: JSON that is neither a trace nor explain
    not_a_trace.write_text('{"a": 1}')
    half_explain = tmp_path / "explain.json"            # synthetic: explain keys with a malformed body
    half_explain.write_text('{"kernels": [], "summary": {}, "device": {}, "steps": 5}')
    cases = [("check", truncated, "--baseline", AUTO1), ("check", EAGER1, "--baseline", truncated),
             ("check", EAGER1, "--baseline", not_a_trace), ("check", EAGER1, "--baseline", half_explain),
             ("check", tmp_path / "missing.json", "--baseline", AUTO1), ("check", EAGER1),
             ("check", EAGER1, "--baseline", AUTO1, "--tolerance", "abc"),
             ("check", EAGER1, "--baseline", AUTO1, "--skip-steps", "5"),
             ("check", EAGER1, "--rules", tmp_path / "missing.toml")]
    for args in cases:
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.startswith("tracekit: ") and "Traceback" not in proc.stderr


def test_helpers():
    assert parse_tolerance("10%") == {"time": 0.1, "kernels": 0.0}
    assert parse_tolerance("time=0.2,kernels=50%") == {"time": 0.2, "kernels": 0.5}
    with pytest.raises(TracekitError):
        parse_tolerance("speed=1")
    assert expand_ops(["addmm", "relu"]) == {"mm", "add", "relu"} == expand_ops(["aten::mm", "add", "relu"])
    assert short_name("void at::native::f<1>(int, float)") == "at::native::f<1>"
    assert short_name("Memcpy HtoD (Pinned -> Device)") == "Memcpy HtoD (Pinned -> Device)"


def test_explain_json_gz_baseline(tmp_path):
    proc = run_cli("explain", EAGER1, "--format", "json")
    base = tmp_path / "eager.json.gz"
    base.write_bytes(gzip.compress(proc.stdout.encode()))
    side = load_side(base)
    assert side.source == "explain-json" and side.steps["kernels"].tolist() == [2] * 5


def test_check_markdown_has_the_verdict_and_one_row_per_rule():
    """The same check as JSON and as Markdown (a PR comment): one table row per rule of the JSON."""
    args = ("check", H200 / "seed_eager_b128.json.gz", "--rules", ROOT / "rules" / "seed_eager.toml")
    doc = json.loads(run_cli(*args, "--format", "json").stdout)
    md = run_cli(*args, "--format", "markdown")
    assert md.returncode == 0
    lines = md.stdout.splitlines()
    assert lines[0].startswith(f"**tracekit check: OK** ({doc['passed']} passed, 0 failed)")
    rows = [line for line in lines if line.startswith("| pass") or line.startswith("| **FAIL**")]
    assert [r.split(" | ")[1].strip("`") for r in rows] == [r["rule"] for r in doc["results"]]
