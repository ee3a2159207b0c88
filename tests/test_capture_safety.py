"""Capture never loses what the user had: --force, chdir, closed stdout, os._exit, signals, kernel_file."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from conftest import run_cli
from tracekit import bundle
from tracekit.errors import TracekitError

pytest.importorskip("torch")

MODEL = "import torch\nm = torch.nn.Linear(8, 4)\nfor _ in range(2):\n    m(torch.ones(3, 8))\n"


def script(tmp_path: Path, tail: str) -> Path:
    path = tmp_path / "job.py"
    path.write_text(MODEL + tail)
    return path


def meta(out: Path) -> dict:
    return json.loads((out / "meta.json").read_text())


def linear_calls(out: Path) -> int:
    events = json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))["traceEvents"]
    return sum(1 for e in events if e.get("name") == "aten::linear")


def test_force_refuses_a_folder_with_user_files_and_keeps_them(tmp_path):
    job = script(tmp_path, "")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "train.py").write_text("mine")
    proc = run_cli("capture", job, "-o", ".", "--force", cwd=proj)
    assert proc.returncode == 2 and "not a tracekit bundle" in proc.stderr
    assert sorted(p.name for p in proj.iterdir()) == ["train.py"]
    # a real bundle with one user file added: still refused, nothing deleted
    assert run_cli("capture", job, "-o", proj / "b").returncode == 0
    before = sorted(p.name for p in (proj / "b").iterdir())
    (proj / "b" / "notes.md").write_text("mine")
    proc = run_cli("capture", job, "-o", proj / "b", "--force")
    assert proc.returncode == 2 and "did not write (notes.md)" in proc.stderr
    assert sorted(p.name for p in (proj / "b").iterdir()) == sorted(before + ["notes.md"])
    # a meta.json that tracekit did not write is no bundle either
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "meta.json").write_text('{"framework": "torch"}')
    with pytest.raises(TracekitError, match="not a tracekit bundle"):
        bundle.prepare_out(fake, force=True)
    assert (fake / "meta.json").exists()


def test_force_replaces_a_bundle_of_its_own_files(tmp_path):
    out = tmp_path / "b"
    assert run_cli("capture", script(tmp_path, ""), "-o", out).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["et.json.gz", "meta.json", "trace.json.gz"]
    proc = run_cli("capture", script(tmp_path, "m(torch.ones(3, 8))\n"), "-o", out, "--force")
    assert proc.returncode == 0, proc.stderr
    assert linear_calls(out) == 3 and meta(out)["state"] == "done"


def test_relative_out_survives_a_script_that_changes_folder(tmp_path):
    job = script(tmp_path, "import os\nos.chdir('/')\nraise SystemExit(4)\n")
    proc = run_cli("capture", job, "-o", "rel", cwd=tmp_path)
    assert proc.returncode == 4, proc.stderr
    assert meta(tmp_path / "rel")["exit_code"] == 4 and linear_calls(tmp_path / "rel") == 2


def test_script_closing_stdout_and_stderr(tmp_path):
    job = script(tmp_path, "import sys\nprint('out')\nsys.stdout.close()\nsys.stderr.close()\n")
    proc = run_cli("capture", job, "-o", tmp_path / "b")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "out\n" and meta(tmp_path / "b")["state"] == "done"


@pytest.mark.parametrize("tail, code", [
    ("import os\nos._exit(3)\n", 3),
    ("import os, signal, time\nos.kill(os.getpid(), signal.SIGTERM)\ntime.sleep(30)\n", 143),
])
def test_os_exit_and_sigterm_still_write_the_bundle(tmp_path, tail, code):
    proc = run_cli("capture", script(tmp_path, tail), "-o", tmp_path / "b")
    assert proc.returncode == code, proc.stderr
    m = meta(tmp_path / "b")
    assert m["state"] == "done" and m["exit_code"] == code
    assert linear_calls(tmp_path / "b") == 2


def test_sigkill_leaves_a_bundle_that_says_so(tmp_path):
    job = script(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    proc = run_cli("capture", job, "-o", tmp_path / "b")
    assert proc.returncode == -9
    assert meta(tmp_path / "b")["state"] == "running"
    proc = run_cli("explain", tmp_path / "b")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "capture did not finish" in proc.stderr


def test_only_inductor_kernel_sources_are_copied(tmp_path):
    cache = tmp_path / "torchinductor_user" / "ab"
    cache.mkdir(parents=True)
    source = cache / ("c" + "k" * 51 + ".py")
    source.write_text("def triton_poi_fused_relu_0(in_out_ptr0, xnumel, XBLOCK): pass\n")
    other = cache / "notes.py"
    other.write_text("x = 1\n")
    link = cache / ("c" + "p" * 51 + ".py")
    os.symlink("/etc/passwd", link)
    roots = [str(tmp_path / "torchinductor_user")]
    assert bundle.is_kernel_source(str(source), roots)
    assert not bundle.is_kernel_source("/etc/passwd", roots + ["/etc"])    # name is not a hash
    assert not bundle.is_kernel_source(str(other), roots)
    assert not bundle.is_kernel_source(str(link), roots)                  # resolves outside the cache
    assert not bundle.is_kernel_source(str(source), [str(tmp_path / "elsewhere")])
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = roots[0]
    try:
        copied = bundle.copy_kernel_files({str(source), "/etc/passwd", str(link)}, tmp_path / "kernels")
    finally:
        del os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert copied == {str(source): source.name, "/etc/passwd": None, str(link): None}
    assert [p.name for p in (tmp_path / "kernels").iterdir()] == [source.name]
