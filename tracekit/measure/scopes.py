"""The timed scopes that need no profiler: continuous (back to back, and CUDA-graph replay), single call
+ sync, end to end with the host↔device copies. Each returns a scope dict (``stats.summarize`` plus
what was timed and how); a scope that cannot run says why (``available: False``, ``reason``)."""

from __future__ import annotations

import time

from tracekit.measure.stats import summarize
from tracekit.measure.step import Clock, Step, batch_times, describe


def scope(name: str, label: str, timer: str, seconds: list[float] | None, **extra) -> dict:
    out = {"scope": name, "label": label, "timer": timer, "available": seconds is not None}
    out.update(summarize(seconds or []))
    out.update(extra)
    return out


def unavailable(name: str, label: str, reason: str, **extra) -> dict:
    return scope(name, label, "-", None, reason=reason, **extra)


def single_call(step: Step, clock: Clock, repeats: int) -> dict:
    """③ one call, then a sync, on the wall clock from a quiet device: what a caller waits for."""
    times = []
    for _ in range(repeats):
        step.prep()
        clock.sync()
        t0 = time.perf_counter()
        step.run()
        clock.sync()
        times.append(time.perf_counter() - t0)
    return scope("single_call", "③ single call + sync", "wall clock (time.perf_counter), device idle before "
                 "the call, synchronized after it", times)


def calls_for(seconds_per_call: float, target_s: float, most: int = 100_000) -> int:
    """How many back-to-back calls fill ``target_s`` (at least 3)."""
    return max(3, min(most, int(target_s / max(seconds_per_call, 1e-7)) + 1))


def continuous(step: Step, clock: Clock, repeats: int, calls: int) -> dict:
    """② ``calls`` calls back to back, one sync at the end; per call."""
    times = batch_times(step.call, clock, repeats, calls)
    resets = step.reset_info()["reset_before_each_call"]
    return scope("continuous", "② continuous (back to back)", clock.kind + f" around {calls} calls, one sync; "
                 "per call", times, calls_per_repeat=calls,
                 note=(f"each call first copies back {', '.join(resets)} (--reset-args)" if resets else None))


def end_to_end(step: Step, clock: Clock, repeats: int) -> dict:
    """④ copy every CUDA tensor argument in from host memory, call, copy every tensor output back, sync."""
    torch = step.torch
    source = step.before or [t for _, t in step.tensors]         # the arguments as the first call saw them
    moved = [(n, t, b.detach().to("cpu")) for (n, t), b in zip(step.tensors, source) if t.device.type == "cuda"]
    kept = [(t, b) for t, b in step.resets if t.device.type != "cuda"]   # resets not covered by a copy
    outs: list = []
    times = []
    for _ in range(repeats):
        with torch.no_grad():
            for t, b in kept:
                t.copy_(b)
        clock.sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            for _, t, host in moved:
                t.copy_(host)
        result = step.run()
        outs = [(n, o) for n, o in _outputs(torch, result)]
        for _, o in outs:
            if o.device.type != "cpu":
                o.detach().to("cpu")
        clock.sync()
        times.append(time.perf_counter() - t0)
    copied_in = [{"name": n, **describe(t)} for n, t, _ in moved]
    copied_out = [{"name": n, **describe(o)} for n, o in outs if o.device.type != "cpu"]
    others = [n for n, t in step.tensors if t.device.type != "cuda"]
    not_moved = ["module parameters, buffers and optimizer state stay resident on the device (they are the "
                 "model, not the step's input)"] if step.modules else []
    if not step.cuda:
        not_moved.append("the step runs on the CPU: there is nothing to copy, so this is one call timed alone")
    elif others:
        not_moved.append(f"host tensor arguments {', '.join(others)} are passed as they are")
    return scope("end_to_end", "④ end to end (host→device inputs, device→host outputs)",
                 "wall clock from the first input copy to the last output copy and a sync", times,
                 h2d=copied_in, d2h=copied_out, h2d_bytes=sum(c["bytes"] for c in copied_in),
                 d2h_bytes=sum(c["bytes"] for c in copied_out), not_copied=not_moved,
                 note="inputs are copied from pageable host memory into the step's own argument tensors, "
                      "synchronously, as torch's copy_ does")


def _outputs(torch, result) -> list[tuple[str, object]]:
    if isinstance(result, torch.Tensor):
        return [("out", result)]
    if isinstance(result, (list, tuple)):
        return [(f"out[{i}]", r) for i, r in enumerate(result) if isinstance(r, torch.Tensor)]
    if isinstance(result, dict):
        return [(f"out[{k!r}]", r) for k, r in result.items() if isinstance(r, torch.Tensor)]
    return []


def graph_replay(step: Step, clock: Clock, repeats: int, calls: int) -> dict:
    """② the step captured once into a CUDA graph and replayed ``calls`` times back to back."""
    label = "② continuous under CUDA-graph replay"
    if not step.cuda:
        return unavailable("graph_replay", label, "CUDA graphs need a CUDA device; the step runs on the CPU")
    torch = step.torch
    graph = torch.cuda.CUDAGraph()
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):                   # warm-up on a side stream, as torch.cuda.graph asks
                step.call()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            step.call()
    except Exception as exc:                     # noqa: BLE001  (any capture failure is a reason, said)
        step.clear_grads()
        healthy = _healthy(torch)
        reason = f"the step could not be captured into a CUDA graph: {type(exc).__name__}: " + \
                 (str(exc).strip().splitlines() or [""])[0][:300]
        return unavailable("graph_replay", label, reason + ("" if healthy else " (the CUDA context is broken)"),
                           context_ok=healthy)
    times = batch_times(graph.replay, clock, repeats, calls)
    del graph
    resets = step.reset_info()["reset_before_each_call"]
    return scope("graph_replay", label, clock.kind + f" around {calls} replays, one sync; per replay", times,
                 calls_per_repeat=calls, note="the graph holds one call as captured (its resets too)"
                 + (f": {', '.join(resets)}" if resets else ""))


def _healthy(torch) -> bool:
    try:
        torch.cuda.synchronize()
        return True
    except Exception:                            # noqa: BLE001
        return False
