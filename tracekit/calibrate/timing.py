"""How calibrate times a piece of work: a warm-up call, one probe call to size the batch, then
``repeats`` batches of back-to-back calls, each batch timed as a whole (per-call time = batch time /
calls). Clocks: ``tracekit.measure.step.Clock`` (CUDA events on a CUDA device, the wall clock on the
CPU) and ``WallClock`` for devices that run asynchronously without events tracekit uses (MPS, MLX)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from tracekit.measure.stats import summarize
from tracekit.measure.step import batch_times


class WallClock:
    """The wall clock around work queued on an asynchronous device: waits for it at both ends."""

    kind = "wall clock (time.perf_counter), device synchronized at both ends"

    def __init__(self, sync: Callable[[], object]):
        self.sync = sync

    def start(self) -> float:
        self.sync()
        return time.perf_counter()

    def stop(self, mark: float) -> float:
        self.sync()
        return time.perf_counter() - mark


@dataclass(frozen=True)
class Plan:
    """How long and how big: ``repeat_s`` per timed batch, ``repeats`` batches; the matrix size doubles
    from ``min_n`` while the next size's call (8x the work) is expected to take at most ``call_s``, up
    to ``max_n``; ``buffer_bytes`` for the copy and elementwise buffers; ``graph_kernels`` one-element
    kernels per CUDA-graph replay; ``rest_s`` idle seconds before each matrix rate."""

    quick: bool
    repeats: int
    repeat_s: float
    call_s: float
    min_n: int
    max_n: int
    buffer_bytes: int
    graph_kernels: int = 1000
    rest_s: float = 0.0          # idle before each matrix rate: each starts from an idle device, not hot


@dataclass(frozen=True)
class Sample:
    """Seconds per call, one entry per timed batch of ``calls`` back-to-back calls."""

    seconds: tuple[float, ...]
    calls: int
    timer: str

    @property
    def median_s(self) -> float:
        return summarize(list(self.seconds))["median_us"] / 1e6

    @property
    def best_s(self) -> float:
        return min(self.seconds)

    @property
    def spread_pct(self) -> float | None:
        return summarize(list(self.seconds))["spread_pct"]


def once(fn: Callable[[], object], clock) -> float:
    """Seconds of one call, the device idle before it and waited for after it."""
    clock.sync()
    mark = clock.start()
    fn()
    return clock.stop(mark)


def sample(fn: Callable[[], object], clock, plan: Plan, most: int = 1_000_000) -> Sample:
    """Warm up, size the batch to ``plan.repeat_s`` from one probe call, time ``plan.repeats`` batches."""
    fn()                                    # warm-up: library handles, JIT kernels, allocator, caches
    probe = once(fn, clock)
    calls = max(1, min(most, int(plan.repeat_s / max(probe, 1e-9))))
    return Sample(tuple(batch_times(fn, clock, plan.repeats, calls)), calls, clock.kind)


def grow(make: Callable[[int], Callable[[], object]], clock, plan: Plan) -> tuple[int, Callable[[], object]]:
    """The matrix size: the largest n, doubling from ``plan.min_n`` up to ``plan.max_n``, whose call is
    expected (from n³ and the last size timed, best of two calls) to take at most ``plan.call_s``;
    returns n and its call (inputs of smaller sizes are dropped). Aiming at a budget rather than stopping
    at the first slow call keeps a busy CPU's scheduling delays from pinning the size at the smallest."""
    n = plan.min_n
    while True:
        fn = make(n)
        fn()                                # warm-up before the probes
        if n * 2 > plan.max_n or 8 * min(once(fn, clock) for _ in range(2)) > plan.call_s:
            return n, fn
        del fn
        n *= 2
