"""Make a SYNTHETIC multi-rank set from one real trace: N copies of it, one per rank, for benchmarks and tests.

Each copy is labelled synthetic (file name ``synthetic_rankNNN.json.gz``, a top-level ``tracekit_synthetic``
note, a README in the folder). Rank r of N: every timestamp shifted by r x 37 µs, every id (correlation,
External id, Record function id) offset by r x 10^7 so no two ranks share one, pid + r, distributedInfo
{rank: r, world_size: N}, a collective's ``Group size`` N; compute kernels' durations jittered by up to
±2 % (seeded). One rank can be made a straggler: its compute kernels and steps run ``--slow`` times
longer and it reaches every collective last, so the other ranks' collective kernels last longer (they
wait for it) by the time it lost, capped at half the kernel.

    python bench/make_ranks.py [--base TRACE] [--ranks 64] [--out /tmp/tracekit-synthetic-64]
                               [--straggler R --slow 1.15] [--seed 14]

Default base: HTA's real A100 NCCL trace (tests/data/peers/hta/nccl_parser_config_nccl_data.json.gz).
"""

from __future__ import annotations

import argparse
import gzip
import random
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "tests" / "data" / "peers" / "hta" / "nccl_parser_config_nccl_data.json.gz"
ID_KEYS = ("correlation", "External id", "Record function id")
SHIFT_US = 37.0
ID_STRIDE = 10_000_000


def _comm(e: dict) -> bool:
    return e.get("cat") == "kernel" and str(e.get("name", "")).lower().startswith(("nccl", "rccl"))


def make_rank(doc: dict, rank: int, ranks: int, base: Path, straggler: int | None, slow: float, seed: int) -> dict:
    """One synthetic rank from the parsed base trace (the base is not changed)."""
    rng = random.Random(seed * 100_003 + rank)
    factor = slow if rank == straggler else 1.0
    events = []
    for e in doc["traceEvents"]:
        e = dict(e)
        args = dict(e["args"]) if isinstance(e.get("args"), dict) else None
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] = e["ts"] + rank * SHIFT_US
        if isinstance(e.get("pid"), int):
            e["pid"] = e["pid"] + rank
        if args is not None:
            for k in ID_KEYS:
                if isinstance(args.get(k), int) and args[k] >= 0:
                    args[k] += rank * ID_STRIDE
            if "Group size" in args:
                args["Group size"] = ranks
            e["args"] = args
        if isinstance(e.get("dur"), (int, float)) and e.get("ph") == "X":
            if _comm(e):
                if straggler is not None and rank != straggler:       # waits for the straggler
                    e["dur"] = e["dur"] + min(e["dur"] * 0.5, e["dur"] * (slow - 1.0))
            elif e.get("cat") == "kernel":
                e["dur"] = e["dur"] * factor * (1.0 + rng.uniform(-0.02, 0.02))
            elif str(e.get("name", "")).startswith("ProfilerStep#"):
                e["dur"] = e["dur"] * factor
        events.append(e)
    out = {k: v for k, v in doc.items() if k != "traceEvents"}
    info = dict(out.get("distributedInfo") or {})
    info.update({"rank": rank, "world_size": ranks})
    info.pop("pg_config", None)
    out["distributedInfo"] = info
    out["tracekit_synthetic"] = (f"SYNTHETIC: made by bench/make_ranks.py from {base.name} as rank {rank} of {ranks}"
                                 f"{' (the straggler)' if rank == straggler else ''}; not a real capture")
    out["traceEvents"] = events
    return out


def main(argv: list[str] | None = None) -> Path:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, default=BASE)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--straggler", type=int, default=None)
    ap.add_argument("--slow", type=float, default=1.15)
    ap.add_argument("--seed", type=int, default=14)
    a = ap.parse_args(argv)
    out = a.out or Path(f"/tmp/tracekit-synthetic-{a.ranks}")
    out.mkdir(parents=True, exist_ok=True)
    doc = orjson.loads(gzip.decompress(a.base.read_bytes()))
    for rank in range(a.ranks):
        data = orjson.dumps(make_rank(doc, rank, a.ranks, a.base, a.straggler, a.slow, a.seed))
        (out / f"synthetic_rank{rank:03d}.json.gz").write_bytes(gzip.compress(data, compresslevel=1))
    (out / "README.txt").write_text(f"SYNTHETIC multi-rank set: {a.ranks} ranks made by bench/make_ranks.py from the "
                                    f"real trace {a.base.name} (straggler: {a.straggler}, slow {a.slow}, seed {a.seed}). "
                                    "Not a real capture.\n")
    print(out)
    return out


if __name__ == "__main__":
    main()
