"""Multi-rank runs: one trace per rank, analysed rank by rank in parallel, then across ranks.

``discover`` finds the ranks of a folder (a ``tracekit capture --nproc`` bundle, or a folder of one
trace per rank); ``stage`` is the per-rank work (load through the cache, normalise, cost, then a small
Parquet table of the rank's kernels); ``run`` runs the stages serially, on a local process pool or on
Dask distributed; ``query`` answers the cross-rank questions with DuckDB over those Parquet tables
(step time per rank, stragglers, skew, gap to the floor, collectives matched across ranks, how much
communication overlaps computation). docs/ranks.md.
"""
