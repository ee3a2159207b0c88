"""Median and spread of repeated timings."""

from __future__ import annotations

import statistics


def summarize(seconds: list[float]) -> dict:
    """median, min, max, quartiles (µs) and the spread: interquartile range over the median (%)."""
    us = sorted(s * 1e6 for s in seconds)
    n = len(us)
    if n == 0:
        return {"n": 0, "median_us": None, "min_us": None, "max_us": None, "p25_us": None, "p75_us": None,
                "spread_pct": None}
    if n >= 2:
        q = statistics.quantiles(us, n=4, method="inclusive")
        p25, p75 = q[0], q[2]
    else:
        p25 = p75 = us[0]
    med = statistics.median(us)
    return {"n": n, "median_us": med, "min_us": us[0], "max_us": us[-1], "p25_us": p25, "p75_us": p75,
            "spread_pct": (100.0 * (p75 - p25) / med) if med > 0 and n >= 2 else None}
