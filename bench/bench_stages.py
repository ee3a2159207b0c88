"""Issue 26: where a cold explain's CPU goes after the load, stage by stage, in process.

The trace is loaded once per round (not timed); then annotate (classes, fused ops, costs, roofline),
the document (explain_dict with its step rows, phases and fusion summary; the diagnosis) and the JSON
text are timed with the process's CPU clock, the cycle collector off as explain runs them. Each stage
is its function's inclusive time (a stage inside another counts in both); the minimum over --repeat
rounds after one untimed round (lazy imports, first compiles), over --alternate processes. --before TREE
times another tree (a `git archive` of an older commit) the same way, its processes taking turns with
this tree's, so the two print side by side.

    python bench/bench_stages.py [TRACE ...] [--repeat 4] [--alternate 3] [--before TREE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACES = [HERE / "traces" / "big_train_24layers_6steps.json.gz", HERE / "traces" / "cpu_small_model_2000steps.json.gz"]
STAGES = [("tracekit.analyze", "annotate", []),
          ("tracekit.fusion.names", "annotate_fusion", ["tracekit.analyze"]),
          ("tracekit.cost.roofline", "cost_rows", ["tracekit.analyze"]),
          ("tracekit.cost.roofline", "apply_roofline", ["tracekit.analyze"]),
          ("tracekit.report.document", "explain_dict", []),
          ("tracekit.report.document", "step_records", []),
          ("tracekit.report.document", "fusion_summary", []),
          ("tracekit.report.document", "step_phases", []),
          ("tracekit.report.diagnosis", "diagnose", [])]


def child(tree: str, trace: str, repeat: int) -> dict:
    """In a process whose tracekit is ``tree``'s: stage -> minimum CPU ms."""
    import gc
    import importlib
    import time

    sys.path.insert(0, tree)
    gc.disable()
    from tracekit.lean import pandas_without_arrow
    pandas_without_arrow()
    import orjson

    import tracekit.analyze as analyze
    from tracekit.outputs import json_chunks
    from tracekit.report import diagnosis

    spent: dict = {}

    def timed(f, key):
        def g(*a, **k):
            t = time.process_time()
            try:
                return f(*a, **k)
            finally:
                spent[key] = spent.get(key, 0.0) + time.process_time() - t
        return g

    for mod, name, also in STAGES:
        m = importlib.import_module(mod)
        g = timed(getattr(m, name), name)
        for other in [m] + [importlib.import_module(a) for a in also]:
            setattr(other, name, g)
    p = Path(trace)
    best: dict = {}
    for r in range(repeat + 1):
        trace_obj = analyze.load_normalised(p, None, analyze.bundle_dir_of(p), analyze.default_folder(p), False)
        spent.clear()
        t0 = time.process_time()
        doc = diagnosis.document(analyze.annotate(trace_obj, None, None, analyze.bundle_dir_of(p), None))
        t1 = time.process_time()
        for _ in json_chunks(doc, orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS):
            pass
        spent["JSON text"] = time.process_time() - t1
        spent["all of the above"] = time.process_time() - t0
        if r:
            for k, v in spent.items():
                best[k] = min(best.get(k, v), v)
    return {k: round(v * 1e3, 1) for k, v in best.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="*", default=[str(t) for t in TRACES])
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--before", help="another tracekit tree, timed the same way beside this one")
    ap.add_argument("--alternate", type=int, default=3, help="processes per tree, taking turns (default 3)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.repeat)))
        return
    trees = [("this tree", str(HERE.parent))] + ([("before", str(Path(args.before).resolve()))] if args.before else [])
    env = {**os.environ, "TRACEKIT_NO_CACHE": "1", "OPENBLAS_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    print(f"CPU ms per stage, minimum of {args.alternate} processes x {args.repeat} rounds in process, the trees "
          f"taking turns; load average {os.getloadavg()[0]:.1f}")
    for trace in args.traces:
        got: list[dict] = [{} for _ in trees]
        for _ in range(args.alternate):                # the trees take turns: a busy spell slows both
            for g, (_, tree) in zip(got, trees):
                out = json.loads(subprocess.run([sys.executable, __file__, "--child", tree, trace, "--repeat",
                                                 str(args.repeat)], capture_output=True, text=True, check=True,
                                                env=env, cwd=tree).stdout)
                for k, v in out.items():
                    g[k] = min(g.get(k, v), v)
        print(f"\n{Path(trace).name}")
        print("| stage | " + " | ".join(name for name, _ in trees) + " |")
        print("|---|" + "---|" * len(trees))
        for key in got[0]:
            print(f"| {key} | " + " | ".join(f"{g.get(key, float('nan')):.1f}" for g in got) + " |")


if __name__ == "__main__":
    main()
