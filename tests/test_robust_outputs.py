"""Issue 27, output paths: no output may be an input or hold one; an existing file is replaced only with
--force; a write that fails is one line (exit 2) and leaves what was there. Capture-script behaviours:
the script's own meta.json / trace.json.gz never stand in for tracekit's, a forked child does not write
the bundle, a removed -o folder is made again.

Inputs are the committed real trace captures/h200/seed_eager_b1.json.gz (copied) and small synthetic
torch scripts written by the tests."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys

import pytest

from conftest import H200, run_cli, run_cli_subprocess
from test_robustness import _one_line_error

EAGER = H200 / "seed_eager_b1.json.gz"


@pytest.fixture()
def trace(tmp_path):
    path = tmp_path / "t.json.gz"
    shutil.copy(EAGER, path)
    return path


def _unchanged(path, before: bytes):
    assert path.read_bytes() == before


@pytest.mark.parametrize("option", ["--html", "--perfetto"])
def test_an_output_that_is_the_input_is_refused(trace, option):
    before = trace.read_bytes()
    _one_line_error(run_cli("explain", trace, option, trace, "--force"), "is the input", "refusing")
    _unchanged(trace, before)
    link = trace.with_name("link.json.gz")
    link.symlink_to(trace)                            # the same file through a symbolic link
    _one_line_error(run_cli("explain", link, option, trace, "--force"), "is the input")
    hard = trace.with_name("hard.json.gz")
    os.link(trace, hard)                              # the same inode under another name
    _one_line_error(run_cli("explain", trace, option, hard, "--force"), "is the input")
    _unchanged(trace, before)
    _one_line_error(run_cli("explain", trace, option, trace.parent), "holds the input")


def test_an_existing_report_is_replaced_only_with_force(trace):
    out = trace.with_name("r.html")
    out.write_text("mine")
    _one_line_error(run_cli("explain", trace, "--html", out, "-f", "json"), "already exists", "--force")
    assert out.read_text() == "mine"
    proc = run_cli("explain", trace, "--html", out, "--force", "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")
    _one_line_error(run_cli("explain", trace, "--html", out, "--perfetto", out, "--force"), "same file")


def test_a_file_inside_a_bundle_given_as_input_is_refused(tmp_path):
    bundle = tmp_path / "b"
    bundle.mkdir()
    shutil.copy(EAGER, bundle / "trace.json.gz")
    before = (bundle / "trace.json.gz").read_bytes()
    _one_line_error(run_cli("explain", bundle, "--perfetto", bundle / "trace.json.gz", "--force"), "input folder")
    _unchanged(bundle / "trace.json.gz", before)


@pytest.mark.parametrize("target, words", [
    ("/dev/full", ("not a regular file",)), ("{tmp}/no/such/r.html", ("does not exist",)),
    ("{tmp}/" + "x" * 300 + ".html", ("too long",)), ("{tmp}", ("holds the input",)),
])
def test_output_write_problems_are_one_line(trace, target, words):
    _one_line_error(run_cli("explain", trace, "--html", target.format(tmp=trace.parent)), *words)


def test_a_read_only_folder_is_one_line_and_leaves_no_temporary(trace, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _one_line_error(run_cli("explain", trace, "--html", ro / "r.html"), "cannot write")
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


def test_a_non_utf8_output_name_is_written(trace):
    name = os.fsdecode(os.fsencode(str(trace.parent)) + b"/\xff\xfe.html")
    proc = run_cli("explain", trace, "--html", name, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    assert os.path.exists(name)


def test_stdout_full_or_closed_is_one_line(trace):
    with open("/dev/full", "w") as full:
        proc = subprocess_run([sys.executable, "-m", "tracekit", "explain", str(trace), "-f", "json"], stdout=full)
    _one_line_error(proc, "cannot write the output")
    proc = subprocess_run([sys.executable, "-m", "tracekit", "explain", str(trace)], stdout=None, close_stdout=True)
    _one_line_error(proc, "stdout is closed")


def subprocess_run(argv, stdout=None, close_stdout=False):
    import subprocess

    from conftest import ROOT
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if close_stdout:
        argv = ["sh", "-c", 'exec "$@" >&-', "sh", *argv]
    return subprocess.run(argv, stdout=stdout if stdout is not None else subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def test_ranks_keep_refuses_the_input_folder_a_file_and_foreign_files(tmp_path):
    ranks = tmp_path / "run"
    ranks.mkdir()
    for r in (0, 1):
        shutil.copy(EAGER, ranks / f"rank{r}.json.gz")
    _one_line_error(run_cli("ranks", ranks, "--keep", ranks), "is the input")
    _one_line_error(run_cli("ranks", ranks, "--keep", ranks / "rank0.json.gz"), "inside the input folder")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    _one_line_error(run_cli("ranks", ranks, "--keep", mine), "did not write (notes.txt)")
    keep = tmp_path / "tables[1]*"                    # DuckDB glob characters in the folder name
    for _ in range(2):                                 # its own tables are replaced on the second run
        proc = run_cli("ranks", ranks, "--keep", keep, "--workers", "1", "-f", "json")
        assert proc.returncode == 0, proc.stderr
        assert sorted(p.name for p in keep.iterdir()) == ["kernels-000000.parquet", "kernels-000001.parquet",
                                                           "steps.parquet"]
        assert len(json.loads(proc.stdout)["ranks"]) == 2


def test_calibrate_output_is_checked_before_measuring(tmp_path):
    out = tmp_path / "mine.toml"
    out.write_text("mine")
    _one_line_error(run_cli("calibrate", "--device", "cpu", "--quick", "-o", out), "already exists")
    assert out.read_text() == "mine"


# --- capture-script behaviours -------------------------------------------------------------------

torch_needed = pytest.mark.skipif(__import__("importlib").util.find_spec("torch") is None, reason="needs torch")
MODEL = "import sys, os, gzip, torch\nm = torch.nn.Linear(8, 4)\nfor _ in range(2):\n    m(torch.ones(3, 8))\n"


def _job(tmp_path, tail: str):
    path = tmp_path / "job.py"
    path.write_text(MODEL + tail)
    return path


@torch_needed
def test_a_script_writing_meta_and_trace_into_the_bundle_never_stands_in_for_tracekit(tmp_path):
    out = tmp_path / "out"
    job = _job(tmp_path, "open(sys.argv[1] + '/meta.json', 'w').write('{\"mine\": 1}')\n"
                         "gzip.open(sys.argv[1] + '/trace.json.gz', 'wt').write('{\"mine\": 2}')\n")
    proc = run_cli("capture", job, "-o", out, "-q", "--", out)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "script-meta.json").read_text()) == {"mine": 1}
    assert json.loads(gzip.decompress((out / "script-trace.json.gz").read_bytes())) == {"mine": 2}
    assert json.loads((out / "meta.json").read_text())["state"] == "done"
    events = json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))["traceEvents"]
    assert sum(e.get("name") == "aten::linear" for e in events) == 2      # the 2 calls of the script
    assert "moved to script-meta.json" in proc.stderr and "moved to script-trace.json.gz" in proc.stderr


@torch_needed
def test_capture_out_may_not_hold_the_script(tmp_path):
    job = _job(tmp_path, "")
    _one_line_error(run_cli("capture", job, "-o", tmp_path, "--force"), "holds the input")
    assert job.exists()


@torch_needed
def test_a_forked_child_that_runs_to_the_end_does_not_write_the_bundle(tmp_path):
    out = tmp_path / "out"
    job = _job(tmp_path, "pid = os.fork()\nif pid == 0:\n    print('child')\n    sys.exit(0)\n"
                         "os.waitpid(pid, 0)\nprint('parent')\n")
    proc = run_cli_subprocess("capture", job, "-o", out, "-q")     # hung before (the child wrote the bundle)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["child", "parent"]
    assert json.loads((out / "meta.json").read_text())["state"] == "done"


@torch_needed
def test_a_script_that_removes_its_bundle_folder_still_gets_its_bundle(tmp_path):
    out = tmp_path / "out"
    job = _job(tmp_path, "import shutil\nshutil.rmtree(sys.argv[1])\n")
    proc = run_cli("capture", job, "-o", out, "-q", "--", out)
    assert proc.returncode == 0, proc.stderr
    assert "removed the bundle folder" in proc.stderr
    assert (out / "trace.json.gz").is_file() and json.loads((out / "meta.json").read_text())["state"] == "done"


@torch_needed
def test_os_exit_from_another_thread_still_writes_the_bundle(tmp_path):
    out = tmp_path / "out"
    job = _job(tmp_path, "import threading\nt = threading.Thread(target=lambda: os._exit(3))\nt.start()\nt.join()\n"
                         "print('not reached')\n")
    proc = run_cli_subprocess("capture", job, "-o", out, "-q")     # SIGSEGV and no bundle before
    assert proc.returncode == 3, proc.stderr
    assert "not reached" not in proc.stdout
    meta = json.loads((out / "meta.json").read_text())
    assert meta["state"] == "done" and meta["exit_code"] == 3 and (out / "trace.json.gz").is_file()


@torch_needed
def test_capture_out_under_a_file_or_in_proc_is_one_line(tmp_path):
    job = _job(tmp_path, "")
    (tmp_path / "afile").write_text("mine")
    _one_line_error(run_cli("capture", job, "-o", tmp_path / "afile" / "out"), "cannot make the bundle folder")
    _one_line_error(run_cli("capture", job, "-o", "/proc/tracekit-out"), "cannot make the bundle folder")
    assert (tmp_path / "afile").read_text() == "mine"
