"""Does a change leave explain's output alone? Runs `tracekit explain INPUT -f json --no-cache` on every
committed input (capture bundles, MLX graph folders, the traces in captures/, tests/data/ and
bench/traces/) and writes each stdout (and exit status) to OUT_DIR; with --against, compares with the
outputs an earlier run wrote and lists every input whose output differs (the tree's own path, which
the output names, reads <ROOT>).

    PYTHONPATH=$PWD python bench/same_output.py OUT_DIR [--against BASE_DIR] [--only SUBSTRING]

Run it on the old tree into BASE_DIR, then on the new one with --against BASE_DIR.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_NAMES = ("et.json", "meta.json", "MANIFEST.json", "graph_capture_", "h200-calibrated.json",
              "first_run_median", "env.json")


def inputs() -> list[Path]:
    """Bundle and graph folders, and loose trace files (not inside a bundle), sorted."""
    found: set[Path] = set()
    for base in ("captures", "tests/data", "bench/traces"):
        for p in (ROOT / base).rglob("*"):
            if p.is_dir() and ((p / "meta.json").exists() and (p / "trace.json.gz").exists()
                               or p.name == "graphs"):
                found.add(p if p.name != "graphs" else p.parent)
            elif p.is_file() and p.name.endswith((".json", ".json.gz", ".dot")) and not any(
                    s in p.name for s in SKIP_NAMES):
                if not (p.parent / "meta.json").exists() and p.parent.name != "graphs":
                    found.add(p)
    return sorted(found)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--against")
    ap.add_argument("--only")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRACEKIT_NO_CACHE": "1"}
    differ = []
    for p in inputs():
        rel = str(p.relative_to(ROOT))
        if args.only and args.only not in rel:
            continue
        run = subprocess.run([sys.executable, "-m", "tracekit", "explain", str(p), "-f", "json", "--no-cache"],
                             capture_output=True, env=env, cwd=ROOT, timeout=600)
        name = rel.replace("/", "__")
        text = run.stdout.replace(str(ROOT).encode(), b"<ROOT>")       # the two trees' paths differ
        (out / name).write_bytes(f"rc={run.returncode}\n".encode() + text)
        if args.against:
            old = Path(args.against) / name
            same = old.exists() and old.read_bytes() == (out / name).read_bytes()
            if not same:
                differ.append(rel)
            print(f"{'same' if same else 'DIFFERS'}  rc={run.returncode}  {rel}", flush=True)
        else:
            print(f"rc={run.returncode}  {rel}", flush=True)
    if args.against:
        print(f"{len(differ)} differ" + (": " + ", ".join(differ) if differ else ""))
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
