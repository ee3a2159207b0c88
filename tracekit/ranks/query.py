"""The cross-rank questions, as DuckDB queries over the per-rank tables (handed over in memory as Arrow).

- per rank: kernel, compute, communication and copy time, floor and gap (time / floor over the rows
  with a floor, their op calls' sibling kernels included), step time (median, mean);
- per step: each rank's step time; the slowest rank and by how much it exceeds the median rank; skew
  = (slowest - fastest) / median;
- communication vs compute overlap: the time of each communication kernel that some compute kernel
  (any other kernel that is not a copy) runs during, summed per rank;
- collectives matched across ranks: the k-th call of one collective in one process group is the same
  call on every rank. A rank that reached it early waits inside the kernel, so the shortest kernel of a
  matched call is the transfer and each rank's excess over it is waiting (``wait_us``); the rank with
  the shortest kernel arrived last. Durations only: no clock is compared across hosts.

Every rank keeps its own row (``key``), also when two traces claim the same rank.
"""

from __future__ import annotations

import numpy as np


STEPS_FILE = "steps.parquet"

PER_RANK = """
SELECT key, count(*) AS rows, count(*) FILTER (kind = 'kernel') AS kernels,
  coalesce(sum(dur_us) FILTER (kind = 'kernel'), 0) AS kernel_us,
  coalesce(sum(dur_us) FILTER (kind = 'kernel' AND category IS DISTINCT FROM 'communication'), 0) AS compute_us,
  coalesce(sum(dur_us) FILTER (category = 'communication'), 0) AS comm_us,
  coalesce(sum(dur_us) FILTER (kind = 'kernel' AND category = 'communication'), 0) AS comm_kernel_us,
  coalesce(sum(dur_us) FILTER (kind IN ('memcpy', 'memset')), 0) AS copy_us,
  sum(floor_us) AS floor_us, coalesce(sum(dur_us) FILTER (covered), 0) AS covered_us,
  sum(floor_us) FILTER (category = 'communication') AS comm_floor_us,
  coalesce(sum(dur_us) FILTER (covered AND category = 'communication'), 0) AS comm_covered_us,
  sum(bytes) FILTER (category = 'communication') AS bus_bytes
FROM k GROUP BY key"""

STEP_TIMES = """
SELECT key, step, max(end_us) - min(start_us) AS step_us FROM s GROUP BY key, step"""

PER_STEP = """
WITH per AS (SELECT step, count(*) AS ranks, median(step_us) AS median_us, min(step_us) AS min_us,
  max(step_us) AS max_us, arg_max(key, step_us) AS slowest_key FROM st GROUP BY step),
named AS (SELECT step, any_value(name) AS name FROM s GROUP BY step)
SELECT per.step, named.name, ranks, median_us, min_us, max_us, slowest_key
FROM per JOIN named USING (step) ORDER BY per.step"""

OVERLAP = """
WITH comp AS (SELECT key, start_us AS b, start_us + dur_us AS e FROM k
              WHERE kind = 'kernel' AND category IS DISTINCT FROM 'communication' AND dur_us > 0),
ordered AS (SELECT key, b, e, max(e) OVER (PARTITION BY key ORDER BY b, e
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end FROM comp),
islands AS (SELECT key, b, e, sum(CASE WHEN prev_end IS NULL OR b > prev_end THEN 1 ELSE 0 END)
            OVER (PARTITION BY key ORDER BY b, e ROWS UNBOUNDED PRECEDING) AS island FROM ordered),
busy AS (SELECT key, min(b) AS b, max(e) AS e FROM islands GROUP BY key, island),
comm AS (SELECT key, row_number() OVER () AS id, start_us AS b, start_us + dur_us AS e FROM k
         WHERE kind = 'kernel' AND category = 'communication'),
hit AS (SELECT comm.key, comm.id, sum(least(comm.e, busy.e) - greatest(comm.b, busy.b)) AS us
        FROM comm JOIN busy ON comm.key = busy.key AND busy.b < comm.e AND busy.e > comm.b GROUP BY ALL)
SELECT key, sum(us) AS overlap_us FROM hit GROUP BY key"""

CALLS = """
SELECT key, coll, coalesce("group", '') AS grp, coll_bytes, bytes AS bus_bytes, dur_us, floor_us,
  row_number() OVER (PARTITION BY key, coalesce("group", ''), coll ORDER BY start_us) - 1 AS seq
FROM k WHERE category = 'communication' AND coll IS NOT NULL"""

MATCHED = """
SELECT grp, coll, seq, count(*) AS ranks, min(dur_us) AS transfer_us, arg_min(key, dur_us) AS last_key,
  max(coll_bytes) AS size, max(bus_bytes) AS bus_bytes, max(floor_us) AS floor_us
FROM calls GROUP BY grp, coll, seq"""

