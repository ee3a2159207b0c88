"""Record the CPU-only benchmark trace: tests/scripts/small_model.py's model (conv + linear + softmax,
batch 4) called 2,000 times under torch.profiler with shapes and Python stacks, one ProfilerStep#N
range per call. About 51 MB of JSON, 148k events (98k python_function, 48k cpu_op, 2,000 steps).

    python bench/make_cpu_trace.py [OUT.json.gz]      (needs torch; default bench/traces/...)
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "scripts"))
from small_model import Net  # noqa: E402

STEPS = 2000


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "traces" / "cpu_small_model_2000steps.json.gz"
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(4, 3, 8, 8)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                 record_shapes=True, with_stack=True) as prof:
        for i in range(STEPS):
            with torch.profiler.record_function(f"ProfilerStep#{i}"):
                model(x)
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(plain))
        with open(plain, "rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
    print(f"{out}: {out.stat().st_size / 1e6:.1f} MB gzipped (torch {torch.__version__})")


if __name__ == "__main__":
    main()
