"""Capture the committed MLX graphs: seed and 2-layer MLP, lazy and mx.compile, on this machine.

python3 captures/mlx/capture.py            (from the repository root; needs mlx and g++)
Each configuration runs in a fresh process (MLX decides once per process whether it can fuse) and
writes captures/mlx/<name>/ as ``tracekit capture tests/scripts/<script> -o <name> -- <args>`` would.
"""
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parents[1] / "tests" / "scripts"
RUNS = {
    "seed_lazy_bf16_b128": ("mlx_seed.py", ["--mode", "lazy", "--dtype", "bf16", "--batch", "128"]),
    "seed_compile_bf16_b128": ("mlx_seed.py", ["--mode", "compile", "--dtype", "bf16", "--batch", "128"]),
    "mlp_compile_fp32_b8": ("mlx_mlp.py", ["--mode", "compile", "--dtype", "fp32", "--batch", "8"]),
    "mlp_nn_fp32_b8": ("mlx_mlp.py", ["--mode", "nn", "--dtype", "fp32", "--batch", "8"]),
}
CODE = ("import sys; from tracekit.capture.mlx import capture_mlx_script as c; "
        "sys.exit(c(sys.argv[1], sys.argv[3:], sys.argv[2], False))")


def main():
    for name, (script, args) in RUNS.items():
        out = HERE / name
        shutil.rmtree(out, ignore_errors=True)
        print(f"== {name}", flush=True)
        subprocess.run([sys.executable, "-c", CODE, str(SCRIPTS / script), str(out), *args], check=True,
                       cwd=HERE.parents[1])


if __name__ == "__main__":
    main()
