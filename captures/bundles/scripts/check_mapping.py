"""Print graph-replayed rows next to the eager twin: op, dims, FLOPs, bytes (explain --format json files).

python check_mapping.py eager.explain.json graph.explain.json
"""
import collections
import json
import sys


def rows(path):
    doc = json.load(open(path))
    docs = doc if isinstance(doc, list) else [doc]
    return [k for d in docs for k in d["kernels"]]


def key(k):
    return (k.get("op"), json.dumps(k.get("op_dims")), k.get("flops"), k.get("bytes"))


eager = rows(sys.argv[1])
eager_keys = collections.Counter(key(k) for k in eager if k.get("kind") == "kernel")
print("eager kernel (op, dims, flops, bytes):", dict(eager_keys))
for path in sys.argv[2:]:
    ks = [k for k in rows(path) if k.get("graph")]
    c = collections.Counter((k.get("op_source"), key(k)) for k in ks)
    print(path, "graph rows:", len(ks))
    for (src, kk), n in c.most_common():
        print(f"   {n:4d} {src!r} {kk} {'== eager' if kk in eager_keys else 'NOT in eager'}")
