"""Make a SYNTHETIC large trace by repeating a real one N times: copy k has every timestamp shifted by
k × (the trace's span + 1 ms), every id (correlation, External id, Record function id, flow ids,
Python ids) offset by k × (the largest id + 1), and ProfilerStep#N renumbered, so the copies are
distinct steps, launches and ops. Written as a stream (one copy in memory at a time), gzipped when
the name ends in .gz. The file says it is synthetic (traceName, and a "synthetic" top-level field).
--one-step drops the ProfilerStep#N events, so the whole trace is one step (a serving trace without
step markers): the N copies' kernels are one step's.

    python bench/make_big.py SOURCE.json.gz N OUT.json[.gz] [--one-step]
"""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

import orjson

ARG_IDS = ("correlation", "External id", "Record function id", "Python id", "Python parent id", "Ev Idx")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _plan(events: list) -> tuple[float, int, int, list]:
    """(time shift per copy, id shift per copy, step shift per copy, the fields each copy rewrites)."""
    t0 = min(float(e["ts"]) for e in events if isinstance(e.get("ts"), (int, float)))
    t1 = max(float(e["ts"]) + float(e.get("dur", 0) or 0) for e in events if isinstance(e.get("ts"), (int, float)))
    biggest, steps, fields = 0, 0, []
    for e in events:
        if isinstance(e.get("ts"), (int, float)):
            fields.append((e, "ts", e["ts"], "t"))
        if isinstance(e.get("id"), int):
            fields.append((e, "id", e["id"], "i"))
            biggest = max(biggest, e["id"])
        args = e.get("args")
        if isinstance(args, dict):
            for key in ARG_IDS:
                if isinstance(args.get(key), int) and not isinstance(args[key], bool):
                    fields.append((args, key, args[key], "i"))
                    biggest = max(biggest, args[key])
        m = STEP.match(e.get("name", "")) if isinstance(e.get("name"), str) else None
        if m:
            fields.append((e, "name", int(m.group(1)), "s"))
            steps = max(steps, int(m.group(1)) + 1)
    return t1 - t0 + 1000.0, biggest + 1, steps, fields


def main() -> None:
    one_step = "--one-step" in sys.argv
    argv = [a for a in sys.argv[1:] if a != "--one-step"]
    src, copies, out = Path(argv[0]), int(argv[1]), Path(argv[2])
    raw = gzip.decompress(src.read_bytes()) if src.suffix == ".gz" else src.read_bytes()
    doc = orjson.loads(raw)
    events = doc.pop("traceEvents")
    if one_step:
        events = [e for e in events if not (isinstance(e.get("name"), str) and STEP.match(e["name"]))]
    dt, did, dstep, fields = _plan(events)
    doc["traceName"] = (f"SYNTHETIC: {src.name} repeated {copies}x"
                        f"{' as one step' if one_step else ''} (bench/make_big.py)")
    doc["synthetic"] = True
    head = orjson.dumps(doc)[:-1] + b', "traceEvents": [\n'
    opener = gzip.open(out, "wb", compresslevel=1) if out.suffix == ".gz" else open(out, "wb")
    size = 0
    with opener as fh:
        size += fh.write(head)
        for k in range(copies):
            for obj, key, base, kind in fields:
                obj[key] = base + k * dt if kind == "t" else base + k * did if kind == "i" else \
                    f"ProfilerStep#{base + k * dstep}"
            text = orjson.dumps(events)
            size += fh.write(text[1:-1])
            size += fh.write(b",\n" if k < copies - 1 else b"\n")
        size += fh.write(b"]}\n")
    print(f"{out}: {copies} copies of {len(events)} events (synthetic{', one step' if one_step else ''}), "
          f"{size} bytes of JSON")


if __name__ == "__main__":
    main()
