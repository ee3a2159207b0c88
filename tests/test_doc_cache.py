"""A warm explain -f json (tracekit.model.doc_cache): the kept output is the output, its warnings come back
on stderr, it is served without pandas, and the key follows the options and the files that change the
document. Real inputs: the H200 GPT compile bundle (kernel sources and an execution trace) and the
CPU-only DDP rank bundle (a warning). Subprocesses: a user's fresh process, with the cache on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracekit.model import doc_cache

ROOT = Path(__file__).resolve().parents[1]
GPT = ROOT / "captures/h200/models/gpt_train_compile"
CPU_RANK = ROOT / "captures/cpu/ddp2/bundle/rank0"


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRACEKIT_NO_CACHE", raising=False)
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def explain(env, *args, pandas_probe: bool = False) -> subprocess.CompletedProcess:
    code = ("import sys; from tracekit.cli.app import run; c = run(sys.argv[1:]); "
            + ("print('pandas' in sys.modules, file=sys.stderr); " if pandas_probe else "") + "sys.exit(c)")
    return subprocess.run([sys.executable, "-c", code, "explain", *map(str, args)], capture_output=True,
                          cwd=ROOT, env=env, timeout=300)


def kept_files(env) -> list[Path]:
    return sorted(Path(env["TRACEKIT_CACHE_DIR"]).rglob("*.explain.json"))


def test_warm_output_is_the_cold_output_and_needs_no_pandas(cache_env):
    fresh = explain(cache_env, GPT, "-f", "json", "--no-cache")
    assert kept_files(cache_env) == []                                  # --no-cache keeps nothing
    cold = explain(cache_env, GPT, "-f", "json")
    assert len(kept_files(cache_env)) == 1
    warm = explain(cache_env, GPT, "-f", "json", pandas_probe=True)
    assert fresh.returncode == cold.returncode == warm.returncode == 0
    assert warm.stdout == cold.stdout == fresh.stdout
    assert warm.stderr.decode().strip().endswith("False")              # served without importing pandas


def test_warnings_come_back_once(cache_env):
    cold = explain(cache_env, CPU_RANK, "-f", "json")
    warm = explain(cache_env, CPU_RANK, "-f", "json")
    assert "CPU-only trace: no floors" in cold.stderr.decode()         # choose_spec's warning for this rank
    assert warm.stderr == cold.stderr and warm.stdout == cold.stdout


def test_options_and_files_that_change_the_document_change_the_key(cache_env, tmp_path, monkeypatch):
    bundle = tmp_path / "gpt"
    shutil.copytree(GPT, bundle)
    base = doc_cache.doc_key(bundle, None, None, None, 0, None)
    others = [doc_cache.doc_key(bundle, "aten::mm", None, None, 0, None),
              doc_cache.doc_key(bundle, None, "a100-sxm-80gb", None, 0, None),
              doc_cache.doc_key(bundle, None, None, str(ROOT / "tracekit/specs/h100-sxm.toml"), 0, None),
              doc_cache.doc_key(bundle, None, None, None, 1, None),
              doc_cache.doc_key(bundle, None, None, None, 0, str(bundle / "et.json.gz"))]
    assert base is not None and len({base, *others}) == 6
    assert doc_cache.doc_key(bundle, None, None, None, 0, None) == base
    assert doc_cache.doc_key(str(bundle) + "/", None, None, None, 0, None) != base     # the document names the path
    source = next((bundle / "kernels").glob("*.py"))
    source.write_text(source.read_text() + "\n# edited\n")              # a kernel source changes the cost
    assert doc_cache.doc_key(bundle, None, None, None, 0, None) != base
    monkeypatch.setenv("TRACEKIT_NO_CACHE", "1")
    assert doc_cache.doc_key(bundle, None, None, None, 0, None) is None


def test_a_damaged_kept_output_is_ignored_and_written_again(cache_env):
    cold = explain(cache_env, CPU_RANK, "-f", "json")
    (entry,) = kept_files(cache_env)
    entry.write_bytes(b"not json at all")
    again = explain(cache_env, CPU_RANK, "-f", "json")
    assert again.returncode == 0 and again.stdout == cold.stdout
    assert entry.read_bytes().endswith(cold.stdout)