PER_COLLECTIVE = """
SELECT grp, coll, count(*) AS calls, max(ranks) AS ranks, sum(size) AS bytes, sum(bus_bytes) AS bus_bytes,
  sum(transfer_us) AS transfer_us, sum(floor_us) AS floor_us, count(*) FILTER (ranks < max_ranks) AS partial
FROM (SELECT *, max(ranks) OVER (PARTITION BY grp, coll) AS max_ranks FROM matched)
GROUP BY grp, coll ORDER BY sum(transfer_us) DESC NULLS LAST, grp, coll"""

WAITS = """
SELECT calls.key, sum(calls.dur_us - matched.transfer_us) AS wait_us,
  count(*) FILTER (matched.last_key = calls.key AND matched.ranks > 1) AS last_arrivals
FROM calls JOIN matched USING (grp, coll, seq) GROUP BY calls.key"""

COUNTS = """
SELECT grp, coll, key, count(*) AS n FROM calls GROUP BY ALL ORDER BY grp, coll, key"""


def _rows(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def _columns(con, sql: str) -> dict:
    """A query's answer as columns (NumPy arrays; strings as one Arrow array), not a dict per row: the
    per-step answer has a row per step (issue 27: 100k steps)."""
    rel = con.sql(sql)
    table = (getattr(rel, "to_arrow_table", None) or rel.arrow)()      # DuckDB 2 / 1
    return {name: (col.combine_chunks() if str(col.type) == "string" else col.to_numpy())
            for name, col in zip(table.column_names, table.columns)}


def _step_times(con) -> dict[int, list[float]]:
    """Each rank's step times (by ``key``), in step order."""
    cols = con.execute("SELECT key, step_us FROM st ORDER BY key, step").fetchnumpy()
    keys, times = np.asarray(cols["key"]), np.asarray(cols["step_us"], dtype=float)
    cuts = np.flatnonzero(np.diff(keys)) + 1
    return {int(k[0]): t.tolist() for k, t in zip(np.split(keys, cuts), np.split(times, cuts)) if len(k)}


def _views(con, tables: list[bytes], steps) -> None:
    """The per-rank kernel tables (Parquet bytes) and the steps (an Arrow table) as DuckDB views ``k``
    and ``s``, handed over in memory: no file path (nor a glob character in one) reaches DuckDB."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if tables:
        kernels = pa.concat_tables([pq.read_table(pa.BufferReader(t)) for t in tables], promote_options="permissive")
        con.register("k_arrow", kernels)
        con.execute("CREATE VIEW k AS SELECT * FROM k_arrow")
    else:
        con.execute("CREATE TABLE k (key BIGINT, rank BIGINT, name VARCHAR, kind VARCHAR, category VARCHAR, "
                    "stream BIGINT, start_us DOUBLE, dur_us DOUBLE, step BIGINT, flops DOUBLE, bytes DOUBLE, "
                    "floor_us DOUBLE, covered BOOLEAN, coll VARCHAR, coll_bytes DOUBLE, \"group\" VARCHAR, "
                    "group_size BIGINT)")
    con.register("s_arrow", steps)
    con.execute("CREATE VIEW s AS SELECT * FROM s_arrow")
    con.execute(f"CREATE TEMP TABLE calls AS {CALLS}")
    con.execute(f"CREATE TEMP TABLE matched AS {MATCHED}")


def query_all(tables: list[bytes], steps) -> dict[str, list[dict]]:
    """Every cross-rank query's rows, by name (``step_times``: each rank's step times by key; ``per_step``:
    columns): ``tables`` each rank's kernel table as Parquet bytes,
    ``steps`` every rank's steps (an Arrow table)."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        _views(con, tables, steps)
        # the per-step queries on one thread: a row per step per rank, and DuckDB's per-thread hash tables
        # took 17 MB more at 2x100k steps; their answers (max - min, median, count) do not depend on the
        # order, and the slowest of tied ranks is then always the first (two threads picked either)
        con.execute("SET threads = 1")
        con.execute(f"CREATE TEMP TABLE st AS {STEP_TIMES}")
        step_times, per_step = _step_times(con), _columns(con, PER_STEP)
        con.execute("RESET threads")
        return {"per_rank": _rows(con, PER_RANK), "step_times": step_times,
                "per_step": per_step, "overlap": _rows(con, OVERLAP),
                "collectives": _rows(con, PER_COLLECTIVE), "waits": _rows(con, WAITS), "counts": _rows(con, COUNTS)}
    finally:
        con.close()


def steps_table(results: list[dict]):
    """Every rank's steps as one Arrow table."""
    import pyarrow as pa

    from tracekit.ranks.stage import STEP_SCHEMA

    tables = [r["steps"] for r in results if r["steps"] is not None]
    if not tables:
        return pa.table({k: pa.array([], type=getattr(pa, t)()) for k, t in STEP_SCHEMA})
    return pa.concat_tables(tables)                # the ranks' columns shared, not copied


def cross_rank(results: list[dict]) -> dict:
    """The document every multi-rank format is written from (ranks.document)."""
    from tracekit.ranks.document import build

    return build(results, query_all([r["table"] for r in results if r["table"] is not None], steps_table(results)))
