"""Internal kernel-name matching on hostile 1 MB names (issue 27): time per name at 1, 2 and 4 MB.

Linear matching doubles with the size; the regexes this replaced were quadratic (``cutlass.*(?:gemm|tensorop)``
in fusion/names.py: 38-84 s on a 140 KB name; ``triton_tem_fused_(?:\\w*_)?(?:mm|...)`` in
classify/categories.py: 13-37 s; ``cudnn::(?!.*gemm)`` likewise). Names are synthetic (one token repeated).

    PYTHONPATH=. python bench/bench_regex.py
"""

from __future__ import annotations

import re
import sys
import time

from tracekit.classify.categories import category_of
from tracekit.fusion.names import fused_ops_of

TOKENS = {"cutlass": "cutlass", "triton_tem": "triton_tem_fused_", "cudnn": "cudnn::", "tensorop": "cutlass_x_",
          "word": "a"}
END = {"cudnn": "gemm"}          # a gemm at the very end: the old lookahead scanned to it from every cudnn::
OLD = {"cutlass": r"cutlass.*(?:gemm|tensorop)", "triton_tem": r"triton_tem_fused_(?:\w*_)?(?:mm|addmm|bmm|baddbmm)",
       "cudnn": r"cudnn::(?!.*gemm)"}


def seconds(fn, name: str) -> float:
    t = time.perf_counter()
    fn(name)
    return time.perf_counter() - t


def main(old_kb: int = 0) -> None:
    print(f"{'name':12} {'MB':>3} {'category_of s':>14} {'fused_ops_of s':>15}")
    for label, token in TOKENS.items():
        for mb in (1, 2, 4):
            name = token * (mb * (1 << 20) // len(token)) + END.get(label, "")
            print(f"{label:12} {mb:>3} {seconds(category_of, name):>14.3f} "
                  f"{seconds(lambda n: fused_ops_of(n, None), name):>15.3f}")
    if old_kb:                                   # the replaced regexes, on a smaller name (they are quadratic)
        for label, rx in OLD.items():
            name = TOKENS[label] * (old_kb * 1024 // len(TOKENS[label])) + END.get(label, "")
            print(f"old {label} regex on {old_kb} KB: {seconds(re.compile(rx).search, name):.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
