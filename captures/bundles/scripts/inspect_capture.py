"""What a graph capture leaves in a Kineto trace: events inside each capture window, replay rows.

python inspect_capture.py trace.json.gz
"""
import collections
import gzip
import json
import sys

ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
X = [e for e in ev if e.get("ph") == "X"]
rt = [e for e in X if e.get("cat") in ("cuda_runtime", "cuda_driver")]
print("runtime/driver names:", dict(collections.Counter(e["name"] for e in rt)))
marks = [e for e in X if str(e.get("name", "")).startswith("tracekit::graph_capture#")]
for m in marks:
    t0, t1 = m["ts"], m["ts"] + m["dur"]
    inside = [e for e in X if t0 <= e["ts"] <= t1 and e.get("tid") == m.get("tid")]
    print(m["name"], "events inside:", dict(collections.Counter((e.get("cat"), e["name"]) for e in inside)))
    shown = set()
    for e in inside:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and e["name"] not in shown:
            shown.add(e["name"])
            print("   ", json.dumps(e)[:400])
corr = {e["args"].get("correlation") for e in rt if "GraphLaunch" in e["name"]}
dev = [e for e in X if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
rep = [e for e in dev if e.get("args", {}).get("correlation") in corr]
print("graph launches:", len(corr), "replayed device rows:", len(rep),
      dict(collections.Counter(e.get("cat") for e in rep)))
for e in rep[:2]:
    print("   ", json.dumps(e)[:500])
print("kernel arg keys:", dict(collections.Counter(k for e in dev for k in e.get("args", {}))))
